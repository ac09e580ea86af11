/**
 * Uploaded audio files to samples: any container and codec the native decoder reads (WAV, MP3, FLAC, MP4/M4A,
 * ADTS AAC, Ogg Vorbis/Opus, WebM/Matroska, ...), down-mixed to mono float32 and resampled to the rate the
 * engine wants. Bad input becomes a 400 `invalid_audio` that names the problem, with `param: "file"`.
 */
import { decodeAudioNative, nativeErrorCode, type DecodedAudio } from '../../engines/audio-decoder.js';
import { ApiError } from '../../http/errors.js';

export type { DecodedAudio };

export interface DecodeOptions {
  /** Output rate, Hz: 16000 for speech recognition. */
  sampleRate: number;
  /** Refuse audio longer than this many seconds (decoding stops as soon as it gets there). */
  maxSeconds?: number;
  /** The request's signal: decoding stops between packets once it fires (rejects with code `aborted`). */
  signal?: AbortSignal;
}

export async function decodeAudio(data: Buffer, options: DecodeOptions): Promise<DecodedAudio> {
  const { sampleRate, maxSeconds, signal } = options;
  try {
    return await decodeAudioNative(data, maxSeconds === undefined ? { sampleRate } : { sampleRate, maxSeconds }, signal);
  } catch (error) {
    const code = nativeErrorCode(error);
    if (code === 'invalid_audio' || code === 'audio_too_long') {
      throw new ApiError('invalid_audio', (error as Error).message, { param: 'file', cause: error });
    }
    throw error;
  }
}
