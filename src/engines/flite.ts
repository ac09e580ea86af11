/**
 * The built-in text-to-speech model `flite`: CMU flite 2.2 with four English voices (slt, kal, awb, rms) at
 * 16 kHz, offline and with nothing to download. A platform package links flite in; a source build opens Debian's
 * libflite1 at run time, so without it only this model fails to load, with a message naming the package.
 *
 * `speed` is flite's own rate control (its duration stretch, so the pitch is kept). flite has no sampling, style
 * instructions or voice cloning, as its `capabilities` say: the speech service drops or refuses those fields before
 * a request gets here. Every English `lang_code` is spoken with flite's US English lexicon and letter-to-sound rules. The text is normalised first
 * (normaliseFliteText): libflite 2.2 corrupts its heap on some inputs.
 */
import { availableParallelism } from 'node:os';
import { ApiError, unavailableModelError, unloadedModelError } from '../errors.js';
import type { NativeFliteModel } from '../native/addon.js';
import { loadNative } from '../native/load.js';
import { withCallbackAbort } from '../native/abort.js';
import type { SynthesisOptions, SynthesisRequest, TtsModel, Voice } from './types.js';

/** The reserved model ID of the built-in voices. */
export const FLITE_MODEL_ID = 'flite';
export const FLITE_ENGINE = 'flite';
const SAMPLE_RATE = 16000;
const DEFAULT_VOICE = 'slt';

/** The voices, in the order `GET /v1/audio/voices` lists them. */
export const FLITE_VOICES: readonly Voice[] = [
  { id: 'slt', name: 'slt (US English, female)' },
  { id: 'kal', name: 'kal (US English, male, diphone)' },
  { id: 'awb', name: 'awb (Scottish English, male)' },
  { id: 'rms', name: 'rms (US English, male)' },
];

/**
 * The vendor's voice names and the flite voice each one speaks with: the female-sounding ones with slt (flite's
 * only female voice), the male-sounding ones spread over kal, awb and rms (onyx and cedar, the deepest, with rms;
 * fable and ballad, the storytellers, with awb).
 */
export const VENDOR_VOICES: Readonly<Record<string, string>> = Object.freeze({
  alloy: 'slt',
  ash: 'kal',
  ballad: 'awb',
  cedar: 'rms',
  coral: 'slt',
  echo: 'kal',
  fable: 'awb',
  marin: 'slt',
  nova: 'slt',
  onyx: 'rms',
  sage: 'slt',
  shimmer: 'slt',
  verse: 'kal',
});

/** `lang_code`s it takes: Kokoro-style `a` (American) and `b` (British English), and the ISO forms. */
export const FLITE_LANGUAGES: readonly string[] = ['a', 'b', 'en', 'en-us', 'en-gb'];

/** The longest token (run of non-blank characters) flite is given, in code points, its closing marks aside. */
export const MAX_FLITE_TOKEN = 64;

/** Control characters and whitespace, but for the four flite's tokenizer splits at: space, tab, CR and LF. */
const UNKNOWN_SPACE = /[^\P{Cc}\t\n\r]|[^\S \t\n\r]/gu;
/** Four or more ASCII punctuation marks or symbols in a row. */
const PUNCTUATION_RUN = /[!-/:-@[-`{-~]{4,}/g;
/** What flite reads as one token. */
const TOKEN = /[^ \t\n\r]+/g;
/** The marks flite strips from the end of a token and keeps as its punctuation (the voices' text_postpunctuation). */
const CLOSING_MARKS = /["'`.,:;!?(){}[\]]*$/;

/**
 * The text as libflite is given it, which must never be what breaks it. flite 2.2 writes past a buffer once a
 * token ends in about 307 punctuation marks ("Hello" and 400 "!" abort the process), and spells out or reads digit
 * by digit a token of any length (4096 "x" is 15 minutes of audio and 900 MB). So:
 * - control characters and whitespace flite does not split at (no-break and other Unicode spaces, vertical tab,
 *   form feed) become spaces;
 * - a run of four or more ASCII punctuation marks or symbols keeps each of its characters once, in the order they
 *   first appear ("Hello!!!!" is "Hello!", "?!?!?!" is "?!", "%%%%" is "%"): flite pauses and ends sentences by
 *   which marks follow a word, not how many, so the audio after a word does not change, except that a symbol flite
 *   reads out is said once instead of at every repeat;
 * - a token longer than MAX_FLITE_TOKEN code points keeps its first MAX_FLITE_TOKEN and its closing marks.
 * Ordinary text is left as it is. Done here rather than in the addon: this module is the only caller of the
 * native synthesis, and these are rules about text, tested without the library.
 */
export function normaliseFliteText(text: string): string {
  return text
    .replace(UNKNOWN_SPACE, ' ')
    .replace(PUNCTUATION_RUN, (run) => [...new Set(run)].join(''))
    .replace(TOKEN, (token) => {
      if (token.length <= MAX_FLITE_TOKEN) return token; // UTF-16 units: never fewer than code points
      const closing = CLOSING_MARKS.exec(token)![0];
      const body = [...token.slice(0, token.length - closing.length)];
      return body.length <= MAX_FLITE_TOKEN ? token : body.slice(0, MAX_FLITE_TOKEN).join('') + closing;
    });
}

class FliteTtsModel implements TtsModel {
  readonly task = 'tts' as const;
  readonly engine = FLITE_ENGINE;
  readonly sampleRate = SAMPLE_RATE;
  readonly voices = FLITE_VOICES;
  readonly defaultVoice = DEFAULT_VOICE;
  readonly voiceAliases = VENDOR_VOICES;
  readonly capabilities = { cloning: false, instructions: false, sampling: false, languages: FLITE_LANGUAGES };
  /** A synthesis runs on one thread and calls share nothing they write: one per core at once. */
  readonly concurrency = Math.max(1, availableParallelism());

  constructor(
    readonly id: string,
    private native: NativeFliteModel | null,
  ) {}

  /** Whether the same request always gives the same samples (see NativeFliteModel.deterministic). */
  get deterministic(): boolean {
    return this.native?.deterministic ?? false;
  }

  async synthesize(request: SynthesisRequest, options: SynthesisOptions = {}): Promise<Float32Array> {
    const native = this.native;
    if (!native) throw unloadedModelError(this.id);
    const voice = this.resolveVoice(request.voice);
    const speed = request.speed ?? 1;
    if (!Number.isFinite(speed) || speed < 0.25 || speed > 4) {
      throw new ApiError('invalid_request', `speed must be from 0.25 to 4 (got ${speed})`, { input: 'synthesis.speed' });
    }
    // language, instructions, a reference and sampling settings are the speech service's to refuse or drop
    // (capabilities): flite speaks English in its own voices and does not sample

    return withCallbackAbort(options.signal, options.onAudio, (flag, onAudio) =>
      native.synthesize(normaliseFliteText(request.text), { voice, speed }, onAudio, flag),
    );
  }

  async dispose(): Promise<void> {
    // syntheses in flight finish; flite's voices stay registered in the process (they are part of the library)
    this.native?.release();
    this.native = null;
  }

  /** One of the voice IDs, or a vendor name (any case). */
  private resolveVoice(voice: string | undefined): string {
    if (!voice) return DEFAULT_VOICE;
    const wanted = voice.trim().toLowerCase();
    const own = FLITE_VOICES.find((v) => v.id === wanted);
    if (own) return own.id;
    const alias = Object.hasOwn(VENDOR_VOICES, wanted) ? VENDOR_VOICES[wanted] : undefined;
    if (alias) return alias;
    throw new ApiError('invalid_request', `unknown voice '${voice}' for model ${this.id}; voices: ${FLITE_VOICES.map((v) => v.id).join(', ')}`, {
      input: 'synthesis.voice',
    });
  }
}

/**
 * Loads the built-in voices (every voice speaks once to prove the installation works). A missing library becomes
 * a 400 `invalid_model` whose message names the package to install.
 */
export async function loadFliteModel(id: string = FLITE_MODEL_ID): Promise<TtsModel> {
  try {
    return new FliteTtsModel(id, await loadNative().FliteModel.load());
  } catch (error) {
    throw unavailableModelError(id, error);
  }
}
