/**
 * Audio encoding in the native addon (FFmpeg's libavcodec, libavformat and libswresample on a libuv worker
 * thread): mono float32 samples become one mp3, wav, flac, ogg (Vorbis), opus (Ogg Opus), aac (ADTS) or raw
 * pcm file, a chunk at a time. Services reach it through `services/audio/encode.ts`, which names content types,
 * orders calls and turns rejections into API errors.
 */
import { loadNative, type NativeAudioEncoder, type NativeAudioEncoderOptions, type NativeAudioFormat } from '../native/addon.js';

export type AudioEncoderOptions = NativeAudioEncoderOptions;
export type NativeEncoder = NativeAudioEncoder;

/** Throws a NativeError coded `invalid_argument` (bad options) or `encoder_unavailable` (FFmpeg lacks the codec). */
export function createAudioEncoderNative(options: AudioEncoderOptions): NativeEncoder {
  return new (loadNative().AudioEncoder)(options);
}

/** The formats the linked FFmpeg libraries can encode. */
export function encodableFormats(): readonly NativeAudioFormat[] {
  return loadNative().AudioEncoder.formats;
}
