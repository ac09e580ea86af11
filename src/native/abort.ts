import type { NativeAbortFlag } from './addon.js';
import { loadNative } from './load.js';

/** A native abort flag that follows an AbortSignal, so native work stops when the client goes away. */
export function abortFlagFor(signal: AbortSignal | undefined): NativeAbortFlag | undefined {
  if (!signal) return undefined;
  const flag = new (loadNative().AbortFlag)();
  if (signal.aborted) flag.abort();
  else signal.addEventListener('abort', () => flag.abort(), { once: true });
  return flag;
}

/**
 * Loads a native model unless `signal` is aborted first; a model that finished loading after the abort is released
 * (its weights freed) and the abort thrown.
 */
export async function loadUnlessAborted<T extends { release(): void }>(signal: AbortSignal | undefined, load: () => Promise<T>): Promise<T> {
  signal?.throwIfAborted();
  const native = await load();
  if (signal?.aborted) {
    native.release();
    signal.throwIfAborted();
  }
  return native;
}

/**
 * Runs native work that calls back into JS (`onAudio`, say) with a native abort flag that follows `signal` and also
 * stops the work when the caller's callback throws. After the first throw the callback is not called again, and
 * its error, not the work's outcome, is what this throws once the work has settled.
 */
export async function withCallbackAbort<T, A extends unknown[]>(
  signal: AbortSignal | undefined,
  callback: ((...args: A) => void) | undefined,
  work: (flag: NativeAbortFlag, callback: ((...args: A) => void) | null) => Promise<T>,
): Promise<T> {
  const flag = abortFlagFor(signal) ?? new (loadNative().AbortFlag)();
  let callbackFailed = false;
  let callbackError: unknown;
  const guarded = callback
    ? (...args: A) => {
        if (callbackFailed) return;
        try {
          callback(...args);
        } catch (error) {
          callbackFailed = true;
          callbackError = error;
          flag.abort();
        }
      }
    : null;
  try {
    const result = await work(flag, guarded);
    if (callbackFailed) throw callbackError;
    return result;
  } catch (error) {
    throw callbackFailed ? callbackError : error;
  }
}
