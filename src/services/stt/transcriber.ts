/**
 * Speech-to-text, the one entry point of every STT path: file transcription and translation (POST
 * /v1/audio/transcriptions and /translations) and the live sessions of both transcription WebSockets. It leases
 * the model, checks the request against what the model declares it can do (docs/api.md), decodes uploads, cuts
 * long audio at the pauses the VAD finds for fixed-window engines, and runs every engine call as a scheduler job.
 */
import type {
  DiarizerModel,
  SpeakerTurn,
  SttModel,
  TranscribeOptions,
  TranscriptionResult,
  TranscriptionSegment,
  VadModel,
  VadParams,
} from '../../engines/types.js';
import { ApiError } from '../../errors.js';
import { decodeAudio, type DecodedAudio } from '../audio/decode.js';
import type { Upload } from '../audio/upload-budget.js';
import { callbackStream } from '../callback-stream.js';
import { languageCode } from '../../languages.js';
import { observeRealTimeFactor, type Metrics } from '../metrics.js';
import type { ModelLease, ModelRegistry } from '../registry.js';
import type { JobLimits, Scheduler, ScheduledModel } from '../scheduler.js';
import { LiveTranscriber, type LiveSettings, type TurnListener } from './live-transcriber.js';
import { decodeKnownSpeakers, labelSegment, speakerLabels, speakerSpans, type KnownSpeaker, type SpeakerRequest } from './diarization.js';
import { LONG_AUDIO_SECONDS, transcribeSpans, transcribeSpeechChunks } from './speech-chunks.js';

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
  /** Who spoke when (diarized_json, diarize=true, gpt-4o-transcribe-diarize); absent or null: no speakers. */
  speakers?: SpeakerRequest | null;
  /** The request's chunking_strategy as VAD settings: the audio is cut at the pauses they find, however short it is. */
  chunking?: VadParams | null;
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
  /** --diarization-model: tells speakers apart when a request asks for them. */
  diarizationModel: string;
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
    const { signal } = request;
    const { lease, plan } = await this.lease(request.model, request, signal);
    const held: { release(): void }[] = [lease];
    try {
      const model = lease.model;
      let speakers: PreparedSpeakers | null = null;
      if (request.speakers) {
        if (model.sampleRate !== 16000) {
          throw new ApiError('invalid_request', `model ${model.id} hears ${model.sampleRate} Hz audio; speakers are told apart at 16 kHz only`, {
            param: 'model',
          });
        }
        const known = await decodeKnownSpeakers(request.speakers.known, signal);
        const diarizer = await this.options.registry.acquire<DiarizerModel>(this.options.diarizationModel, 'diarization', signal);
        held.push(diarizer);
        speakers = { request: request.speakers, known, diarizer };
      }
      const { maxAudioSeconds } = this.options;
      const audio = await decodeAudio(request.file.take(), { sampleRate: model.sampleRate, maxSeconds: maxAudioSeconds, signal });
      const referenceBytes = speakers?.known.reduce((sum, k) => sum + k.samples.byteLength, 0) ?? 0;
      request.file.holding(audio.samples.byteLength + referenceBytes);
      const chunkSeconds = model.capabilities.chunkSeconds ?? LONG_AUDIO_SECONDS;
      const chunked = !!request.chunking || (model.capabilities.vadChunking && audio.duration > chunkSeconds);
      const vad = chunked || speakers ? await this.leaseVad(signal) : null;
      if (vad) held.push(vad);
      const options: TranscribeOptions = {
        language: plan.language,
        prompt: request.prompt,
        temperature: request.temperature,
        maxTokens: request.maxTokens,
        wordTimestamps: request.wordTimestamps,
        translate: plan.translate,
      };
      return new Transcription(this, {
        lease,
        vad,
        chunked,
        chunking: request.chunking ?? {},
        speakers,
        audio,
        options,
        signal,
        metrics: this.options.metrics,
      });
    } catch (error) {
      for (const lease of held) lease.release();
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

/** A request's speakers, ready: its known speakers decoded and the diarizer leased. */
interface PreparedSpeakers {
  request: SpeakerRequest;
  known: KnownSpeaker[];
  diarizer: ModelLease<DiarizerModel>;
}

/** Who spoke when in a transcription's audio, and what each speaker is called. */
interface SpeakerTimeline {
  turns: SpeakerTurn[];
  labels: string[];
}

interface TranscriptionParts {
  lease: ModelLease<SttModel>;
  /** Leased when the audio is cut at pauses (`chunked`) or speakers are asked for. */
  vad: ModelLease<VadModel> | null;
  chunked: boolean;
  /** The VAD's settings (the request's chunking_strategy, else its defaults). */
  chunking: VadParams;
  speakers: PreparedSpeakers | null;
  audio: DecodedAudio;
  options: TranscribeOptions;
  signal: AbortSignal;
  metrics: Metrics;
}

/** A prepared file transcription (Transcriber.prepare); run it once, whole or streamed. */
export class Transcription implements Disposable {
  constructor(
    private readonly transcriber: Transcriber,
    private readonly parts: TranscriptionParts,
  ) {}

  /** Its segments carry their speakers. */
  get diarized(): boolean {
    return this.parts.speakers !== null;
  }

  /** The whole transcript; `onSegment` and `onText` see each segment and the text as they are decoded. */
  async result(callbacks: Pick<TranscribeOptions, 'onSegment' | 'onText'> = {}): Promise<TranscriptionResult> {
    const { lease, audio, signal, metrics } = this.parts;
    const model = lease.model;
    const started = performance.now();
    const timeline = await this.diarize();
    const result = await this.transcriber.run(
      model,
      (jobSignal) => (timeline ? this.transcribeSpeakers(jobSignal, callbacks, timeline) : this.transcribe(jobSignal, callbacks)),
      signal,
      // a long file may take as long as it lasts, whatever the job time limit
      { minTimeoutMs: audio.duration * 1000 },
    );
    observeRealTimeFactor(metrics, model.id, 'stt', performance.now() - started, audio.duration);
    return result;
  }

  /** The speakers' turns, when the request asked for them: the VAD's speech, then the diarizer, as one job. */
  private async diarize(): Promise<SpeakerTimeline | null> {
    const { speakers, vad, audio, chunking, signal } = this.parts;
    if (!speakers || !vad) return null;
    const diarizer = speakers.diarizer.model;
    const diarization = await this.transcriber.run(
      diarizer,
      async (jobSignal) => {
        const speech = await vad.model.segments(audio.samples, chunking, jobSignal);
        return diarizer.diarize(audio.samples, speech, {
          minSpeakers: speakers.request.minSpeakers,
          maxSpeakers: speakers.request.maxSpeakers,
          references: speakers.known.map((k) => k.samples),
          signal: jobSignal,
        });
      },
      signal,
      { minTimeoutMs: audio.duration * 1000 },
    );
    return {
      turns: diarization.turns,
      labels: speakerLabels(
        diarization,
        speakers.known.map((k) => k.name),
      ),
    };
  }

  private transcribe(signal: AbortSignal, callbacks: Pick<TranscribeOptions, 'onSegment' | 'onText'>, wordTimestamps?: boolean): Promise<TranscriptionResult> {
    const { lease, vad, chunked, chunking, audio } = this.parts;
    const model = lease.model;
    const options = { ...this.parts.options, signal, ...callbacks, ...(wordTimestamps ? { wordTimestamps } : {}) };
    return chunked && vad
      ? transcribeSpeechChunks(model, vad.model, audio.samples, options, model.capabilities.chunkSeconds, chunking)
      : model.transcribe(audio.samples, options);
  }

  /**
   * A transcript whose segments carry their speakers: on an engine that times words, the whole audio transcribed as
   * without speakers and each segment split between words where the speaker changes; otherwise each speaker's turns
   * transcribed on their own. Segments are numbered afresh, in order.
   */
  private async transcribeSpeakers(
    signal: AbortSignal,
    { onSegment, onText }: Pick<TranscribeOptions, 'onSegment' | 'onText'>,
    { turns, labels }: SpeakerTimeline,
  ): Promise<TranscriptionResult> {
    const { lease, audio, options } = this.parts;
    const model = lease.model;
    const keepWords = options.wordTimestamps ?? false;
    let streamed = 0;
    const labelled = (segment: TranscriptionSegment, first: number): TranscriptionSegment[] =>
      labelSegment(segment, turns, labels).map((piece, i) => ({ ...piece, id: first + i, words: keepWords ? piece.words : undefined }));
    const callbacks = {
      onText,
      onSegment: onSegment
        ? (segment: TranscriptionSegment, language: string) => {
            for (const piece of labelled(segment, streamed)) {
              streamed++;
              onSegment(piece, language);
            }
          }
        : undefined,
    };
    const result = model.capabilities.wordTimestamps
      ? await this.transcribe(signal, callbacks, true)
      : await transcribeSpans(model, audio.samples, speakerSpans(turns, model.capabilities.chunkSeconds ?? LONG_AUDIO_SECONDS, audio.duration), {
          ...options,
          signal,
          ...callbacks,
        });
    const segments: TranscriptionSegment[] = [];
    for (const segment of result.segments) segments.push(...labelled(segment, segments.length));
    return { ...result, segments };
  }

  /** The text and each segment as they are decoded, then the whole transcript. */
  events(): AsyncGenerator<TranscriptEvent> {
    const streamsText = this.parts.lease.model.capabilities.streamsText ?? false;
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
    this.parts.lease.release();
    this.parts.vad?.release();
    this.parts.speakers?.diarizer.release();
  }
}
