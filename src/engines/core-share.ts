/**
 * Threads for whisper.cpp's own decoder (word timestamps), which runs one clip per call on a worker thread: each call
 * gets its share of the cores when it starts, counted across models. ggml's threads spin at barriers, so
 * oversubscribing the cores costs far more than it gains.
 */
import { availableParallelism } from 'node:os';

let running = 0;
/** Beyond this, ggml's CPU graphs lose more in synchronisation than extra threads win. */
const MAX_THREADS = 8;

/** Runs `call` with its share of the cores: all of them (at most 8) alone, an even split beside other calls. */
export async function withCoreShare<T>(call: (threads: number) => Promise<T>): Promise<T> {
  running++;
  try {
    return await call(Math.max(1, Math.min(MAX_THREADS, Math.floor(availableParallelism() / running))));
  } finally {
    running--;
  }
}
