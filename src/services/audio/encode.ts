/**
 * Samples to response audio: the `response_format`s of POST /v1/audio/speech, encoded in-process by FFmpeg's
 * libraries in the native addon (no temporary files, no `ffmpeg` command). A streamed response is one container
 * whose bytes go out as audio arrives (`createEncoder`); a whole clip is one call (`encodeAudio`).
 *
 * | format | codec                  | container     | content type | output rate                                  |
 * | ------ | ---------------------- | ------------- | ------------ | -------------------------------------------- |
 * | mp3    | LAME (libmp3lame)      | MPEG audio    | audio/mpeg   | 8 to 48 kHz MPEG rates: the input's, else the nearest |
 * | wav    | PCM s16le              | RIFF WAVE     | audio/wav    | the input's                                  |
 * | flac   | FLAC                   | native FLAC   | audio/flac   | the input's                                  |
 * | ogg    | Vorbis (libvorbis)     | Ogg           | audio/ogg    | the input's                                  |
 * | opus   | Opus (libopus)         | Ogg           | audio/ogg    | 8/12/16/24/48 kHz: the input's, else the nearest |
 * | aac    | AAC-LC (FFmpeg's)      | ADTS          | audio/aac    | 7.35 to 96 kHz: the input's, else the nearest |
 * | pcm    | PCM s16le              | none (raw)    | audio/pcm    | the input's                                  |
 */
import { apiErrorFromNative } from '../../errors.js';
import type { NativeAudioEncoder } from '../../native/addon.js';
import { loadNative } from '../../native/load.js';

export const AUDIO_FORMATS = ['mp3', 'wav', 'flac', 'ogg', 'opus', 'aac', 'pcm'] as const;
export type AudioFormat = (typeof AUDIO_FORMATS)[number];

const CONTENT_TYPES: Record<AudioFormat, string> = {
  mp3: 'audio/mpeg',
  wav: 'audio/wav',
  flac: 'audio/flac',
  ogg: 'audio/ogg',
  opus: 'audio/ogg',
  aac: 'audio/aac',
  pcm: 'audio/pcm',
};

export function isAudioFormat(value: unknown): value is AudioFormat {
  return typeof value === 'string' && (AUDIO_FORMATS as readonly string[]).includes(value);
}

/** The response's Content-Type. */
export function contentTypeOf(format: AudioFormat): string {
  return CONTENT_TYPES[format];
}

/** The file name extension (`speech.<ext>` in Content-Disposition): the format's name. */
export function fileExtensionOf(format: AudioFormat): string {
  return format;
}

export interface EncoderOptions {
  format: AudioFormat;
  /** Rate of the input samples, Hz (8000 to 192000). */
  sampleRate: number;
  /** Bits per second for mp3, aac, opus and ogg; the format's default when absent. Lossless formats ignore it. */
  bitrate?: number;
  /**
   * Default true: every write() resolves to the bytes produced so far (one container with one header, WAV sizes
   * 0xFFFFFFFF, Ogg pages flushed per write). false: write() resolves to empty buffers and end() to the whole
   * file with a complete header.
   */
  streaming?: boolean;
}

/**
 * One encoded file, a chunk at a time. Calls may be made without awaiting the previous one: they run in order,
 * one at a time (a call that has to wait keeps a copy of its samples). After a failed call every later call
 * fails too; after end() they reject with code `closed`.
 */
export class AudioEncoderStream {
  readonly format: AudioFormat;
  readonly sampleRate: number;
  /** Rate of the encoded audio (Opus streams always decode at 48 kHz whatever the rate they were encoded at). */
  readonly outputSampleRate: number;
  readonly streaming: boolean;
  readonly contentType: string;
  private readonly native: NativeAudioEncoder;
  private tail: Promise<void> = Promise.resolve();
  private pending = 0;

  constructor(native: NativeAudioEncoder) {
    this.native = native;
    this.format = native.format;
    this.sampleRate = native.sampleRate;
    this.outputSampleRate = native.outputSampleRate;
    this.streaming = native.streaming;
    this.contentType = contentTypeOf(native.format);
  }

  /** Encodes `samples` (mono, at `sampleRate`): the container bytes ready now (empty when not streaming). */
  write(samples: Float32Array): Promise<Buffer> {
    return this.enqueue(samples, (s) => this.native.encode(s as Float32Array));
  }

  /** Encodes the optional last samples and closes the file: its last bytes (the whole file when not streaming). */
  end(samples?: Float32Array): Promise<Buffer> {
    return this.enqueue(samples, (s) => this.native.finish(s));
  }

  private enqueue(samples: Float32Array | undefined, call: (samples: Float32Array | undefined) => Promise<Buffer>): Promise<Buffer> {
    let result: Promise<Buffer>;
    if (this.pending === 0) {
      // nothing in flight: the native call copies the samples now (a synchronous throw becomes a rejection)
      result = new Promise<Buffer>((resolve) => resolve(call(samples)));
    } else {
      const copy = samples instanceof Float32Array ? samples.slice() : samples;
      result = this.tail.then(() => call(copy));
    }
    this.pending++;
    this.tail = result.then(
      () => void this.pending--,
      () => void this.pending--,
    );
    return result;
  }
}

/** Throws ApiError `invalid_request` (param `response_format`) when the system's FFmpeg lacks the format's codec. */
export function createEncoder(options: EncoderOptions): AudioEncoderStream {
  const { format, sampleRate, bitrate, streaming = true } = options;
  try {
    return new AudioEncoderStream(new (loadNative().AudioEncoder)({ format, sampleRate, bitrate, streaming }));
  } catch (error) {
    throw apiErrorFromNative(error, {
      codes: ['encoder_unavailable'],
      param: 'response_format',
      describe: (message) => `response_format ${format} is not available on this server: ${message}`,
    });
  }
}

/** A whole clip as one file (WAV with its real sizes, MP3 with its Xing/LAME frame, FLAC with its totals). */
export async function encodeAudio(samples: Float32Array, options: Omit<EncoderOptions, 'streaming'>): Promise<Buffer> {
  return createEncoder({ ...options, streaming: false }).end(samples);
}
