/**
 * The interface every engine implements. An engine turns a model file (or a built-in) into a loaded model; the
 * model registry owns loaded models and the scheduler runs their work. Each task's model (`SttModel`, `TtsModel`,
 * `VadModel`, `SeparatorModel`, `DiarizerModel`) extends `LoadedModel` with its own methods and declares its `capabilities`, which
 * the task's service checks requests against (engines do not check them again).
 */
export type ModelTask = 'stt' | 'tts' | 'vad' | 'separation' | 'diarization';

/** A model the registry has located on disk (after any download), ready to hand to an engine. */
export interface ResolvedModel {
  /** The ID the client used, normalised (aliases already replaced). */
  id: string;
  /** Local file or directory holding the weights. */
  path: string;
  /** A projector (mmproj) that goes with a GGUF model, when the repository has one. */
  projector: string | null;
}

export interface LoadedModel {
  readonly id: string;
  readonly task: ModelTask;
  readonly engine: string;
  /** Jobs worth running at once on this model; engines whose one job already uses every core say 1. */
  readonly concurrency?: number;
  /**
   * Jobs the model decodes together in one batch (a Whisper model's batcher): the scheduler runs this many at once,
   * whatever --model-concurrency says, since they share one pass over the weights instead of competing for cores.
   */
  readonly batchSize?: number;
  /** Frees native memory. The registry calls it only when no request uses the model. */
  dispose(): Promise<void>;
}

export interface Engine<M extends LoadedModel = LoadedModel> {
  readonly name: string;
  readonly task: ModelTask;
  /** True when the file or directory at `path` is in this engine's format (checked from the content). */
  detect(path: string): Promise<boolean>;
  load(model: ResolvedModel, signal?: AbortSignal): Promise<M>;
}

/** Whole-clip speech segments, seconds. */
export interface SpeechSegment {
  start: number;
  end: number;
}

export interface VadParams {
  threshold?: number;
  minSpeechDurationMs?: number;
  minSilenceDurationMs?: number;
  maxSpeechDurationS?: number;
  speechPadMs?: number;
}

/** A streaming detector: state carries across `process` calls (16 kHz mono float32 in). */
export interface VadStream {
  /** One speech probability per complete 512-sample frame; a trailing partial frame waits for the next call. */
  process(samples: Float32Array): Promise<Float32Array>;
  reset(): Promise<void>;
  close(): Promise<void>;
}

export interface VadModel extends LoadedModel {
  readonly task: 'vad';
  readonly sampleRate: 16000;
  readonly frameSamples: 512;
  segments(samples: Float32Array, params?: VadParams, signal?: AbortSignal): Promise<SpeechSegment[]>;
  openStream(): Promise<VadStream>;
}

/** One decoded segment, with the vendor's verbose_json segment fields (times in seconds). */
export interface TranscriptionSegment {
  id: number;
  start: number;
  end: number;
  text: string;
  tokens: number[];
  temperature: number;
  avgLogprob: number;
  compressionRatio: number;
  noSpeechProb: number;
  /** Present when word timestamps were asked for. */
  words?: TranscriptionWord[];
  /** Who says it, when the request asked for speakers: set by the STT service (engines never set it). */
  speaker?: string;
}

export interface TranscriptionWord {
  word: string;
  start: number;
  end: number;
}

export interface TranscribeOptions {
  /** ISO 639-1 code; null or absent = detect. */
  language?: string | null;
  /** Initial prompt (vendor `prompt`, seed `context`). */
  prompt?: string | null;
  temperature?: number;
  /** Decode a failed window again at higher temperatures (whisper.cpp's fallback; default true). */
  fallback?: boolean;
  maxTokens?: number;
  wordTimestamps?: boolean;
  /** Translate to English instead of transcribing. */
  translate?: boolean;
  signal?: AbortSignal;
  /** Called on the event loop for each segment as soon as it is decoded (streaming responses), with the
   *  language in use (given or detected). */
  onSegment?: (segment: TranscriptionSegment, language: string) => void;
  /**
   * Engines that declare `streamsText`: called with the transcript's text as it is decoded, a token or so at a time
   * (a segment's deltas concatenated are its text), before that segment's `onSegment`.
   */
  onText?: (delta: string) => void;
}

export interface TranscriptionResult {
  text: string;
  /** ISO 639-1 code, detected or given. */
  language: string;
  /** Seconds of audio transcribed. */
  duration: number;
  segments: TranscriptionSegment[];
}

/** Settings of a live transcription. */
export interface StreamingOptions {
  /** ISO 639-1 code; null or absent = the model's default (or detection where the engine can). */
  language?: string | null;
  prompt?: string | null;
  /** --realtime-transcription-delay-ms, for engines that declare it (`declaresDelay`): more delay, steadier text. */
  delayMs?: number;
}

/**
 * A live transcription (`SttModel.createStreamingSession`): audio goes in as it arrives, text comes out
 * as it stabilises. Deltas are never retracted: the turn's transcript is the concatenation of every delta that
 * `feed` and `finish` returned. Calls are made one at a time (the caller awaits each).
 */
export interface SttStreamingSession {
  /**
   * Feeds mono float32 at the model's rate; resolves with the text that became stable since the last call ('' when
   * none). `more`: more of the client's audio already waits behind this; an engine that re-decodes what it has may
   * wait for it, so a session behind real time catches up with one decode instead of one per interval.
   */
  feed(samples: Float32Array, signal?: AbortSignal, more?: boolean): Promise<string>;
  /** Ends the turn: the rest of its text, and the whole transcript. The session is then ready for a new turn. */
  finish(signal?: AbortSignal): Promise<{ delta: string; transcript: string }>;
  /** Drops the open turn's audio and text (input_audio_buffer.clear). */
  reset(): Promise<void>;
  close(): Promise<void>;
}

export interface SttModel extends LoadedModel {
  readonly task: 'stt';
  /** Rate the engine wants its mono float32 input at. */
  readonly sampleRate: number;
  readonly capabilities: {
    translate: boolean;
    wordTimestamps: boolean;
    languages: readonly string[] | null;
    /** Long inputs are better cut at the pauses a VAD finds than decoded whole (fixed-window engines). */
    vadChunking: boolean;
    /** With `vadChunking`: the longest input decoded whole, and the most a chunk holds (default 30 s). */
    chunkSeconds?: number;
    /** With `vadChunking`: the chunks of an upload are transcribed at once (the engine batches them). */
    batchedChunks?: boolean;
    /** Text streams as it is decoded (`TranscribeOptions.onText`), not a segment at a time. */
    streamsText?: boolean;
  };
  transcribe(samples: Float32Array, options?: TranscribeOptions): Promise<TranscriptionResult>;
  /** Live transcription (WS /v1/realtime, /v1/audio/transcriptions/realtime), for engines that stream. */
  createStreamingSession?(options?: StreamingOptions): Promise<SttStreamingSession>;
  /** True when the engine honours `StreamingOptions.delayMs`; the others ignore it. */
  readonly declaresDelay?: boolean;
}

/** A voice a TTS model offers (`GET /v1/audio/voices`). */
export interface Voice {
  id: string;
  name: string;
  /** The `lang_code` the voice speaks, where it has one of its own (Kokoro's: its name's first letter). */
  language?: string;
}

/** One piece of text to speak (the speech service splits long input at sentence boundaries into several). */
export interface SynthesisRequest {
  text: string;
  /** One of the model's voice IDs (the speech service resolves vendor names and defaults first). */
  voice: string;
  /** Playback speed multiplier, 0.25..4; 1 = the voice's natural rate. */
  speed: number;
  /** The request's `lang_code` (default `a`, American English; docs/api.md). */
  language?: string;
  temperature?: number;
  maxTokens?: number;
  /** Sampling seed (extension): the same seed and request give the same audio, on engines that sample. */
  seed?: number;
  /** Style or emotion instruction (`instructions` or `instruct`); only for `capabilities.instructions`. */
  instructions?: string;
  /**
   * Reference voice to clone (mono at the model's rate); only for `capabilities.cloning`. `key` names the clip while
   * it stays the same (a custom voice's ID): an engine may keep what it computes from it.
   */
  reference?: { samples: Float32Array; text?: string; key?: string };
}

export interface SynthesisOptions {
  signal?: AbortSignal;
  /** Called on the event loop with audio as the engine produces it (mono float32 at the model's rate). */
  onAudio?: (samples: Float32Array) => void;
}

/** A request of a batch session that ended in a step. */
export type BatchStepResult = { slot: number; samples: Float32Array } | { slot: number; error: Error };

/**
 * Continuous batching (`TtsModel.createBatchSession`): requests join and leave a running batch
 * between steps. The scheduler owns the session and calls it from one job at a time.
 */
export interface TtsBatchSession {
  /** Adds a request; returns its slot handle. Throws (an ApiError for bad input) when it cannot take the request. */
  add(request: SynthesisRequest): number;
  /** Removes a request that is no longer wanted (client gone); its audio is dropped. */
  cancel(slot: number): void;
  /** Advances every active request by one unit of work; returns those that ended, with their audio or their own error. */
  step(): Promise<BatchStepResult[]>;
  /** Requests added and not yet finished or cancelled. */
  readonly active: number;
  close(): Promise<void>;
}

export interface TtsModel extends LoadedModel {
  readonly task: 'tts';
  /** Rate of the audio the model produces, Hz. */
  readonly sampleRate: number;
  readonly voices: readonly Voice[];
  readonly defaultVoice: string;
  /**
   * The `lang_code`s a person chooses between, each with its language's name, where the model speaks several (it
   * takes their other forms too: `capabilities.languages`).
   */
  readonly languageNames?: Readonly<Record<string, string>>;
  /** Other names the model answers to (lower case, e.g. the vendor's voice names), each mapped to one of `voices`. */
  readonly voiceAliases?: Readonly<Record<string, string>>;
  /**
   * Voices made of the model's own (Kokoro's weighted mixes, `af_bella+af_sky`): the voice to request for `voice`,
   * or null when it is not such a combination; throws an ApiError saying what is wrong with a malformed one.
   */
  combineVoices?(voice: string): string | null;
  readonly capabilities: {
    /** Takes `reference` (ref_audio, ref_text). */
    cloning: boolean;
    /** Takes `instructions`. */
    instructions: boolean;
    /** Honours `temperature` and `maxTokens` (sampling engines). */
    sampling: boolean;
    /** `lang_code` values it speaks; null = any. */
    languages: readonly string[] | null;
  };
  /** Speaks one request; resolves with all of its audio (also when `onAudio` streamed it). */
  synthesize(request: SynthesisRequest, options?: SynthesisOptions): Promise<Float32Array>;
  /** Fixed-window batching: several compatible requests in one native call, results in request order. */
  synthesizeBatch?(requests: SynthesisRequest[], signal?: AbortSignal): Promise<Float32Array[]>;
  /** synthesizeBatch takes requests of any settings together (voice, speed, language), not only equal ones. */
  readonly mixedBatches?: boolean;
  /** Continuous batching hook; `supportsBatchSession` says which requests it takes. */
  createBatchSession?(maxBatchSize: number): TtsBatchSession;
  supportsBatchSession?(request: SynthesisRequest): boolean;
}

/** Audio at its own rate: one Float32Array per channel (1 or 2), all the same length. */
export interface PcmAudio {
  channels: Float32Array[];
  sampleRate: number;
}

/** A sound a separator can extract, chosen by matching the request's free-text `description`. */
export interface SeparationTarget {
  /** Canonical name, e.g. `voice`. */
  readonly name: string;
  /** Lower-case singular words and phrases that select it (plurals match too). */
  readonly synonyms: readonly string[];
  /** How the target is extracted, for the README and the 400 that lists what a model serves. */
  readonly method: string;
}

export interface SeparatorModel extends LoadedModel {
  readonly task: 'separation';
  readonly targets: readonly SeparationTarget[];
  /** The target a description asks for (case-insensitive, synonyms, plurals), or null when none matches. */
  match(description: string): SeparationTarget | null;
  /**
   * The target stem at the input's rate, channel count and length, on worker threads, in bounded blocks (memory
   * grows with the input's length, not its square). The caller derives the residual as input − target.
   */
  separate(audio: PcmAudio, target: SeparationTarget, signal?: AbortSignal): Promise<Float32Array[]>;
}

/** One speaker's stretch of speech, seconds; speakers are numbered from 0 in the order they first speak. */
export interface SpeakerTurn {
  start: number;
  end: number;
  speaker: number;
}

export interface DiarizeOptions {
  /** Bounds on the number of speakers found (the count is chosen automatically between them). */
  minSpeakers?: number;
  maxSpeakers?: number;
  /** Clips of known speakers (mono at the model's rate), each matched to the speaker it sounds like. */
  references?: Float32Array[];
  signal?: AbortSignal;
}

export interface Diarization {
  /** Sorted by start, not overlapping; only speech is covered. */
  turns: SpeakerTurn[];
  /** Speakers found: every turn's `speaker` is below it. */
  speakers: number;
  /** For each of `DiarizeOptions.references`, the speaker it was matched to, or null when it matches none. */
  references: (number | null)[];
}

/** Who spoke when (response_format=diarized_json and `diarize=true`; docs/models.md, "Speaker diarization"). */
export interface DiarizerModel extends LoadedModel {
  readonly task: 'diarization';
  readonly sampleRate: 16000;
  /** `speech`: where the VAD heard speech in `samples`; turns are found within it. */
  diarize(samples: Float32Array, speech: SpeechSegment[], options?: DiarizeOptions): Promise<Diarization>;
}
