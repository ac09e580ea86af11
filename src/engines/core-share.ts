/**
 * Threads for engine calls that run one clip per call on a worker thread, counted across models. ggml's threads spin
 * at barriers, so oversubscribing the cores costs far more than it gains. libparakeet's calls take a team of every
 * core and hold the native core lease (docs/architecture.md "Sharing the cores") for the whole clip, so they take
 * turns; whisper.cpp's own decoder (word timestamps) gets a share of the cores when it starts.
 */
import { availableParallelism } from 'node:os';

let running = 0;
/** Beyond this, ggml's CPU graphs lose more in synchronisation than extra threads win. */
const MAX_THREADS = 8;

/** A team of every core, at most 8: for calls that hold the native core lease for their whole run and take turns. */
export function allCoresThreads(): number {
  return Math.max(1, Math.min(MAX_THREADS, availableParallelism()));
}

/** Runs `call` with its share of the cores: all of them (at most 8) alone, an even split beside other calls. */
export async function withCoreShare<T>(call: (threads: number) => Promise<T>): Promise<T> {
  running++;
  try {
    return await call(Math.max(1, Math.min(MAX_THREADS, Math.floor(availableParallelism() / running))));
  } finally {
    running--;
  }
}
