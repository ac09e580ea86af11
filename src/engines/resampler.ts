/**
 * Streaming sample-rate conversion in the native addon (libswresample, synchronous: microseconds per 100 ms
 * chunk). Services reach it through `services/audio/resample.ts`.
 */
import { loadNative, type NativeResampler } from '../native/addon.js';

export type { NativeResampler };

/** Throws a NativeError coded `invalid_argument` unless both rates are integers from 1000 to 384000 Hz. */
export function createResamplerNative(inputRate: number, outputRate: number): NativeResampler {
  return new (loadNative().Resampler)({ inputRate, outputRate });
}
