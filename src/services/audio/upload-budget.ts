/**
 * The memory that audio uploads in flight may hold (--max-inflight-upload-mb): each upload is admitted on its
 * declared size before its body is read, or refused with `503 too_many_uploads` and `Retry-After`, and holds its
 * share until its request ends. An upload is counted at what it costs at its peak, while it is decoded; once
 * decoded, at the audio its request keeps (docs/configuration.md, "Uploads in flight"). Shortly after the last upload
 * of a burst is done, the allocator is asked to give the freed memory back.
 */
import { ApiError } from '../../errors.js';

/**
 * Bytes resident per byte of upload until it is decoded and its work begins, as measured for a 16-bit WAV, whose
 * samples at the decoding rate take twice its size (docs/performance.md): 6.3 for a transcription (the upload, the
 * decoder's copy of it, and the samples twice over while the decoder's output grows and is copied to its size), 8.1
 * for a separation (the separator copies the samples and makes a target stem as large).
 */
export const PEAK_BYTES_PER_UPLOAD_BYTE = 8;
/** Seconds a refused client is told to wait: an upload this large takes seconds to receive and decode. */
const RETRY_AFTER_SECONDS = 5;
/** A burst that held this much is followed by a trim once no upload is in flight. */
const TRIM_AFTER_BYTES = 64 * 1024 * 1024;
/**
 * How long after a burst the trim waits, and waits again whenever an upload comes and goes meanwhile: it runs on the
 * event loop, where a large fragmented heap can take it well past milliseconds, so not in the path of the request
 * that ended the burst, and it finds the uploads' buffers more likely collected by then.
 */
const TRIM_DELAY_MS = 2000;

export interface UploadBudgetOptions {
  /** --max-inflight-upload-mb, in bytes. */
  limitBytes: number;
  /** Gives the memory the allocator keeps back to the system (the addon's trimMemory). */
  trim?: () => void;
}

export class UploadBudget {
  readonly #limitBytes: number;
  readonly #trim: (() => void) | undefined;
  #inFlightBytes = 0;
  #burstPeakBytes = 0;
  #trimTimer: NodeJS.Timeout | undefined;

  constructor(options: UploadBudgetOptions) {
    this.#limitBytes = options.limitBytes;
    this.#trim = options.trim;
  }

  /** Bytes the uploads in flight hold. */
  get inFlightBytes(): number {
    return this.#inFlightBytes;
  }

  /** A new upload, holding nothing until its body is admitted (`Upload.admit`). Dispose of it when its request ends. */
  open(): Upload {
    return new Upload(this);
  }

  /**
   * Adds `bytes` to the total for an upload that holds `heldBytes` already; refused with `503 too_many_uploads` when
   * other uploads hold so much that the total would pass the limit.
   */
  reserve(bytes: number, heldBytes: number): void {
    const others = this.#inFlightBytes - heldBytes;
    // one upload alone is always admitted: --max-upload-mb bounds its size
    if (others > 0 && this.#inFlightBytes + bytes > this.#limitBytes) {
      const mib = (n: number): number => Math.ceil(n / 1048576);
      throw new ApiError(
        'too_many_uploads',
        `uploads in flight hold ${mib(others)} MiB of the ${mib(this.#limitBytes)} MiB they may hold (--max-inflight-upload-mb), ` +
          `and this one needs ${mib(heldBytes + bytes)} MiB; retry later`,
        { headers: { 'Retry-After': String(RETRY_AFTER_SECONDS) } },
      );
    }
    this.adjust(bytes);
  }

  /**
   * Changes the total by `delta` bytes, unchecked; once it has stayed at 0 for TRIM_DELAY_MS after a burst, the
   * allocator is trimmed.
   */
  adjust(delta: number): void {
    // an upload that ends without having been admitted changes nothing, and must not put a trim off
    if (delta === 0) return;
    this.#inFlightBytes += delta;
    this.#burstPeakBytes = Math.max(this.#burstPeakBytes, this.#inFlightBytes);
    clearTimeout(this.#trimTimer);
    this.#trimTimer = undefined;
    if (this.#inFlightBytes > 0) return;
    if (this.#burstPeakBytes < TRIM_AFTER_BYTES || !this.#trim) {
      this.#burstPeakBytes = 0;
      return;
    }
    const trim = this.#trim;
    this.#trimTimer = setTimeout(() => {
      this.#trimTimer = undefined;
      this.#burstPeakBytes = 0;
      trim();
    }, TRIM_DELAY_MS).unref();
  }
}

/** One upload's share of the budget, and its encoded bytes until the decoder takes them. */
export class Upload implements Disposable {
  readonly #budget: UploadBudget;
  #heldBytes = 0;
  #bytes: Buffer | null = null;

  constructor(budget: UploadBudget) {
    this.#budget = budget;
  }

  /**
   * Admits `bodyBytes` more of the request body (for the body reader: the declared length first), counted at the
   * upload's peak; throws `503 too_many_uploads` when the budget cannot hold them.
   */
  readonly admit = (bodyBytes: number): void => {
    const bytes = bodyBytes * PEAK_BYTES_PER_UPLOAD_BYTE;
    this.#budget.reserve(bytes, this.#heldBytes);
    this.#heldBytes += bytes;
  };

  /** Keeps the file's encoded bytes for the decoder. */
  hold(bytes: Buffer): void {
    this.#bytes = bytes;
  }

  /**
   * The encoded bytes, once: nothing here keeps them any more, so they are freed as soon as the decoder has copied
   * them (the native decoder copies its input) and nothing else refers to them.
   */
  take(): Buffer {
    const bytes = this.#bytes;
    if (!bytes) throw new Error('the upload was already taken');
    this.#bytes = null;
    return bytes;
  }

  /**
   * From now on the upload holds `bytes` (its decoded audio, and what is made from it) instead of its estimate: not
   * refused, since the work is done, but counted against the uploads that come next.
   */
  holding(bytes: number): void {
    this.#budget.adjust(bytes - this.#heldBytes);
    this.#heldBytes = bytes;
  }

  [Symbol.dispose](): void {
    this.#bytes = null;
    this.holding(0);
  }
}
