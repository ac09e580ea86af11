/**
 * How far a model's download has got (docs/models.md, "Downloads and the cache"): the bytes of its blobs on disk,
 * whole or as `.incomplete` while a transfer runs, so a download that another process sharing the cache does (a
 * `voxd pull`, another instance) shows as well as this one's. Time left comes from the rate over the last seconds.
 */
import fs from 'node:fs';

export interface DownloadState {
  /** Bytes of the model's files on disk, resumed and cached ones included. */
  bytes: number;
  /** Bytes of all its files (0 until the first file's size is known). */
  total: number;
  /** Seconds left at the recent rate; null while there is no rate yet. */
  eta: number | null;
}

/** The rate is measured over this window: long enough to smooth a CDN's bursts, short enough to follow a change. */
const RATE_WINDOW_MS = 10_000;

export class DownloadTracker {
  /** Blob path → its size, for every file of the model whose size is known. */
  private readonly blobs = new Map<string, number>();
  private expected = 0;
  private readonly samples: { at: number; bytes: number }[] = [];

  /** The model's whole size, when it is known before each file's own (a repository listing gives it). */
  expect(totalBytes: number): void {
    this.expected = Math.max(this.expected, totalBytes);
  }

  /** A file of the model, as the blob it is stored as. */
  add(blobPath: string, size: number): void {
    if (this.blobs.has(blobPath)) return;
    this.blobs.set(blobPath, size);
    // what it has on disk already (cached, or resumed) did not arrive since the samples were taken: not a rate
    const present = Math.min(size, bytesOnDisk(blobPath));
    for (const sample of this.samples) sample.bytes += present;
  }

  state(now = Date.now()): DownloadState {
    let bytes = 0;
    let total = 0;
    for (const [blob, size] of this.blobs) {
      total += size;
      bytes += Math.min(size, bytesOnDisk(blob));
    }
    total = Math.max(total, this.expected);
    this.samples.push({ at: now, bytes });
    // keeps one sample at or before the window's start, so the rate spans the whole window once it can
    while (this.samples.length > 2 && (this.samples[1] as { at: number }).at <= now - RATE_WINDOW_MS) this.samples.shift();
    const first = this.samples[0] as { at: number; bytes: number };
    const seconds = (now - first.at) / 1000;
    const rate = seconds > 0 ? (bytes - first.bytes) / seconds : 0;
    return { bytes, total, eta: rate > 0 ? Math.ceil((total - bytes) / rate) : null };
  }
}

/** A blob's bytes so far: the whole file, else what its transfer wrote, else none. */
function bytesOnDisk(blob: string): number {
  for (const file of [blob, `${blob}.incomplete`]) {
    const stat = fs.statSync(file, { throwIfNoEntry: false });
    if (stat) return stat.size;
  }
  return 0;
}
