/**
 * A hub that stops sending ends the request instead of holding it (and every request waiting for the model) until
 * undici's own 300 s timeouts.
 */

/** Aborts its signal once `ms` pass without `touch()`. */
export class InactivityTimeout implements Disposable {
  private readonly controller = new AbortController();
  private readonly timer: NodeJS.Timeout;

  constructor(private readonly ms: number) {
    this.timer = setTimeout(() => this.controller.abort(), ms);
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  get fired(): boolean {
    return this.controller.signal.aborted;
  }

  /** What happened once it fired, for messages. */
  get description(): string {
    return `nothing arrived for ${this.ms / 1000} s (--download-timeout-s)`;
  }

  touch(): void {
    this.timer.refresh();
  }

  [Symbol.dispose](): void {
    clearTimeout(this.timer);
  }
}

/** A response body's chunks. `stall` restarts at each one and once the caller is done with it (writing it out is no silence). */
export async function* chunksOf(response: Response, stall: InactivityTimeout): AsyncGenerator<Uint8Array> {
  stall.touch();
  for await (const chunk of response.body ?? []) {
    stall.touch();
    yield chunk;
    stall.touch();
  }
}
