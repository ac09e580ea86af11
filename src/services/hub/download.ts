/**
 * One blob's transfer: into `{etag}.incomplete`, resuming what an earlier attempt left there, then checked against
 * the size and hash the hub announced and renamed into place. The caller makes sure only one transfer of a blob
 * runs at a time (shared-download.ts).
 */
import fsp from 'node:fs/promises';
import path from 'node:path';
import type { HubApi } from './api.js';
import { isNotFound } from '../file-lock.js';
import { causeMessage, HubError, subjectName, type Subject } from './errors.js';
import { ensureFreeSpace } from './disk-space.js';
import { chunksOf } from './inactivity-timeout.js';
import { hashMismatch, type BlobHash } from './integrity.js';
import { DownloadProgress, type ProgressOptions } from './progress.js';

export interface BlobDownload {
  subject: Subject;
  url: string;
  blobPath: string;
  size: number;
  /** What the content must hash to, from the ETag (null when the ETag is no hash this client knows). */
  hash: BlobHash | null;
}

/** Downloads into `{etag}.incomplete` (resuming what is there), verifies, then renames into place. */
export async function downloadBlob(api: HubApi, options: ProgressOptions, download: BlobDownload, signal: AbortSignal): Promise<void> {
  const incompletePath = `${download.blobPath}.incomplete`;
  const partialSize = await sizeOf(incompletePath);
  if (partialSize !== download.size) {
    // A partial file longer than the blob cannot be a prefix of it: start over
    const offset = partialSize !== null && partialSize < download.size ? partialSize : 0;
    await ensureFreeSpace(path.dirname(download.blobPath), download.size - offset, `downloading ${subjectName(download.subject)}`);
    await transfer(api, options, download, incompletePath, offset, signal);
  }
  await verifyDownload(download, incompletePath);
  await fsp.rename(incompletePath, download.blobPath);
}

async function transfer(
  api: HubApi,
  options: ProgressOptions,
  download: BlobDownload,
  incompletePath: string,
  offset: number,
  signal: AbortSignal,
): Promise<void> {
  const { subject } = download;
  using stall = api.stallTimeout();
  const { response } = await api.request(download.url, { method: 'GET', signal, stall, headers: offset > 0 ? { Range: `bytes=${offset}-` } : {} }, subject);
  // A server that ignores Range answers 200 with the whole file: start over
  const resumeFrom = response.status === 206 ? offset : 0;
  const progress = new DownloadProgress(options, subject, download.size, resumeFrom);
  // Writes at explicit offsets: an owner wrongly taken for dead that writes on until it notices writes the same bytes
  // at the same offsets as its successor, never any at a wrong place
  const handle = await fsp.open(incompletePath, resumeFrom > 0 ? 'r+' : 'w');
  let written = resumeFrom;
  try {
    for await (const chunk of chunksOf(response, stall)) {
      await handle.write(chunk, 0, chunk.byteLength, written);
      written += chunk.byteLength;
      if (written > download.size) break; // verifyDownload rejects it; no need to take in more
      progress.update(written);
    }
    await handle.sync();
    progress.finish(written);
  } catch (error) {
    const [name, partial] = [subjectName(subject), `after ${written} of ${download.size} bytes`];
    const kept = 'the partial file is kept and the next attempt resumes from there';
    if (signal.aborted) throw new HubError('aborted', `download of ${name} was cancelled ${partial} (no request waits for it); ${kept}`, { cause: error });
    const [what, reason] = stall.fired ? ['stalled', stall.description] : ['was interrupted', causeMessage(error)];
    throw new HubError('network', `download of ${name} ${what} ${partial} (${reason}); ${kept}`, { cause: error });
  } finally {
    progress.clearBar();
    await handle.close();
  }
}

/** Size then hash against what the hub announced; a mismatching file is deleted, it would never become valid. */
async function verifyDownload(download: BlobDownload, incompletePath: string): Promise<void> {
  const size = (await sizeOf(incompletePath)) ?? 0;
  if (size < download.size) {
    throw new HubError(
      'network',
      `download of ${subjectName(download.subject)} ended after ${size} of ${download.size} bytes; the partial file is kept and the next attempt resumes from there`,
    );
  }
  const mismatch = size > download.size ? `${size} bytes instead of the ${download.size} the hub announced` : await hashMismatch(incompletePath, download.hash);
  if (mismatch !== null) {
    await fsp.rm(incompletePath, { force: true });
    throw new HubError('integrity', `downloaded ${subjectName(download.subject)} is corrupt (${mismatch}); it was deleted, try again`);
  }
}

async function sizeOf(file: string): Promise<number | null> {
  try {
    return (await fsp.stat(file)).size;
  } catch (error) {
    if (isNotFound(error)) return null;
    throw error;
  }
}
