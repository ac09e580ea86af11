/**
 * A request body as the transport delivers it. uWS hands out body chunks only to a data handler attached
 * synchronously in the request handler, so every body is captured from the start and queued until the route reads
 * it; a queue that grows past a threshold pauses the socket, so an unread upload does not fill memory.
 */
import { ApiError } from '../errors.js';
import type { ResponseChannel } from './transport.js';

/** What a body needs of its request's channel. */
type BodyChannel = Pick<ResponseChannel, 'signal' | 'aborted' | 'completed' | 'pause' | 'resume' | 'bodyWanted'>;

/** Bytes queued beyond which the socket stops reading until the reader catches up. */
const PAUSE_ABOVE_BYTES = 1024 * 1024;

export class RequestBody {
  readonly #channel: BodyChannel;
  readonly #declaredLength: number | null;
  #complete: boolean;
  #queue: Buffer[] = [];
  #queuedBytes = 0;
  #paused = false;
  #reading = false;
  /** Set once the reader stopped: later chunks are dropped. */
  #discarding = false;
  #wakeReader: (() => void) | null = null;

  /** `declaredLength`: the Content-Length, if any; `chunked`: whether Transfer-Encoding is chunked. */
  constructor(channel: BodyChannel, declaredLength: number | null, chunked: boolean) {
    this.#channel = channel;
    this.#declaredLength = declaredLength;
    // without either header a request has no body (and uWS reports its empty end only after the handler returned)
    this.#complete = !chunked && !declaredLength;
  }

  /** The Content-Length the client declared, if any. */
  get declaredLength(): number | null {
    return this.#declaredLength;
  }

  /** Whether the whole body arrived (the connection can serve another request). */
  get complete(): boolean {
    return this.#complete;
  }

  /** The transport's body chunks (each one the body's to keep). */
  push(chunk: Buffer, isLast: boolean): void {
    if (isLast) this.#complete = true;
    // nobody reads a body once its reader stopped or the response is over
    if (!this.#discarding && !this.#channel.aborted && !this.#channel.completed && chunk.byteLength > 0) {
      this.#queue.push(chunk);
      this.#queuedBytes += chunk.byteLength;
      if (!isLast && !this.#paused && this.#queuedBytes > PAUSE_ABOVE_BYTES) {
        this.#paused = true;
        this.#channel.pause();
      }
    }
    this.#wake();
  }

  /**
   * The body's chunks, once. Throws 413 when the declared length or the bytes received pass `limitBytes`, and the
   * abort reason when the client disconnects. `admit` is asked before any chunk is taken, with the declared length
   * (0 without one), and then with each chunk's bytes beyond it; what it throws (a 503, say) ends the read. Only a
   * body admitted so is asked for (`bodyWanted`): a client that waits for `100 Continue` gets the refusal instead.
   * Stopping early drops the rest of the body.
   */
  async *read(limitBytes: number, admit?: (bytes: number) => void): AsyncGenerator<Buffer, void, undefined> {
    if (this.#reading) throw new Error('the request body can be read only once');
    this.#reading = true;
    // only a reader waits for chunks, so only a read listens for the client leaving (most requests have no body)
    this.#channel.signal.addEventListener('abort', () => this.#wake(), { once: true });
    try {
      if (this.#declaredLength !== null && this.#declaredLength > limitBytes) throw tooLarge(limitBytes);
      let admitted = this.#declaredLength ?? 0;
      admit?.(admitted);
      this.#channel.bodyWanted();
      let received = 0;
      for (;;) {
        const chunk = this.#queue.shift();
        if (chunk) {
          this.#queuedBytes -= chunk.byteLength;
          received += chunk.byteLength;
          if (received > limitBytes) throw tooLarge(limitBytes);
          if (received > admitted) {
            admit?.(received - admitted);
            admitted = received;
          }
          yield chunk;
        } else if (this.#channel.aborted) {
          throw this.#channel.signal.reason;
        } else if (this.#complete) {
          return;
        } else {
          if (this.#paused) {
            this.#paused = false;
            this.#channel.resume();
          }
          await new Promise<void>((resolve) => (this.#wakeReader = resolve));
        }
      }
    } finally {
      // the rest of the body is read and dropped, not cut off: closing a connection the client still writes to
      // resets it, and the client may lose the answer (a 413, say) with it
      this.#discarding = true;
      this.#queue = [];
      this.#queuedBytes = 0;
      if (this.#paused) {
        this.#paused = false;
        this.#channel.resume();
      }
    }
  }

  #wake(): void {
    const wake = this.#wakeReader;
    this.#wakeReader = null;
    wake?.();
  }
}

function tooLarge(limitBytes: number): ApiError {
  return new ApiError('payload_too_large', `Request body exceeds the limit of ${limitBytes} bytes`);
}
