/**
 * The interface every engine implements. An engine turns a model file (or a built-in) into a loaded model;
 * the model registry owns loaded models and the scheduler runs their work. Later engines (whisper STT,
 * TTS, separation) add their task-specific methods by extending `LoadedModel`.
 */
export type ModelTask = 'stt' | 'tts' | 'vad' | 'separation';

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
  maxTokens?: number;
  wordTimestamps?: boolean;
  /** Translate to English instead of transcribing. */
  translate?: boolean;
  signal?: AbortSignal;
  /** Called on the event loop for each segment as soon as it is decoded (streaming responses), with the
   *  language in use (given or detected). */
  onSegment?: (segment: TranscriptionSegment, language: string) => void;
}

export interface TranscriptionResult {
  text: string;
  /** ISO 639-1 code, detected or given. */
  language: string;
  /** Seconds of audio transcribed. */
  duration: number;
  segments: TranscriptionSegment[];
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
  };
  transcribe(samples: Float32Array, options?: TranscribeOptions): Promise<TranscriptionResult>;
}
