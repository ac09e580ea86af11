/**
 * Engines report progress through callbacks (`onSegment`, `onAudio`); services hand it on as async iterables.
 * `callbackStream` bridges the two without slowing the engine: what it reports waits in memory until taken.
 */

/**
 * Runs `work` and yields each item it passes to `emit`, in order, then returns what the work resolved with; a
 * failure of the work is thrown after the items emitted before it. When the consumer stops early, the generator
 * still waits for the work to settle (stop it through its abort signal), so nothing the work uses is released
 * under it.
 */
export async function* callbackStream<T, R>(work: (emit: (item: T) => void) => Promise<R>): AsyncGenerator<T, R, undefined> {
  const items: T[] = [];
  let wake: (() => void) | null = null;
  let settled = false;
  const notify = (): void => {
    wake?.();
    wake = null;
  };
  const outcome = work((item) => {
    items.push(item);
    notify();
  }).finally(() => {
    settled = true;
    notify();
  });
  outcome.catch(() => undefined); // observed below; a consumer that stopped early does not see it
  try {
    for (;;) {
      while (items.length > 0) yield items.shift() as T;
      if (settled) return await outcome;
      await new Promise<void>((resolve) => (wake = resolve));
    }
  } finally {
    await outcome.catch(() => undefined);
  }
}
