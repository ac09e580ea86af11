import { loadNative, type NativeAbortFlag } from '../native/addon.js';

/** A native abort flag that follows an AbortSignal, so native work stops when the client goes away. */
export function abortFlagFor(signal: AbortSignal | undefined): NativeAbortFlag | undefined {
  if (!signal) return undefined;
  const flag = new (loadNative().AbortFlag)();
  if (signal.aborted) flag.abort();
  else signal.addEventListener('abort', () => flag.abort(), { once: true });
  return flag;
}
