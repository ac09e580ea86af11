/**
 * Speech-to-text, the one entry point of every STT path: file transcription and translation (POST
 * /v1/audio/transcriptions and /translations) and the live sessions of both transcription WebSockets. It leases
 * the model, checks the request against what the model declares it can do (docs/api.md), decodes uploads, cuts
 * long audio at the pauses the VAD finds for fixed-window engines, and runs every engine call as a scheduler job.
 */
import type { SttModel, TranscribeOptions, TranscriptionResult, TranscriptionSegment, VadModel } from '../../engines/types.js';
import { ApiError } from '../../errors.js';
import { decodeAudio, type DecodedAudio } from '../audio/decode.js';
import type { Upload } from '../audio/upload-budget.js';
import { callbackStream } from '../callback-stream.js';
import { languageCode } from '../../languages.js';
import { observeRealTimeFactor, type Metrics } from '../metrics.js';
import type { ModelLease, ModelRegistry } from '../registry.js';
import type { JobLimits, Scheduler, ScheduledModel } from '../scheduler.js';
import { LiveTranscriber, type LiveSettings, type TurnListener } from './live-transcriber.js';
import { LONG_AUDIO_SECONDS, transcribeSpeechChunks } from './speech-chunks.js';

export type SttTask = 'transcribe' | 'translate';

/** What a request asks of a model, as the client sent it. */
export interface SttNeeds {
  /** A language code or English name; null or absent = detect. */
  language?: string | null;
  task?: SttTask;
  /** Word timestamps (timestamp_granularities[]=word). */
  wordTimestamps?: boolean;
}

/** What the model will be asked to do: the language as an ISO 639-1 code, and whether to translate. */
export interface SttPlan {
  language: string | null;
  translate: boolean;
}

/**
 * Checks a request against the model's declared capabilities: the one place translation and language are
 * refused. Translating means "into English", so audio declared English is transcribed, as is any audio an
 * English-only model hears (unless declared to be in another language, which is more than it can do).
 */
export function planTranscription(model: SttModel, { language: given = null, task = 'transcribe', wordTimestamps = false }: SttNeeds): SttPlan {
  if (wordTimestamps && !model.capabilities.wordTimestamps) {
    throw new ApiError('invalid_request', `model ${model.id} gives no word timestamps (its engine, ${model.engine}, does not time words)`, {
      param: 'timestamp_granularities',
    });
  }
  const language = given === null ? null : languageCode(given);
  if (given !== null && language === null) {
    throw new ApiError('invalid_request', `unknown language '${given}' (use an ISO 639-1 code such as en)`, { param: 'language' });
  }
  const { languages, translate: canTranslate } = model.capabilities;
  const englishOnly = languages?.length === 1 && languages[0] === 'en';
  // audio declared English (or heard by an English-only model) is its own translation
  const translate = task === 'translate' && language !== 'en' && !(englishOnly && language === null);
  if (translate && !canTranslate) {
    const reason = englishOnly
      ? `: it hears English only, and the audio is declared to be '${given}'`
      : `: its engine (${model.engine}) does not translate; English audio declared with language=en is transcribed`;
    throw new ApiError('invalid_request', `model ${model.id} cannot translate${reason}`, { param: englishOnly ? 'language' : 'model' });
  }
  if (language !== null && !translate && languages && !languages.includes(language)) {
    throw new ApiError('invalid_request', `model ${model.id} transcribes ${languages.join(', ')}; language '${given}' is not supported`, {
      param: 'language',
    });
  }
  return { language: translate ? null : language, translate };
}

export interface TranscriptionRequest extends SttNeeds {
  model: string;
  /** The uploaded file, in any format the decoder reads; it holds the decoded audio's share of the upload budget. */
  file: Upload;
  prompt: string | null;
  temperature?: number;
  maxTokens?: number;
  wordTimestamps: boolean;
  /** The client's: decoding and engine work stop when it fires. */
  signal: AbortSignal;
}

/**
 * What a transcription reports as it runs: its text as it is decoded (a token or so at a time on engines that stream
 * text, else a segment's at a time), each segment once decoded, then the whole transcript.
 */
export type TranscriptEvent =
  | { type: 'delta'; text: string; partial: boolean }
  | { type: 'segment'; segment: TranscriptionSegment; language: string }
  | { type: 'done'; result: TranscriptionResult };

export interface TranscriberOptions {
  registry: ModelRegistry;
  scheduler: Scheduler;
  /** Records each transcription's real-time factor. */
  metrics: Metrics;
  /** --vad-model: cuts long uploads and detects turns in live sessions. */
  vadModel: string;
  /** --max-audio-seconds. */
  maxAudioSeconds: number;
  /** --realtime-transcription-delay-ms, for models that declare it. */
  liveDelayMs: number | null;
}

export class Transcriber {
  constructor(private readonly options: TranscriberOptions) {}

  /**
   * A transcription ready to run: its model leased and checked, its audio decoded (4xx errors come from here,
   * before any answer begins). It holds its models until disposed: `using transcription = await ...`.
   */
  async prepare(request: TranscriptionRequest): Promise<Transcription> {
    const { lease, plan } = await this.lease(request.model, request, request.signal);
    try {
      const model = lease.model;
      const { maxAudioSeconds } = this.options;
      const audio = await decodeAudio(request.file.take(), { sampleRate: model.sampleRate, maxSeconds: maxAudioSeconds, signal: request.signal });
      request.file.holding(audio.samples.byteLength);
      const chunkSeconds = model.capabilities.chunkSeconds ?? LONG_AUDIO_SECONDS;
      const vad = model.capabilities.vadChunking && audio.duration > chunkSeconds ? await this.leaseVad(request.signal) : null;
      const options: TranscribeOptions = {
        language: plan.language,
        prompt: request.prompt,
        temperature: request.temperature,
        maxTokens: request.maxTokens,
        wordTimestamps: request.wordTimestamps,
        translate: plan.translate,
      };
      return new Transcription(this, lease, vad, audio, options, request.signal, this.options.metrics);
    } catch (error) {
      lease.release();
      throw error;
    }
  }

  /** A live transcription: the engine side of a WebSocket session (see LiveTranscriber). */
  live(settings: LiveSettings, listener: TurnListener, signal: AbortSignal, noModelHint: string, moreWaiting: () => boolean): LiveTranscriber {
    return new LiveTranscriber(this, { noModelHint, delayMs: this.options.liveDelayMs, moreWaiting }, settings, listener, signal);
  }

  /** The STT model `id` leased for a request, which is checked against it first (`planTranscription`); `signal` is the client's. */
  async lease(id: string, needs: SttNeeds, signal: AbortSignal): Promise<{ lease: ModelLease<SttModel>; plan: SttPlan }> {
    const lease = await this.options.registry.acquire<SttModel>(id, 'stt', signal);
    try {
      return { lease, plan: planTranscription(lease.model, needs) };
    } catch (error) {
      lease.release();
      throw error;
    }
  }

  /** The VAD model (--vad-model), leased; `signal` is the client's. */
  leaseVad(signal: AbortSignal): Promise<ModelLease<VadModel>> {
    return this.options.registry.acquire<VadModel>(this.options.vadModel, 'vad', signal);
  }

  /** One engine call of `model`, as a scheduler job of its own. */
  run<T>(model: ScheduledModel, job: (signal: AbortSignal) => Promise<T>, signal: AbortSignal, limits?: JobLimits): Promise<T> {
    return this.options.scheduler.run(model, job, signal, limits);
  }
}

/** A prepared file transcription (Transcriber.prepare); run it once, whole or streamed. */
export class Transcription implements Disposable {
  constructor(
    private readonly transcriber: Transcriber,
    private readonly lease: ModelLease<SttModel>,
    private readonly vad: ModelLease<VadModel> | null,
    private readonly audio: DecodedAudio,
    private readonly options: TranscribeOptions,
    private readonly signal: AbortSignal,
    private readonly metrics: Metrics,
  ) {}

  /** The whole transcript; `onSegment` and `onText` see each segment and the text as they are decoded. */
  async result(callbacks: Pick<TranscribeOptions, 'onSegment' | 'onText'> = {}): Promise<TranscriptionResult> {
    const model = this.lease.model;
    const vad = this.vad?.model;
    const started = performance.now();
    const result = await this.transcriber.run(
      model,
      (signal) => {
        const options = { ...this.options, signal, ...callbacks };
        return vad
          ? transcribeSpeechChunks(model, vad, this.audio.samples, options, model.capabilities.chunkSeconds)
          : model.transcribe(this.audio.samples, options);
      },
      this.signal,
      // a long file may take as long as it lasts, whatever the job time limit
      { minTimeoutMs: this.audio.duration * 1000 },
    );
    observeRealTimeFactor(this.metrics, model.id, 'stt', performance.now() - started, this.audio.duration);
    return result;
  }

  /** The text and each segment as they are decoded, then the whole transcript. */
  events(): AsyncGenerator<TranscriptEvent> {
    const streamsText = this.lease.model.capabilities.streamsText ?? false;
    return callbackStream<TranscriptEvent, void>(async (emit) => {
      const result = await this.result({
        onText: streamsText ? (text) => emit({ type: 'delta', text, partial: true }) : undefined,
        onSegment: (segment, language) => {
          if (!streamsText) emit({ type: 'delta', text: segment.text, partial: false });
          emit({ type: 'segment', segment, language });
        },
      });
      emit({ type: 'done', result });
    });
  }

  [Symbol.dispose](): void {
    this.lease.release();
    this.vad?.release();
  }
}
