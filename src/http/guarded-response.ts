/**
 * The only holder of a uWS HttpResponse. uWS invalidates a response once it was aborted or completed and
 * crashes on later use, and writes made outside a uWS callback must be corked; `use()` enforces both.
 */
import type { UwsResponse } from './uws.js';

export class GuardedResponse {
  readonly #res: UwsResponse;
  #state: 'open' | 'finished' | 'aborted' = 'open';
  readonly #abort = new AbortController();

  /** Must run synchronously inside the uWS request handler, before any await. */
  constructor(res: UwsResponse, onData: (chunk: ArrayBuffer, isLast: boolean) => void) {
    this.#res = res;
    res.onAborted(() => {
      this.#state = 'aborted';
      this.#abort.abort();
    });
    res.onData(onData);
  }

  /** Aborted when the connection closed before the response completed (client gone, or `close()`). */
  get signal(): AbortSignal {
    return this.#abort.signal;
  }

  get aborted(): boolean {
    return this.#state === 'aborted';
  }

  /** Neither aborted nor completed. */
  get open(): boolean {
    return this.#state === 'open';
  }

  /** Runs `fn` with the response corked, unless it was aborted or completed (then `fn` does not run). */
  use<T>(fn: (res: UwsResponse) => T): T | undefined {
    if (this.#state !== 'open') return undefined;
    let result: T | undefined;
    this.#res.cork(() => {
      result = fn(this.#res);
    });
    return result;
  }

  /** uWS completed the response and invalidated it. */
  markFinished(): void {
    if (this.#state === 'open') this.#state = 'finished';
  }

  /** Closes the connection at once; the client sees a truncated transfer. */
  close(): void {
    if (this.#state === 'open') this.#res.close();
  }

  /** Fires the signal as if the client had left, so the request's work stops; the response stays usable. */
  cancelWork(): void {
    this.#abort.abort();
  }
}
