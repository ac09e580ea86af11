/**
 * Uploaded audio files to samples: any container and codec the native decoder reads (WAV, MP3, FLAC, MP4/M4A,
 * ADTS AAC, Ogg Vorbis/Opus, WebM/Matroska, ...), down-mixed to mono float32 and resampled to the rate the
 * engine wants, or (separation) kept at the source's rate and channels. The decoder is FFmpeg's libavformat,
 * libavcodec and libswresample in the native addon, on a libuv worker thread. Bad input becomes a 400
 * `invalid_audio` that names the problem, with `param: "file"`.
 */
import type { PcmAudio } from '../../engines/types.js';
import { apiErrorFromNative } from '../../errors.js';
import { abortFlagFor } from '../../native/abort.js';
import type { NativeDecodeAudioOptions, NativeDecodedAudio } from '../../native/addon.js';
import { loadNative } from '../../native/load.js';

export type DecodedAudio = NativeDecodedAudio;

export interface DecodeOptions {
  /** Output rate, Hz: 16000 for speech recognition. */
  sampleRate: number;
  /** Refuse audio longer than this many seconds (decoding stops as soon as it gets there). */
  maxSeconds?: number;
  /** The request's signal: decoding stops between packets once it fires (rejects with code `aborted`). */
  signal?: AbortSignal;
}

/** Mono at `sampleRate`. */
export function decodeAudio(data: Buffer, options: DecodeOptions): Promise<DecodedAudio> {
  const { sampleRate, maxSeconds, signal } = options;
  return decodeChecked(data, maxSeconds === undefined ? { sampleRate } : { sampleRate, maxSeconds }, signal);
}

/** At the source's rate, mono or stereo as the source is (wider sources down-mixed to stereo), one array per channel. */
export function decodeAudioChannels(data: Buffer, options: Omit<DecodeOptions, 'sampleRate'>): Promise<PcmAudio> {
  const { maxSeconds, signal } = options;
  return decodeChecked(data, maxSeconds === undefined ? { channels: 'source' } : { channels: 'source', maxSeconds }, signal).then(deinterleave);
}

function deinterleave(decoded: DecodedAudio): PcmAudio {
  const frames = decoded.samples.length / decoded.channels;
  if (decoded.channels === 1) return { channels: [decoded.samples], sampleRate: decoded.sampleRate };
  const channels = Array.from({ length: decoded.channels }, () => new Float32Array(frames));
  for (let i = 0; i < frames; i++) {
    for (let c = 0; c < decoded.channels; c++) (channels[c] as Float32Array)[i] = decoded.samples[i * decoded.channels + c] as number;
  }
  return { channels, sampleRate: decoded.sampleRate };
}

/** The native decoder as it is: rejects with a NativeError coded `invalid_audio`, `audio_too_long`, `aborted` or `invalid_argument`. */
export function decodeAudioNative(data: Uint8Array, options: NativeDecodeAudioOptions, signal?: AbortSignal): Promise<DecodedAudio> {
  return loadNative().decodeAudio(data, options, abortFlagFor(signal));
}

/**
 * Not an async function, nor are its callers: an async function's frame would keep `data` alive until the decoding
 * ends, while the decoder works on a copy of its own from the moment it is called.
 */
function decodeChecked(data: Buffer, options: NativeDecodeAudioOptions, signal: AbortSignal | undefined): Promise<DecodedAudio> {
  return decodeAudioNative(data, options, signal).catch((error: unknown) => {
    throw apiErrorFromNative(error, { codes: ['invalid_audio', 'audio_too_long'], param: 'file' });
  });
}
