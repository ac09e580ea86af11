/**
 * Work done once for every caller that waits for it (a hub download, a model load). Each caller may stop waiting
 * when its own signal aborts; the work itself is aborted only once no caller waits any more, so one client's
 * departure never stops it for the others, and the last one's does not leave it running for nobody. Work that
 * reaches a step it cannot stop (`uncancellable`) runs to its end whoever leaves, and later callers join it: starting
 * it anew then would run that step twice at once.
 */
export class SharedWork<T> {
  readonly promise: Promise<T>;
  private readonly controller = new AbortController();
  private waiters = 0;
  private cancellable = true;

  /** `run` calls `uncancellable()` when it reaches a step that no signal stops; its signal never aborts from then on. */
  constructor(run: (signal: AbortSignal, uncancellable: () => void) => Promise<T>) {
    this.promise = run(this.controller.signal, () => {
      this.cancellable = false;
    });
  }

  /**
   * Stops the work for every caller (they get its failure), unless it reached its uncancellable step; whether it
   * stopped it.
   */
  cancel(): boolean {
    if (!this.cancellable) return false;
    this.controller.abort();
    return true;
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
          if (this.waiters === 0 && this.cancellable) this.controller.abort();
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
