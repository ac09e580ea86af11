/**
 * Speech-to-text on audio language models: a GGUF language model plus its audio mmproj (Qwen3-ASR, Voxtral,
 * Granite Speech, the audio input of Gemma and Qwen-Omni models), run by the native batcher over libllama and libmtmd
 * (docs/models.md "Audio language models"). The model is asked, in its own chat template, to transcribe (or
 * translate) the audio; its answer, less any preamble or reasoning (audio-lm-answer.ts), is the transcript. These
 * models give no timestamps: a transcription is one segment spanning its audio, so a long upload, cut at the VAD's
 * pauses, has a segment per cut. Concurrent transcriptions and the cuts of one upload decode together, each with the
 * tokens it gets alone.
 */
import { randomInt } from 'node:crypto';
import { ApiError, apiErrorFromNative, unloadedModelError } from '../errors.js';
import type { NativeAudioLmInfo, NativeAudioLmModel } from '../native/addon.js';
import { abortFlagFor, loadUnlessAborted } from '../native/abort.js';
import { loadNative } from '../native/load.js';
import { languageCode, languageName } from '../languages.js';
import { AnswerFilter } from './audio-lm-answer.js';
import { GGML_TTS_ARCHITECTURES } from './ggml-tts.js';
import { locateGgufPair, readGgufArchitecture, readGgufStrings } from './gguf-files.js';
import { UNIDENTIFIED_LANGUAGE } from './parakeet.js';
import { RedecodingStreamingSession } from './redecoding-streaming.js';
import type { Engine, ResolvedModel, StreamingOptions, SttModel, SttStreamingSession, TranscribeOptions, TranscriptionResult } from './types.js';
import { compressionRatio } from './whisper.js';

export const AUDIO_LM_ENGINE = 'audio-lm';
const SAMPLE_RATE = 16000;
/** The most a transcription holds: uploads are cut at the VAD's pauses into chunks this long (mtmd's audio window). */
const CHUNK_SECONDS = 30;
/**
 * The most tokens an answer may have: the request's `max_tokens`, and at most 10 per second of audio and 32 more.
 * Speech runs at up to 7 or so tokens a second in these models' vocabularies (fast speech, one token per Chinese
 * character); a model caught repeating itself would otherwise decode to the end of its KV cells, on every live pass.
 */
const TOKENS_PER_SECOND = 10;
const EXTRA_TOKENS = 32;

function answerLimit(seconds: number, requested: number | undefined): number {
  const limit = Math.ceil(seconds * TOKENS_PER_SECOND) + EXTRA_TOKENS;
  return requested && requested > 0 ? Math.min(Math.floor(requested), limit) : limit;
}

/** Keys of an mmproj's header read for its projector type: every one (an mmproj has a few dozen). */
const MMPROJ_MAX_KEYS = 4096;
/** Live: the window past which the turn's finished segments are committed (a re-decode costs what it holds). */
const LIVE_WINDOW_SECONDS = 20;

/** The prompt of a transcription, in the model's chat template (the audio follows `user`; no system message when `system` is absent). */
interface Prompt {
  system?: string;
  user: string;
  assistant: string;
}

/** What the engine knows of a projector family: languages (ISO 639-1; null = not stated), translation, its prompt. */
interface Family {
  label: string;
  languages: readonly string[] | null;
  translate: boolean;
  /** The prompt for a language (null: not named), translation and context (the request's prompt: hotwords, names). */
  prompt(language: string | null, translate: boolean, context: string): Prompt;
  /** The answer starts with Qwen3-ASR's `language X<asr_text>` preamble (audio-lm-answer.ts). */
  preamble?: boolean;
}

/**
 * llama.cpp's server's words (`common_chat_get_asr_prompt`): the instruction, with the language named, before the
 * audio; the context as a system message before it.
 */
function instructedPrompt(language: string | null, translate: boolean, context: string): Prompt {
  const named = language ? ` (language: ${englishName(language)})` : '';
  const user = translate ? 'Translate the audio to English text' : `Transcribe audio to text${named}`;
  return { ...(context ? { system: context } : {}), user, assistant: '' };
}

/** LFM2-Audio's (llama.cpp's server gives its template this one): `Perform ASR.` as the system message, then the audio. */
function lfm2Prompt(language: string | null, _translate: boolean, context: string): Prompt {
  const named = language ? `(language: ${englishName(language)})` : '';
  return { system: ['Perform ASR.', context].filter(Boolean).join('\n'), user: named, assistant: '' };
}

/**
 * Qwen3-ASR's own layout (its model card and toolkit): the context as the system message (empty when there is none),
 * the audio alone in the user's, and a language the request names as the start of the answer
 * (`language English<asr_text>`), which the model otherwise writes itself.
 */
function qwen3AsrPrompt(language: string | null, _translate: boolean, context: string): Prompt {
  return { system: context, user: '', assistant: language ? `language ${englishName(language)}<asr_text>` : '' };
}

/** A language's English name as the models' prompts write it: `English`. */
function englishName(code: string): string {
  const name = languageName(code);
  return name.charAt(0).toUpperCase() + name.slice(1);
}

/**
 * Audio projectors of recognizers (the mmproj's `clip.audio.projector_type`), from llama.cpp's libmtmd. Qwen3-ASR
 * transcribes 30 languages and 22 Chinese dialects and does not translate (its model card); Voxtral transcribes and
 * translates its 8 languages (its model card); the general chat models (Gemma, Qwen-Omni, Ultravox, ...) are asked in
 * words and answer in any language they know.
 */
const FAMILIES: Readonly<Record<string, Family>> = {
  qwen3a: {
    label: 'Qwen3-ASR',
    // Qwen3-ASR's model card, less Cantonese and Filipino (no ISO 639-1 code) and the dialects
    languages: [
      'zh',
      'en',
      'ar',
      'de',
      'fr',
      'es',
      'pt',
      'id',
      'it',
      'ko',
      'ru',
      'th',
      'vi',
      'ja',
      'tr',
      'hi',
      'ms',
      'nl',
      'sv',
      'da',
      'fi',
      'pl',
      'cs',
      'fa',
      'el',
      'hu',
      'mk',
      'ro',
    ],
    translate: false,
    prompt: qwen3AsrPrompt,
    preamble: true,
  },
  voxtral: { label: 'Voxtral', languages: ['en', 'es', 'fr', 'pt', 'hi', 'de', 'nl', 'it'], translate: true, prompt: instructedPrompt },
  lfm2a: { label: 'LFM2-Audio', languages: null, translate: false, prompt: lfm2Prompt },
};
const GENERAL_FAMILY: Family = { label: 'audio language model', languages: null, translate: true, prompt: instructedPrompt };
/** Projector types (llama.cpp's names) whose encoders hear speech for a language model. */
export const RECOGNIZER_PROJECTORS: readonly string[] = [
  'qwen3a', 'voxtral', 'qwen2a', 'qwen2.5o', 'ultravox', 'glma', 'meralion', 'lfm2a', 'granite_speech', 'gemma3na', 'gemma4a', 'gemma4ua',
]; // prettier-ignore

/** The audio projector type of an mmproj, or null when it is not a GGUF mmproj. */
async function projectorType(mmproj: string): Promise<string | null> {
  // an mmproj of vision and audio encoders writes the audio keys after the vision ones: its whole (small) header is read
  const keys = await readGgufStrings(mmproj, ['clip.audio.projector_type', 'clip.projector_type'], MMPROJ_MAX_KEYS);
  return keys?.['clip.audio.projector_type'] ?? keys?.['clip.projector_type'] ?? null;
}

/** A language model: a GGUF that is neither an mmproj (architecture clip) nor a GGML text-to-speech backbone. */
async function isLanguageModel(file: string): Promise<boolean> {
  const arch = await readGgufArchitecture(file);
  return arch !== null && arch !== 'clip' && !GGML_TTS_ARCHITECTURES.includes(arch);
}

/** The first mmproj whose projector is a recognizer's. */
async function recognizerProjector(candidates: string[]): Promise<string | null> {
  for (const file of candidates) if (RECOGNIZER_PROJECTORS.includes((await projectorType(file)) ?? '')) return file;
  return null;
}

class AudioLmSttModel implements SttModel {
  readonly task = 'stt' as const;
  readonly engine = AUDIO_LM_ENGINE;
  readonly sampleRate = SAMPLE_RATE;
  readonly capabilities: SttModel['capabilities'];
  /** Every job admitted at once joins the native batch: a decode step of many costs little more than one of one. */
  readonly batchSize: number;
  readonly declaresDelay = true;
  readonly family: Family;

  constructor(
    readonly id: string,
    private native: NativeAudioLmModel | null,
    readonly info: NativeAudioLmInfo,
    maxBatch: number,
  ) {
    this.batchSize = maxBatch;
    this.family = FAMILIES[info.projector] ?? GENERAL_FAMILY;
    this.capabilities = {
      translate: this.family.translate,
      wordTimestamps: false,
      languages: this.family.languages,
      vadChunking: true,
      chunkSeconds: CHUNK_SECONDS,
      streamsText: true,
      batchedChunks: true,
    };
  }

  private get loaded(): NativeAudioLmModel {
    if (!this.native) throw unloadedModelError(this.id);
    return this.native;
  }

  async transcribe(samples: Float32Array, options: TranscribeOptions = {}): Promise<TranscriptionResult> {
    const native = this.loaded;
    const language = options.language ?? null;
    // one filter over the answer: fed each piece as it streams, or the whole text at the end (the same transcript)
    const filter = new AnswerFilter({ preamble: this.family.preamble ?? false });
    let transcript = '';
    // the transcript starts at its first non-blank character; deltas carry a segment's leading space as the text does
    const send = (text: string): void => {
      const out = transcript === '' ? text.trimStart() : text;
      if (out === '') return;
      options.onText?.(transcript === '' ? ` ${out}` : out);
      transcript += out;
    };
    const params = {
      ...this.family.prompt(language, options.translate ?? false, options.prompt ?? ''),
      maxTokens: answerLimit(samples.length / SAMPLE_RATE, options.maxTokens),
      temperature: options.temperature ?? 0,
      // a sampled answer draws anew each time; a greedy one does not draw
      seed: randomInt(2 ** 32),
    };
    const onText = options.onText ? (piece: string): void => send(filter.push(piece)) : undefined;
    // a throw from the call itself (bad arguments) takes the same way as a rejection
    const result = await Promise.resolve()
      .then(() => native.transcribe(samples, params, onText, abortFlagFor(options.signal)))
      .catch((error: unknown) => {
        throw apiErrorFromNative(error, { codes: ['invalid_argument'] });
      });
    if (!options.onText) send(filter.push(result.text));
    send(filter.end());
    const text = transcript.trim();
    const heard = filter.language ? languageCode(filter.language) : null;
    const reported = options.translate ? 'en' : (language ?? heard ?? UNIDENTIFIED_LANGUAGE);
    const duration = samples.length / SAMPLE_RATE;
    const segments =
      text === ''
        ? []
        : [
            {
              id: 0,
              start: 0,
              end: duration,
              text: ` ${text}`,
              tokens: result.tokens,
              temperature: options.temperature ?? 0,
              avgLogprob: result.logprobs.length ? result.logprobs.reduce((sum, p) => sum + p, 0) / result.logprobs.length : 0,
              compressionRatio: compressionRatio(text),
              noSpeechProb: 0,
            },
          ];
    for (const segment of segments) options.onSegment?.(segment, reported);
    return { text, language: reported, duration, segments };
  }

  async createStreamingSession(options: StreamingOptions = {}): Promise<SttStreamingSession> {
    // one segment per pass: past its length the window is committed whole
    return new RedecodingStreamingSession(this, options, LIVE_WINDOW_SECONDS, { commitWhole: true });
  }

  async dispose(): Promise<void> {
    // the weights are freed now, or by the last transcription still running
    this.native?.release();
    this.native = null;
  }
}

export interface AudioLmEngineOptions {
  /** Transcriptions decoded together (--stt-max-batch-size); default 8. */
  maxBatchSize?: number;
}

export function createAudioLmEngine(options: AudioLmEngineOptions = {}): Engine<SttModel> {
  const maxBatch = Math.min(Math.max(options.maxBatchSize ?? 8, 1), 64);
  return {
    name: AUDIO_LM_ENGINE,
    task: 'stt',
    async detect(p: string): Promise<boolean> {
      return ((await locateGgufPair({ path: p, projector: null }, isLanguageModel, recognizerProjector))?.mmproj ?? null) !== null;
    },
    async load(resolved: ResolvedModel, signal?: AbortSignal): Promise<SttModel> {
      const files = await locateGgufPair(resolved, isLanguageModel, recognizerProjector);
      if (!files?.mmproj) {
        throw new ApiError('invalid_model', `no audio mmproj found for ${resolved.path}: an audio language model needs its mmproj GGUF beside it`);
      }
      const { model, mmproj } = files;
      const native = await loadUnlessAborted(signal, () => loadNative().AudioLmModel.load(model, mmproj, { maxBatch }));
      return new AudioLmSttModel(resolved.id, native, native.info(), maxBatch);
    },
  };
}
