/**
 * Audio decoding in the native addon (FFmpeg's libavformat, libavcodec and libswresample on a libuv worker
 * thread): a whole file held in memory becomes mono float32 at the rate an engine wants. Services reach it
 * through `services/audio/decode.ts`, which turns its rejections into API errors.
 */
import { loadNative, type NativeDecodeAudioOptions, type NativeDecodedAudio } from '../native/addon.js';
import { abortFlagFor } from './native-abort.js';

export type DecodedAudio = NativeDecodedAudio;
export type DecodeAudioOptions = NativeDecodeAudioOptions;

/** Rejects with a NativeError coded `invalid_audio`, `audio_too_long`, `aborted` or `invalid_argument`. */
export function decodeAudioNative(data: Uint8Array, options: DecodeAudioOptions, signal?: AbortSignal): Promise<DecodedAudio> {
  return loadNative().decodeAudio(data, options, abortFlagFor(signal));
}
