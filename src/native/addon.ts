/**
 * The whole native surface of voxd, typed in one place: every class and function the addon exports. Loading it is
 * native/load.ts's; engines, the audio services and the composition root call it through `loadNative()` there
 * (docs/architecture.md "The native surface"). Every method that can take more than about a millisecond runs on a
 * libuv worker thread and returns a Promise; failures reject with a `NativeError` (message + code).
 */

/** Set by the caller to cancel native work in flight; checked by engines between units of work. */
export interface NativeAbortFlag {
  abort(): void;
  readonly aborted: boolean;
}

export interface NativeVadParams {
  threshold?: number;
  minSpeechDurationMs?: number;
  minSilenceDurationMs?: number;
  maxSpeechDurationS?: number;
  speechPadMs?: number;
}

export interface NativeVadModel {
  /** Speech segments (seconds) of a whole 16 kHz mono clip. */
  segments(samples: Float32Array, params?: NativeVadParams, abort?: NativeAbortFlag): Promise<{ start: number; end: number }[]>;
  /** A streaming detector with its own LSTM state (a pooled context of this model). */
  openStream(): Promise<NativeVadStream>;
}

export interface NativeVadStream {
  /** One speech probability per complete 512-sample frame; a partial frame is kept for the next call. */
  process(samples: Float32Array): Promise<Float32Array>;
  reset(): Promise<void>;
  close(): Promise<void>;
}

export interface NativeDecodeAudioOptions {
  /** Output rate, Hz (an integer from 1000 to 384000); omitted: the source's. */
  sampleRate?: number;
  /** `mono` (default): down-mixed; `source`: mono stays mono, anything wider becomes interleaved stereo. */
  channels?: 'mono' | 'source';
  /** Reject with `audio_too_long` as soon as the decoded audio is longer than this. */
  maxSeconds?: number;
}

/** A whole audio file decoded by FFmpeg's libraries, at `sampleRate`. */
export interface NativeDecodedAudio {
  /** Interleaved when `channels` is 2. */
  samples: Float32Array;
  sampleRate: number;
  /** 1, or 2 for `channels: 'source'` input with more than one channel. */
  channels: number;
  /** Seconds of output audio. */
  duration: number;
  sourceSampleRate: number;
  sourceChannels: number;
  /** FFmpeg's codec name: `mp3`, `aac`, `flac`, `opus`, `vorbis`, `pcm_s16le`, ... */
  codec: string;
  /** `wav`, `mp3`, `flac`, `mp4`, `m4a`, `aac`, `ogg`, `webm`, `matroska`, ... */
  container: string;
  /**
   * FFmpeg met errors, or the audio is shorter than the header says: `samples` hold what could be decoded
   * (best effort: a cut-off WAV or Ogg file is not always noticed).
   */
  truncated: boolean;
}

/** The `response_format`s of POST /v1/audio/speech that the encoder writes. */
export type NativeAudioFormat = 'mp3' | 'wav' | 'flac' | 'ogg' | 'opus' | 'aac' | 'pcm';

export interface NativeAudioEncoderOptions {
  format: NativeAudioFormat;
  /** Rate of the input samples, Hz (an integer from 8000 to 192000). */
  sampleRate: number;
  /**
   * Bits per second for mp3, aac, opus and ogg (6000 to 512000). Default: mp3 and aac 64000, opus 32000, ogg
   * libvorbis' VBR quality 3. Lossless formats ignore it.
   */
  bitrate?: number;
  /**
   * Default true: every call returns the bytes produced so far (one container, one header; WAV sizes 0xFFFFFFFF;
   * Ogg pages flushed per call). false: encode() returns empty buffers and finish() the whole file, its header
   * completed (WAV sizes, FLAC totals, MP3 Xing/LAME frame with the gapless delay and padding).
   */
  streaming?: boolean;
}

/**
 * An incremental encoder of mono float32 audio (FFmpeg's libavcodec/libavformat/libswresample, on libuv worker
 * threads). One call at a time: a call made before the previous one's promise settled throws `busy`; calls after
 * finish() throw `closed`; after a failed call every later call throws `encode_failed`.
 */
export interface NativeAudioEncoder {
  readonly format: NativeAudioFormat;
  /** Rate of the input, Hz. */
  readonly sampleRate: number;
  /** Rate of the encoded stream: the input rate when the codec takes it, else the nearest one it takes. */
  readonly outputSampleRate: number;
  /** FFmpeg's encoder: `libmp3lame`, `pcm_s16le`, `flac`, `libvorbis`, `libopus`, `aac`. */
  readonly codec: string;
  readonly streaming: boolean;
  /**
   * Encodes a chunk (NaN and infinities become 0, values beyond ±1 are clipped). Throws `invalid_argument` for a
   * non-Float32Array; rejects with `invalid_argument` when the codec refuses the configuration (first call) or
   * `encode_failed`.
   */
  encode(samples: Float32Array): Promise<Buffer>;
  /** Encodes the optional last chunk, drains the codec and writes the trailer: the last bytes (or the whole file). */
  finish(samples?: Float32Array): Promise<Buffer>;
}

export interface NativeWhisperLoadOptions {
  /** Use a GPU backend when the addon has one (default true; CPU otherwise). */
  useGpu?: boolean;
  flashAttn?: boolean;
  gpuDevice?: number;
  /** Idle whisper.cpp decoding states kept for reuse (default 2); each holds compute buffers and KV caches. */
  maxIdleStates?: number;
  /** Transcriptions the batcher decodes together (default 8); more wait for a place. */
  maxBatch?: number;
  /** The batcher's CPU threads (default: every core, at most 8). */
  threads?: number;
  /** 30 s windows the batcher encodes in one pass (default: 1 on a CPU, 8 on a GPU). */
  maxEncode?: number;
}

/** Where the batcher's time went, summed since the model was loaded. */
export interface NativeWhisperTimings {
  encodeMs: number;
  encodeCalls: number;
  encodeWindows: number;
  decodeMs: number;
  decodeCalls: number;
  decodeRows: number;
  /** The decoding rules and the choice of each job's next token, on the batcher's thread. */
  sampleMs: number;
}

export interface NativeWhisperParams {
  /** ISO 639-1 code or English name; null, absent or `auto` = detect (multilingual models). */
  language?: string | null;
  /** Translate to English (multilingual models only). */
  translate?: boolean;
  initialPrompt?: string | null;
  /** First decoding temperature, 0..1 (default 0). */
  temperature?: number;
  /** Fallback step: a window that fails the log-probability or entropy checks is decoded again this much hotter, up to 1 (default 0.2; 0 = no fallback). */
  temperatureInc?: number;
  /** Most text tokens per segment and in the whole result; decoding stops once spent (0 or absent = no limit). */
  maxTokens?: number;
  /** Per-word start/end from whisper.cpp's token timestamps. */
  wordTimestamps?: boolean;
  /** whisper.cpp's compute threads, for a request with word timestamps (default min(4, hardware threads)); the batcher has its own. */
  threads?: number;
  /** Do not condition a window on the text of the previous ones; an initial prompt then conditions every window. */
  noContext?: boolean;
}

export interface NativeWhisperWord {
  /** The word without its leading space, punctuation attached. */
  word: string;
  start: number;
  end: number;
  /** The lowest probability of its tokens. */
  probability: number;
}

/** Times in seconds, clamped to the clip and in order. */
export interface NativeWhisperSegment {
  index: number;
  start: number;
  end: number;
  text: string;
  /** Text and timestamp token ids (no other special tokens). */
  tokens: number[];
  avgLogprob: number;
  noSpeechProb: number;
  /** The temperature of the decoding attempt this segment came from. */
  temperature: number;
  /** Present when word timestamps were asked for (and the segment has words). */
  words?: NativeWhisperWord[];
}

export interface NativeWhisperResult {
  /** ISO 639-1 code: given, `en` for English-only models, or detected. */
  language: string;
  segments: NativeWhisperSegment[];
}

export interface NativeWhisperInfo {
  multilingual: boolean;
  /** `tiny`, `base`, `small`, `medium`, `large` (from the layer count). */
  type: string;
  nVocab: number;
  nAudioCtx: number;
  nAudioState: number;
  nAudioHead: number;
  nAudioLayer: number;
  nTextCtx: number;
  nTextState: number;
  nTextHead: number;
  nTextLayer: number;
  nMels: number;
  ftype: number;
  /** Language codes the model knows (`['en']` for English-only models). */
  languages: string[];
  /** The batcher runs on a GPU. */
  gpu: boolean;
}

export interface NativeWhisperModel {
  info(): NativeWhisperInfo;
  /**
   * Transcribes 16 kHz mono audio. Calls overlap: the model's batcher decodes them together (the same output as
   * alone, token for token); one with `wordTimestamps` runs on whisper.cpp's own decoder on a worker thread.
   * `onSegment` gets each segment (and the language in use) as soon as it is decoded, every one before the
   * promise resolves and none after a rejection or the abort. Rejects with `invalid_argument`, `closed` (after
   * release, or when the environment shuts down), `aborted` or `transcription_failed`.
   */
  transcribe(
    samples: Float32Array,
    params?: NativeWhisperParams,
    onSegment?: ((segment: NativeWhisperSegment, language: string) => void) | null,
    abort?: NativeAbortFlag,
  ): Promise<NativeWhisperResult>;
  /** Drops this object's hold on the weights; transcriptions in flight finish first. Later calls throw `closed`. */
  release(): void;
  timings(): NativeWhisperTimings;
}

export interface NativeParakeetLoadOptions {
  /** Run on the GPU when the build has one (default true). */
  useGpu?: boolean;
  gpuDevice?: number;
  /** Clips the batcher decodes together (default 8); more wait for a place. */
  maxBatch?: number;
  /** The batcher's CPU threads (default: every core, at most 8). */
  threads?: number;
  /** Clips encoded in one pass (default: 1 on a CPU, where a clip is encoded once the others are decoded; maxBatch on a GPU). */
  maxEncode?: number;
}

/** How the batcher shared its passes, summed since the model was loaded. */
export interface NativeParakeetTimings {
  encodeMs: number;
  /** Encoder passes, and the clips they encoded (several per pass when clips arrive together). */
  encodeCalls: number;
  encodeClips: number;
  decodeMs: number;
  /** TDT steps, the clips they stepped in all, and the most clips one step took. */
  decodeCalls: number;
  decodeRows: number;
  maxStepRows: number;
}

export interface NativeParakeetInfo {
  nVocab: number;
  /** Mel frames (10 ms) of libparakeet's short path: 5000. */
  nAudioCtx: number;
  nAudioState: number;
  nAudioHead: number;
  nAudioLayer: number;
  nMels: number;
  ftype: number;
  /** A vocabulary piece holds a letter beyond ASCII: v3's multilingual tokenizer (v2's is English only). */
  multilingual: boolean;
  gpu: boolean;
}

/** One decoded token; times in seconds, punctuation moved onto the end of the word before it. */
export interface NativeParakeetToken {
  id: number;
  /** As it joins the transcript: a word's first piece starts with a space; control pieces are ''. */
  text: string;
  start: number;
  end: number;
  /** Encoder frame (80 ms) the token was decoded at. */
  frame: number;
  /** TDT duration, encoder frames. */
  duration: number;
  p: number;
  /** Log-probability, normalised together with the duration logits (libparakeet's `plog`). */
  logprob: number;
  wordStart: boolean;
}

export interface NativeParakeetModel {
  info(): NativeParakeetInfo;
  /**
   * Transcribes a whole clip of 16 kHz mono audio (greedy TDT) on the model's batcher: concurrent clips are encoded
   * and decoded together and give the same tokens alone or together. A clip under 20 ms has no tokens. Rejects with
   * `invalid_argument` (also for a clip over 655 s), `closed` (after release), `aborted` or `transcription_failed`.
   */
  transcribe(samples: Float32Array, params?: { maxTokens?: number }, abort?: NativeAbortFlag): Promise<NativeParakeetToken[]>;
  timings(): NativeParakeetTimings;
  /** Drops this object's hold on the weights; transcriptions in flight finish first. Later calls throw `closed`. */
  release(): void;
}

export interface NativeAudioLmLoadOptions {
  /** Run on the GPU when the build has one (default true). */
  useGpu?: boolean;
  gpuDevice?: number;
  /** Transcriptions decoded together (default 8, at most 64); more wait for a place. Each holds its KV cells from the load on. */
  maxBatch?: number;
  /** CPU threads (default: every core, at most 8). */
  threads?: number;
  /** KV cells per transcription: its prompt, audio positions and answer (default 1024). */
  ctxPerJob?: number;
}

export interface NativeAudioLmInfo {
  /** general.architecture of the language model (qwen3vl for Qwen3-ASR, llama for Voxtral, ...). */
  arch: string;
  /** The mmproj's audio projector type (qwen3a, voxtral, ...). */
  projector: string;
  ctxPerJob: number;
  nVocab: number;
  gpu: boolean;
}

/** How the batcher shared its steps, summed since the model was loaded. */
export interface NativeAudioLmTimings {
  /** Audio encoding and prompt decoding, one transcription at a time. */
  prefillMs: number;
  prefillJobs: number;
  decodeMs: number;
  /** Decode steps, the llama_decode calls they made, the tokens they decoded in all, and the most jobs one step took. */
  decodeSteps: number;
  decodeCalls: number;
  decodeRows: number;
  maxStepRows: number;
}

export interface NativeAudioLmParams {
  /** A system message before the user's (context, hotwords), read as plain text; none when absent (an empty string is an empty message). */
  system?: string;
  /** The instruction before the audio in the user's message. */
  user?: string;
  /** The start of the answer, which the model goes on from (Qwen3-ASR's `language English<asr_text>`). */
  assistant?: string;
  /** The answer ends after this many tokens (0: only the model or the job's KV cells end it). */
  maxTokens?: number;
  /** 0 (default): greedy. */
  temperature?: number;
  /** The sampler's seed when temperature > 0. */
  seed?: number;
}

export interface NativeAudioLmResult {
  /** The answer's tokens, the end-of-generation token excluded. */
  tokens: number[];
  /** Each token's log-probability under the model (the log-softmax of its step's logits). */
  logprobs: Float32Array;
  /** Their pieces, control tokens' texts included (what llama.cpp's tools print). */
  text: string;
  /** Positions the prompt took, audio included. */
  promptTokens: number;
  /** Ended by maxTokens or the job's KV cells rather than by the model. */
  truncated: boolean;
}

export interface NativeAudioLmModel {
  info(): NativeAudioLmInfo;
  /**
   * Transcribes 16 kHz mono audio on the model's batcher: concurrent transcriptions decode together and each gets the
   * tokens it gets alone (greedy, on the CPU). `onText` gets the answer's pieces as they are decoded (whole UTF-8
   * characters), all before the promise settles. Rejects with `invalid_argument` (audio and prompt longer than
   * ctxPerJob), `closed` (after release), `aborted` or `transcription_failed`.
   */
  transcribe(samples: Float32Array, params?: NativeAudioLmParams, onText?: (text: string) => void, abort?: NativeAbortFlag): Promise<NativeAudioLmResult>;
  timings(): NativeAudioLmTimings;
  /** Drops this object's hold on the weights; transcriptions in flight finish first. Later calls throw `closed`. */
  release(): void;
}

/** Model files for pocketsphinx; each defaults to Debian's US English model (package pocketsphinx-en-us). */
export interface NativeSphinxLoadOptions {
  /** Acoustic model directory (`/usr/share/pocketsphinx/model/en-us/en-us`). */
  hmm?: string;
  /** Language model (`/usr/share/pocketsphinx/model/en-us/en-us.lm.bin`). */
  lm?: string;
  /** Pronunciation dictionary (`/usr/share/pocketsphinx/model/en-us/cmudict-en-us.dict`). */
  dict?: string;
  /** Idle decoders kept for reuse (default 2); each holds its own copy of the model, about 100 MB. */
  maxIdleDecoders?: number;
}

export interface NativeSphinxWord {
  /** Dictionary word, lower case; fillers (`<sil>`, `[NOISE]`, ...) are dropped and `(2)` suffixes removed. */
  word: string;
  /** Seconds from the start of the clip (10 ms frames), in order and inside the clip. */
  start: number;
  end: number;
  /** Posterior probability of the word in its utterance's lattice, 0..1. */
  probability: number;
}

/** One utterance, as pocketsphinx_continuous segments the audio on silence; times span its words. */
export interface NativeSphinxSegment {
  start: number;
  end: number;
  text: string;
  words: NativeSphinxWord[];
}

export interface NativeSphinxResult {
  /** The utterances' texts joined with spaces: what `pocketsphinx_continuous -infile` prints, one line each. */
  text: string;
  segments: NativeSphinxSegment[];
}

export interface NativeSphinxModel {
  /**
   * Transcribes 16 kHz mono audio on a worker thread with a pooled decoder of its own, so calls may overlap.
   * Rejects with `invalid_argument`, `closed` (after release), `aborted` or `transcription_failed`.
   */
  transcribe(samples: Float32Array, abort?: NativeAbortFlag): Promise<NativeSphinxResult>;
  /** Takes a pooled decoder (a new one when none is idle) for a live transcription; it goes back on `close`. */
  openStream(options?: NativeSphinxStreamOptions): Promise<NativeSphinxStream>;
  /** The decoders of the pool for `transcribe` and of the one for streams. Throws `closed` after `release`. */
  stats(): { transcribe: NativeSphinxPoolStats; live: NativeSphinxPoolStats };
  /** Drops this object's hold on the decoders; transcriptions in flight finish first. Later calls throw `closed`. */
  release(): void;
}

export interface NativeSphinxPoolStats {
  /** Decoders alive, in use or idle (about 100 MB each). */
  decoders: number;
  /** Of those, the ones kept for reuse (at most `maxIdleDecoders`). */
  idle: number;
}

export interface NativeSphinxStreamOptions {
  /**
   * 0 (default): an utterance's words are sent when it ends, exactly as `transcribe` gives them. N > 0: also the words
   * of the open utterance on which the last N partial hypotheses (one per 2048-sample block, 128 ms) agree; sooner,
   * but the end-of-utterance passes often revise partial words, and sent words stay.
   */
  stableBlocks?: number;
}

/**
 * A live transcription on one decoder. A turn replays `transcribe` block by block, so its transcript is the same as
 * transcribing its audio as a clip unless a partial hypothesis that was sent is revised later (the sent words stay).
 * Calls queue one after another; an aborted or failed `feed` or `finish` drops the open turn. After `close` the other
 * methods reject with `closed`.
 */
export interface NativeSphinxStream {
  /** 16 kHz mono; resolves with the text that became stable (words with their leading spaces), '' when none. */
  feed(samples: Float32Array, abort?: NativeAbortFlag): Promise<string>;
  /** Ends the turn: the rest of its text, and the whole transcript (every delta of the turn joined). */
  finish(abort?: NativeAbortFlag): Promise<{ delta: string; transcript: string }>;
  /** Drops the open turn. */
  reset(): Promise<void>;
  /** Returns the decoder to the model's pool. */
  close(): Promise<void>;
}

/** One of the built-in flite voices. */
export interface NativeFliteVoice {
  /** `slt`, `kal`, `awb` or `rms`. */
  id: string;
  /** flite's own name of the voice (`kal16` for `kal`). */
  name: string;
  /** Accent, sex and kind of voice, in English. */
  description: string;
}

export interface NativeFliteSynthesisOptions {
  /** One of `FliteModel.voiceIds`. */
  voice: string;
  /** Playback speed, 0.25..4 (default 1): flite's own duration stretch (1 / speed), so the pitch is kept. */
  speed?: number;
}

export interface NativeFliteModel {
  readonly voices: NativeFliteVoice[];
  /**
   * True where flite's noise generator is redirected to one per synthesis (x86-64 and arm64 Linux): the same
   * request then always gives the same samples, whatever runs beside it.
   */
  readonly deterministic: boolean;
  /**
   * Speaks `text` (cut into utterances at sentence ends, as flite's own reader does) on a worker thread; calls
   * may overlap. Resolves with all of the audio, 16 kHz mono; `onAudio` gets it in order as it is synthesised,
   * every sample before the promise resolves and none after a rejection. Empty or blank text gives no samples.
   * Rejects with `invalid_argument`, `closed` (after release), `aborted` or `synthesis_failed`.
   */
  synthesize(
    text: string,
    options: NativeFliteSynthesisOptions,
    onAudio?: ((samples: Float32Array) => void) | null,
    abort?: NativeAbortFlag,
  ): Promise<Float32Array>;
  /** Drops this object's hold on the voices; syntheses in flight finish. Later calls throw `closed`. */
  release(): void;
}

export interface NativeTtsGgmlLoadOptions {
  /** The backbone GGUF (llama.cpp architecture `pockettts` or `qwen3tts`). */
  model: string;
  /** Its mmproj GGUF (speaker encoder, generator, decoder); required. */
  mmproj: string;
  /** CPU threads for the backbone and the mmproj graphs (default: the cores, at most 8). */
  threads?: number;
  /** Requests the context holds at once, serial syntheses and batch members together (1..64, default 1). */
  sequences?: number;
  /**
   * Pocket TTS's flow net and audio decoder: voxd's own graphs, one for every sequence of a step (`batched`, the
   * default), or libmtmd's one-request calls (`libmtmd`, to compare the two). Qwen3-TTS always takes libmtmd's.
   */
  generator?: 'batched' | 'libmtmd';
}
export interface NativeTtsGgmlInfo {
  /** general.architecture of the backbone (`pockettts`, `qwen3tts`). */
  arch: string;
  /** Rate of the audio it makes, Hz (24000 for both families). */
  sampleRate: number;
  /** The generator's weight variant (`english`, ...), '' when it has none. */
  variant: string;
  /** Requests the context holds at once. */
  sequences: number;
}
export interface NativeTtsGgmlRequest {
  text: string;
  /** A voice to clone: mono at `sampleRate` (libmtmd uses the first 30 s); must not be empty. */
  reference?: Float32Array | null;
  /**
   * Names `reference` while it stays the same clip (a custom voice's ID, a preset voice): the model keeps its encoding
   * (its 64 most recent) and skips the voice encoder for it afterwards.
   */
  voiceKey?: string | null;
  /** The language by the model's name for it (`english`, `spanish`, ...; Qwen3-TTS); absent: the model's default. */
  language?: string | null;
  /**
   * 0..2^32-2; the same seed (and everything else the same) gives the same samples, alone or in a batch. Absent: a
   * random one.
   */
  seed?: number | null;
  /** 0..2: Pocket TTS's noise scale, Qwen3-TTS's sampling temperature (0: the least noise, greedy); absent: the model's own. */
  temperature?: number | null;
  /** Upper bound on generated frames (12.5 per second of audio). */
  maxFrames?: number | null;
}
/** Where a GGML TTS model's generation time went since it loaded (cumulative milliseconds). */
export interface NativeTtsGgmlTimings {
  /** Frames made. */
  frames: number;
  /** The per-step backbone decode of every request's frame, its rows and its calls (one per step). */
  backboneMs: number;
  backboneRows: number;
  backboneCalls: number;
  /** Prompt decodes (each request's start; Pocket TTS's later chunks). */
  promptMs: number;
  /** Reference clips through the voice encoder. */
  encoderMs: number;
  /** The generator's per-frame work (Pocket's flow net, Qwen3's code predictor), the frames it made and its calls. */
  generatorMs: number;
  generatorRows: number;
  generatorCalls: number;
  /** The audio decoder (mimi, code2wav), the windows it decoded and its calls. */
  decoderMs: number;
  decoderWindows: number;
  decoderCalls: number;
}
/** What a batch step hands back for a request that ended: all of its audio, or its own error. */
export type NativeTtsGgmlFinished = { slot: number; samples: Float32Array } | { slot: number; error: Error & { code: string } };
/**
 * A continuous-batching session on a GGML TTS model: each request holds one of the model's sequences, and one step
 * makes a frame for every request with one backbone decode. Methods other than step() are synchronous and cheap.
 */
export interface NativeTtsGgmlBatch {
  /**
   * Adds a request, to be prepared by the next step; returns its slot. Throws `invalid_argument` (bad fields, nothing
   * to speak), `batch_full` (every sequence of the model is taken) or `closed`.
   */
  add(request: NativeTtsGgmlRequest): number;
  /** Drops a request; a step in flight skips it from its next turn, and its audio is never handed back. */
  cancel(slot: number): void;
  /**
   * One frame for every request (new ones prepared first), on a worker thread; resolves with those that ended.
   * Throws `busy` when called before the previous step resolved, `closed` after close().
   */
  step(): Promise<NativeTtsGgmlFinished[]>;
  /** Requests added and not yet handed back or cancelled. */
  readonly active: number;
  /** Cancels every request; later calls throw `closed`. */
  close(): void;
}
/**
 * A GGML TTS model: backbone + mmproj through libmtmd's audio generator. Each request holds one of the model's
 * sequences; serial syntheses and batch steps take turns frame by frame on the model's own executor thread.
 */
export interface NativeTtsGgmlModel {
  info(): NativeTtsGgmlInfo;
  /**
   * Speaks `text` on a worker thread. Resolves with all of the audio (mono float32 at `sampleRate`); `onAudio` gets
   * it in order as frames are decoded, every sample before the promise resolves and none after a rejection. The
   * abort flag is checked before every frame. Rejects with `invalid_argument`, `closed`, `aborted` or
   * `synthesis_failed`; throws `batch_full` when every sequence of the model is held.
   */
  synthesize(request: NativeTtsGgmlRequest, onAudio?: ((samples: Float32Array) => void) | null, abort?: NativeAbortFlag): Promise<Float32Array>;
  /** A continuous-batching session on this model; its steps and serial syntheses take turns on the model. */
  createBatch(): NativeTtsGgmlBatch;
  /** Where generation time went since the model loaded (for benchmarks). */
  timings(): NativeTtsGgmlTimings;
  /** Drops this object's hold on the weights; syntheses in flight finish first. Later calls throw `closed`. */
  release(): void;
}

export interface NativeKokoroLoadOptions {
  /** The PyTorch checkpoint (kokoro-v1_0.pth or one of its layout). */
  checkpoint: string;
  /** ALBERT's layer and head counts (config.json `plbert`); default 12 and 12. */
  bertLayers?: number;
  bertHeads?: number;
  /** CPU threads; default every core up to 8. */
  threads?: number;
}

/** One piece of speech for Kokoro: its tokens and the voice's style for them. */
export interface NativeKokoroInput {
  /** Token ids, with the pad 0 at each end (3 to 512 of them). */
  ids: Int32Array;
  /** The voice pack's row for the phoneme count: 256 values. */
  style: Float32Array;
  /** 0.25 to 4: durations are divided by it. */
  speed: number;
  /** Seeds the harmonic source's noise. */
  seed: number;
  /** false: no noise (to match the upstream model's output). */
  noise: boolean;
  /** Stages given instead of computed (`decoder_in_F0`, `decoder_in_N`, `generator_har`), for tests. */
  given?: Record<string, Float32Array>;
}

export interface NativeKokoroOutput {
  audio: Float32Array;
  /** Frames (600 samples) per token. */
  durations: Int32Array;
  /** With `stages`: intermediates by the upstream module's name, in PyTorch's memory order. */
  stages?: Record<string, Float32Array>;
}

export interface NativeKokoroTimings {
  calls: number;
  rows: number;
  frames: number;
  textMs: number;
  prosodyMs: number;
  sourceMs: number;
  decoderMs: number;
  istftMs: number;
}

/** A phoneme piece: at most 510 phonemes, and the span of the text it speaks (UTF-8 byte offsets). */
export interface NativeKokoroPiece {
  phonemes: string;
  textBegin: number;
  textEnd: number;
}

/** Kokoro-82M: one forward pass per batch of inputs, on a worker thread; batches on one model take turns. */
export interface NativeKokoroModel {
  info(): { sampleRate: number; vocabSize: number; weightBytes: number };
  /** Rejects with `invalid_argument` (an input out of range), `synthesis_failed`, `aborted` or `closed`. */
  synthesize(inputs: NativeKokoroInput[], options?: { stages?: boolean }, abort?: NativeAbortFlag): Promise<NativeKokoroOutput[]>;
  /** Where synthesis time went since the model loaded (for benchmarks): each stage's graphs and the host's signal work. */
  timings(): NativeKokoroTimings;
  /** Drops this object's hold on the weights; a synthesis in flight finishes first. Later calls throw `closed`. */
  release(): void;
}

/**
 * A streaming sample-rate converter (libswresample, mono float32), called synchronously on the JS thread: a 100 ms
 * chunk takes microseconds. The filter state carries over between calls, so the concatenated output of process()
 * calls and flush() does not depend on how the input was chunked.
 */
export interface NativeResampler {
  readonly inputRate: number;
  readonly outputRate: number;
  /** Int16Array samples are scaled by 1/32768; NaN and infinities become 0. Throws `invalid_argument` for other types. */
  process(samples: Float32Array | Int16Array): Float32Array;
  /** The output still held back by the filter delay (a few ms); then the next process() starts a new stream. */
  flush(): Float32Array;
  /** Drops the held input without output. */
  reset(): void;
}

/** The built-in separator's methods: `harmonic` and `accompaniment` are the input minus `percussive` and `voice`. */
export type NativeSeparationMethod = 'percussive' | 'harmonic' | 'voice' | 'accompaniment' | 'bass';

export interface NativeSeparateOptions {
  /** Rate of the input, Hz (an integer from 8000 to 192000). */
  sampleRate: number;
  method: NativeSeparationMethod;
}

/** The built-in diarizer's answer: `turns` holds (start s, end s, speaker) triples; `references` -1 for no match. */
export interface NativeDiarization {
  turns: Float64Array;
  speakers: number;
  references: Int32Array;
}

export interface NativeSystemInfo {
  version: string;
  ggmlVersion: string;
  ggmlCommit: string;
  llama: string;
  whisper: string;
  devices: { name: string; description: string }[];
  /** The cores ggml's multi-threaded computations share, process-wide (docs/architecture.md "Sharing the cores"). */
  cpuGate: NativeCpuGateStats;
}

export interface NativeCpuGateStats {
  /** Cores the leases share: those the process may run on. */
  capacity: number;
  /** Held now. */
  inUse: number;
  /** The most ever held at once (never above `capacity`). */
  peakInUse: number;
  /** Leases taken since the addon loaded. */
  acquisitions: number;
  /** Of those, the ones that waited for cores (or for an earlier caller's turn). */
  waits: number;
}

/** ggml log levels: engine log lines below the level are dropped. */
export const NativeLogLevel = { debug: 1, info: 2, warn: 3, error: 4, none: 5 } as const;

export interface NativeAddon {
  AbortFlag: new () => NativeAbortFlag;
  VadModel: { load(path: string): Promise<NativeVadModel> };
  VadStream: { readonly frameSamples: number };
  /** Rejects with `model_load_failed` for a missing, truncated or malformed file. */
  WhisperModel: { load(path: string, options?: NativeWhisperLoadOptions): Promise<NativeWhisperModel>; readonly sampleRate: number };
  /** Rejects with `model_load_failed` for a missing, truncated or malformed file. */
  ParakeetModel: { load(path: string, options?: NativeParakeetLoadOptions): Promise<NativeParakeetModel>; readonly sampleRate: number };
  /** Rejects with `model_load_failed` for missing or malformed files, or an mmproj without an audio encoder. */
  AudioLmModel: {
    load(model: string, mmproj: string, options?: NativeAudioLmLoadOptions): Promise<NativeAudioLmModel>;
    readonly sampleRate: number;
  };
  /**
   * pocketsphinx 5prealpha, opened at run time: rejects with `engine_unavailable` (naming the Debian packages) when
   * libpocketsphinx.so.3 or the default model is missing, `model_load_failed` for missing or malformed files.
   */
  SphinxModel: {
    load(options?: NativeSphinxLoadOptions): Promise<NativeSphinxModel>;
    readonly sampleRate: number;
    readonly defaultPaths: { hmm: string; lm: string; dict: string };
  };
  /**
   * flite 2.2, opened at run time: rejects with `engine_unavailable` (naming the Debian package) when libflite1 is
   * missing, `model_load_failed` when a voice does not speak.
   */
  FliteModel: { load(): Promise<NativeFliteModel>; readonly sampleRate: number; readonly voiceIds: readonly string[] };
  /**
   * Rejects with `model_load_failed` naming the problem: no mmproj, a file that is not GGUF, a backbone of an
   * architecture the engine does not drive, an mmproj without (the right) audio generator.
   */
  TtsGgmlModel: { load(options: NativeTtsGgmlLoadOptions): Promise<NativeTtsGgmlModel> };
  /** Rejects with `model_load_failed` naming the file and what is missing or mis-shaped in it. */
  KokoroModel: { load(options: NativeKokoroLoadOptions): Promise<NativeKokoroModel> };
  /**
   * Kokoro's phonemes of `text` in `langCode` (a, b, e, f, h, i, p) through espeak-ng, cut into pieces of at most 510
   * at sentence, then phrase, then word boundaries. `espeakDataDir`: espeak-ng's data (`nativeOrigin().espeakDataDir`;
   * "" for the directory it was built with; one per process). Rejects with `invalid_argument` (another language, text
   * that is not UTF-8, a word too long, a script the language does not read) or `engine_unavailable` (espeak-ng's
   * data cannot be read).
   */
  kokoroPhonemes(text: string, langCode: string, espeakDataDir: string): Promise<NativeKokoroPiece[]>;
  /** A tensor of a PyTorch checkpoint as float32 (`name` "" for a file of one bare tensor, as a voice pack is). */
  readTorchTensor(path: string, name: string): Promise<{ shape: number[]; data: Float32Array }>;
  /**
   * Decodes a whole file held in memory (WAV, MP3, FLAC, MP4/M4A, ADTS AAC, Ogg, WebM/Matroska, ...). Rejects
   * with `invalid_audio` (not audio, unsupported codec, nothing decodable), `audio_too_long` or `aborted`.
   */
  decodeAudio(data: Uint8Array, options: NativeDecodeAudioOptions, abort?: NativeAbortFlag): Promise<NativeDecodedAudio>;
  /** Throws `invalid_argument` for bad options, `encoder_unavailable` when the system's FFmpeg lacks the codec. */
  AudioEncoder: { new (options: NativeAudioEncoderOptions): NativeAudioEncoder; readonly formats: readonly NativeAudioFormat[] };
  /**
   * The target stem of 1 or 2 equal-length channels (STFT soft masks in bounded blocks, on a worker thread): as many
   * channels of the same length. Rejects with `invalid_argument` or `aborted`.
   */
  separate(channels: Float32Array[], options: NativeSeparateOptions, abort?: NativeAbortFlag): Promise<Float32Array[]>;
  /**
   * Who spoke when in 16 kHz mono `samples`, within `speech` (start, end pairs in seconds, sorted), on a worker
   * thread; each of `references` (16 kHz clips of known speakers) is matched to at most one speaker. Rejects with
   * `invalid_argument` (speaker counts outside 1..16, unsorted speech) or `aborted`.
   */
  diarize(
    samples: Float32Array,
    speech: Float64Array,
    references: Float32Array[],
    options: { minSpeakers?: number; maxSpeakers?: number },
    abort?: NativeAbortFlag,
  ): Promise<NativeDiarization>;
  /** Throws `invalid_argument` unless both rates are integers from 1000 to 384000 (Hz). */
  Resampler: new (options: { inputRate: number; outputRate: number }) => NativeResampler;
  systemInfo(): NativeSystemInfo;
  setLogLevel(level: number): void;
  /**
   * Returns the allocator's free pages to the system (glibc's malloc_trim; after a burst of large buffers the process
   * otherwise stays at its peak). True when something was released; always false where the allocator is not glibc's.
   */
  trimMemory(): boolean;
  /** Ends the process at once with `code` (_exit): nothing waits for engine calls still running. */
  exitNow(code: number): never;
}

/** A rejection from native code: `code` is machine-readable (e.g. `model_load_failed`, `aborted`). */
export interface NativeError extends Error {
  code: string;
}
