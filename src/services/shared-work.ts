/**
 * Work done once for every caller that waits for it (a hub download, a model load). Each caller may stop waiting
 * when its own signal aborts; the work itself is aborted only once no caller waits any more, so one client's
 * departure never stops it for the others, and the last one's does not leave it running for nobody.
 */
export class SharedWork<T> {
  readonly promise: Promise<T>;
  private readonly controller = new AbortController();
  private waiters = 0;

  constructor(run: (signal: AbortSignal) => Promise<T>) {
    this.promise = run(this.controller.signal);
  }

  /** Every caller stopped waiting: the work is being stopped, and a new caller must start it anew. */
  get abandoned(): boolean {
    return this.controller.signal.aborted;
  }

  /**
   * Settles with the work, or rejects with `leftError()` as soon as `signal` aborts. A caller without a signal
   * waits to the end (and keeps the work going).
   */
  wait(signal: AbortSignal | undefined, leftError: () => unknown): Promise<T> {
    this.waiters++;
    return new Promise<T>((resolve, reject) => {
      let settled = false;
      const settle = (outcome: () => void): void => {
        if (settled) return;
        settled = true;
        this.waiters--;
        signal?.removeEventListener('abort', onAbort);
        outcome();
      };
      const onAbort = (): void =>
        settle(() => {
          if (this.waiters === 0) this.controller.abort();
          reject(leftError());
        });
      if (signal?.aborted) return onAbort();
      signal?.addEventListener('abort', onAbort, { once: true });
      this.promise.then(
        (value) => settle(() => resolve(value)),
        (error: unknown) => settle(() => reject(error)),
      );
    });
  }
}
