/**
 * Speech-to-text on whisper.cpp model files (ggml Whisper files such as `ggerganov/whisper.cpp/ggml-base.en.bin`).
 * The native model batches concurrent transcriptions (its own GGML graphs over the file: docs/architecture.md
 * "Batched Whisper"), so the model admits up to `--stt-max-batch-size` jobs at once and they share every pass over
 * the weights; a request with word timestamps takes whisper.cpp's own decoder on a worker thread instead.
 */
import { deflateSync } from 'node:zlib';
import type { NativeWhisperInfo, NativeWhisperModel, NativeWhisperParams, NativeWhisperResult, NativeWhisperSegment } from '../native/addon.js';
import { loadNative } from '../native/load.js';
import { unloadedModelError } from '../errors.js';
import { withCoreShare } from './core-share.js';
import { GGML_FILE_MAGIC, readFileHead } from './file-head.js';
import { loadUnlessAborted, withCallbackAbort } from '../native/abort.js';
import type {
  Engine,
  ResolvedModel,
  StreamingOptions,
  SttModel,
  SttStreamingSession,
  TranscribeOptions,
  TranscriptionResult,
  TranscriptionSegment,
} from './types.js';
import { RedecodingStreamingSession } from './redecoding-streaming.js';

const SAMPLE_RATE = 16000;
/** whisper.cpp's default fallback step: a window that fails its checks is decoded again this much hotter. */
const TEMPERATURE_INCREMENT = 0.2;

/** What the file header says (the same fields the loaded model reports, less those derived from them). */
export type WhisperHeader = Omit<NativeWhisperInfo, 'type' | 'languages' | 'gpu'>;

/**
 * Reads the hparams of a whisper.cpp model file, or null when the file is something else. After the magic a
 * Whisper file has eleven int32 hparams and then the mel filter bank (n_mel, n_fft = 201); a Silero VAD file
 * has the same magic followed by a length-prefixed "silero-..." string, which fails the vocabulary check.
 */
export async function readWhisperHeader(path: string): Promise<WhisperHeader | null> {
  const size = 4 + 13 * 4;
  const head = await readFileHead(path, size);
  if (!head || head.length < size || head.readUInt32LE(0) !== GGML_FILE_MAGIC) return null;
  const [nVocab, nAudioCtx, nAudioState, nAudioHead, nAudioLayer, nTextCtx, nTextState, nTextHead, nTextLayer, nMels, ftype, nMel, nFft] = Array.from(
    { length: 13 },
    (_, i) => head.readInt32LE(4 + 4 * i),
  ) as [number, number, number, number, number, number, number, number, number, number, number, number, number];
  const plausible =
    nVocab >= 51864 && // the Whisper tokenizer: 51864 English-only, 51865 multilingual, 51866 large-v3
    nVocab <= 1 << 20 &&
    nAudioCtx > 0 &&
    nTextCtx > 0 &&
    nAudioState > 0 &&
    nTextState === nAudioState &&
    nAudioHead > 0 &&
    nAudioState % nAudioHead === 0 &&
    nTextHead > 0 &&
    nTextState % nTextHead === 0 &&
    nAudioLayer > 0 &&
    nAudioLayer <= 256 &&
    nTextLayer > 0 &&
    nTextLayer <= 256 &&
    nMel === nMels &&
    nFft === 201 &&
    ftype >= 0;
  if (!plausible) return null;
  return {
    nVocab,
    nAudioCtx,
    nAudioState,
    nAudioHead,
    nAudioLayer,
    nTextCtx,
    nTextState,
    nTextHead,
    nTextLayer,
    nMels,
    ftype,
    multilingual: nVocab >= 51865,
  };
}

/**
 * The vendor's compression ratio: UTF-8 bytes over zlib-compressed bytes. Node's `deflateSync` defaults (level
 * 6, 32 KiB window, zlib framing) produce what Python's `zlib.compress` does, so the value matches
 * openai-whisper's exactly. whisper.cpp's own repetition check is token entropy and gives no such number.
 */
export function compressionRatio(text: string): number {
  const bytes = Buffer.from(text, 'utf8');
  return bytes.length === 0 ? 0 : bytes.length / deflateSync(bytes).length;
}

export interface WhisperEngineOptions {
  /** Transcriptions decoded together (--stt-max-batch-size); default 8. */
  maxBatchSize?: number;
}

function toSegment(segment: NativeWhisperSegment, wordTimestamps: boolean): TranscriptionSegment {
  const out: TranscriptionSegment = {
    id: segment.index,
    start: segment.start,
    end: segment.end,
    text: segment.text,
    tokens: segment.tokens,
    temperature: segment.temperature,
    avgLogprob: segment.avgLogprob,
    compressionRatio: compressionRatio(segment.text),
    noSpeechProb: segment.noSpeechProb,
  };
  if (wordTimestamps) out.words = (segment.words ?? []).map(({ word, start, end }) => ({ word, start, end }));
  return out;
}

class WhisperSttModel implements SttModel {
  readonly task = 'stt' as const;
  readonly engine = 'whisper';
  readonly sampleRate = SAMPLE_RATE;
  readonly capabilities: SttModel['capabilities'];
  constructor(
    readonly id: string,
    private native: NativeWhisperModel | null,
    readonly info: NativeWhisperInfo,
    /** Jobs admitted at once all join the native model's batch. */
    readonly batchSize: number,
  ) {
    this.capabilities = { translate: info.multilingual, wordTimestamps: true, languages: info.multilingual ? info.languages : ['en'], vadChunking: true };
  }

  private get loaded(): NativeWhisperModel {
    if (!this.native) throw unloadedModelError(this.id);
    return this.native;
  }

  async transcribe(samples: Float32Array, options: TranscribeOptions = {}): Promise<TranscriptionResult> {
    const native = this.loaded;
    // translation and the language were checked against `capabilities` by the speech-to-text service
    const language = options.language ? options.language.trim().toLowerCase() : null;
    const wordTimestamps = options.wordTimestamps ?? false;
    const temperature = options.temperature ?? 0;
    const params: NativeWhisperParams = {
      language,
      translate: options.translate ?? false,
      initialPrompt: options.prompt || null,
      // the vendor's semantics: 0 means "start greedy, fall back hotter when a window fails its checks";
      // an explicit temperature is used as is
      temperature,
      temperatureInc: temperature > 0 || options.fallback === false ? 0 : TEMPERATURE_INCREMENT,
      maxTokens: options.maxTokens && options.maxTokens > 0 ? Math.floor(options.maxTokens) : 0,
      wordTimestamps,
    };

    const userOnSegment = options.onSegment;
    const onSegment = userOnSegment ? (segment: NativeWhisperSegment, lang: string) => userOnSegment(toSegment(segment, wordTimestamps), lang) : undefined;
    const run = (withThreads: NativeWhisperParams): Promise<NativeWhisperResult> =>
      withCallbackAbort(options.signal, onSegment, (flag, guarded) => native.transcribe(samples, withThreads, guarded, flag));
    // whisper.cpp's path takes a share of the cores; the batcher has its own threads
    const result = wordTimestamps ? await withCoreShare((threads) => run({ ...params, threads })) : await run(params);
    const segments = result.segments.map((segment) => toSegment(segment, wordTimestamps));
    return {
      text: segments
        .map((s) => s.text)
        .join('')
        .trim(),
      language: result.language,
      duration: samples.length / SAMPLE_RATE,
      segments,
    };
  }

  /** Decodes the turn every `delayMs` (--realtime-transcription-delay-ms) of new audio: the model declares it. */
  readonly declaresDelay = true;

  async createStreamingSession(options: StreamingOptions = {}): Promise<SttStreamingSession> {
    return new RedecodingStreamingSession(this, options);
  }

  async dispose(): Promise<void> {
    // the weights are freed now, or by the last transcription still running
    this.native?.release();
    this.native = null;
  }
}

export function createWhisperEngine(options: WhisperEngineOptions = {}): Engine<SttModel> {
  const maxBatch = options.maxBatchSize ?? 8;
  return {
    name: 'whisper',
    task: 'stt',
    async detect(path: string): Promise<boolean> {
      return (await readWhisperHeader(path)) !== null;
    },
    async load(model: ResolvedModel, signal?: AbortSignal): Promise<SttModel> {
      if (!model.path) throw new Error('the whisper engine needs a model file');
      const path = model.path;
      const native = await loadUnlessAborted(signal, () => loadNative().WhisperModel.load(path, { maxBatch }));
      return new WhisperSttModel(model.id, native, native.info(), maxBatch);
    },
  };
}

export const whisperEngine: Engine<SttModel> = createWhisperEngine();
