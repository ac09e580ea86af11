/**
 * Kokoro-82M (hexgrad; docs/models.md "Kokoro"): text to 24 kHz speech in one forward pass, from the released
 * PyTorch checkpoint read directly (the addon's KokoroModel, a GGML port). A model is a directory laid out as the hub
 * repository `hexgrad/Kokoro-82M`: `kokoro-v1_0.pth` (any `*.pth` of that layout), `config.json` (the phoneme
 * vocabulary, ALBERT's layer and head counts) and `voices/` (voice packs: `<name>.pt` as released, or `<name>.bin`,
 * raw float32 [510 x 256], as the npm package kokoro-js ships them).
 *
 * Text becomes Kokoro's phonemes through espeak-ng (the addon's kokoroPhonemes, in a child process of its own:
 * phonemizer-process.ts): `lang_code` a, b, e, f, h, i, p
 * (American and British English, Spanish, French, Hindi, Italian, Brazilian Portuguese) and their ISO forms; j and z
 * (Japanese, Mandarin) have voices but no espeak-ng path, so the speech service refuses them as languages the model
 * does not take. A text is cut into pieces of at most 510 phonemes (sentences first); each piece is one forward pass.
 *
 * Voices: every pack, by file name (`af_heart`); the vendor's names as Kokoro-FastAPI maps them (alloy -> am_adam,
 * ...), the four it leaves out to the default voice; weighted mixes of packs (`af_bella+af_sky`,
 * `af_bella(2)+af_sky(1)`, `af_bella-af_sky(0.3)`: each term's weight over the sum of the weights, `-` subtracting),
 * as Kokoro-FastAPI mixes them. A piece takes its voice's style from the pack's row for its phoneme count, as the
 * upstream pipeline does.
 *
 * `speed` (0.25-4) divides the durations, as the model applies it. No sampling: the harmonic source's noise is
 * seeded per piece, so a request always sounds the same. Batches (the fixed-window path) take pieces of any voice,
 * speed and language together.
 */
import { readdir, readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { ApiError, apiErrorFromNative, unavailableModelError, unloadedModelError } from '../errors.js';
import type { NativeKokoroInput, NativeKokoroModel } from '../native/addon.js';
import { loadNative, nativeOrigin } from '../native/load.js';
import { withCallbackAbort } from '../native/abort.js';
import { phonemizerProcess } from './phonemizer-process.js';
import { concatSamples } from './samples.js';
import { readTorchZipPickle } from './torch-zip.js';
import type { Engine, ResolvedModel, SynthesisOptions, SynthesisRequest, TtsModel, Voice } from './types.js';

export const KOKORO_ENGINE = 'kokoro';
const SAMPLE_RATE = 24000;
const STYLE_DIM = 256;
const DEFAULT_VOICE = 'af_heart';
const VOICES_DIR = 'voices';
/** Every module a Kokoro checkpoint holds, as the keys of its top-level dict. */
const CHECKPOINT_PARTS = ['bert', 'bert_encoder', 'predictor', 'text_encoder', 'decoder'];

/** `lang_code` (docs/api.md) to the phonemizer's language. */
const LANGUAGES: Readonly<Record<string, string>> = {
  a: 'a',
  en: 'a',
  'en-us': 'a',
  b: 'b',
  'en-gb': 'b',
  e: 'e',
  es: 'e',
  f: 'f',
  fr: 'f',
  'fr-fr': 'f',
  h: 'h',
  hi: 'h',
  i: 'i',
  it: 'i',
  p: 'p',
  pt: 'p',
  'pt-br': 'p',
};

/** A voice pack's first letter: the language its voice speaks (j and z included, which this engine cannot speak). */
const VOICE_LANGUAGES: Readonly<Record<string, string>> = {
  a: 'American English',
  b: 'British English',
  e: 'Spanish',
  f: 'French',
  h: 'Hindi',
  i: 'Italian',
  j: 'Japanese',
  p: 'Brazilian Portuguese',
  z: 'Mandarin',
};

/** The vendor's voice names, as Kokoro-FastAPI maps them (its openai_mappings.json). */
const VENDOR_VOICES: Readonly<Record<string, string>> = {
  alloy: 'am_adam',
  ash: 'af_nicole',
  coral: 'bf_emma',
  echo: 'af_bella',
  fable: 'af_sarah',
  onyx: 'bm_george',
  nova: 'bf_isabella',
  sage: 'am_michael',
  shimmer: 'af_sky',
};
/** The vendor's other voice names, which Kokoro-FastAPI leaves unmapped: the default voice speaks for them. */
const UNMAPPED_VENDOR_VOICES = ['ballad', 'cedar', 'marin', 'verse'];

/** A voice mix's term: `name` or `name(weight)`, after a `+` or `-` (none before the first). */
const MIX_TERM = /^([a-z0-9_]+)(?:\(([^()]*)\))?$/;
/** Mixed packs kept, by their canonical mix. */
const MAX_CACHED_MIXES = 32;

// ---- files ----

/** True when `file` is a PyTorch checkpoint holding Kokoro's five modules. */
async function isKokoroCheckpoint(file: string): Promise<boolean> {
  if (!file.toLowerCase().endsWith('.pth')) return false;
  const pickle = await readTorchZipPickle(file);
  // the top-level dict's keys are pickled as strings: each part's name appears in the pickle as its bytes
  return pickle !== null && CHECKPOINT_PARTS.every((part) => pickle.includes(Buffer.from(part)));
}

/** The checkpoint at `p` (a file) or in `p` (a directory). */
async function locateCheckpoint(p: string): Promise<string | null> {
  const info = await stat(p).catch(() => null);
  if (!info) return null;
  if (info.isFile()) return (await isKokoroCheckpoint(p)) ? p : null;
  if (!info.isDirectory()) return null;
  for (const name of (await readdir(p)).sort()) {
    if (await isKokoroCheckpoint(path.join(p, name))) return path.join(p, name);
  }
  return null;
}

interface KokoroConfig {
  vocab: Map<string, number>;
  bertLayers: number;
  bertHeads: number;
}

/** config.json beside the checkpoint: the vocabulary and ALBERT's counts. */
async function readConfig(dir: string): Promise<KokoroConfig> {
  const file = path.join(dir, 'config.json');
  const text = await readFile(file, 'utf8').catch(() => {
    throw new Error(`${file} is missing: a Kokoro model needs the config.json its checkpoint was released with`);
  });
  const json = JSON.parse(text) as { vocab?: Record<string, number>; plbert?: { num_hidden_layers?: number; num_attention_heads?: number } };
  if (!json.vocab || typeof json.vocab !== 'object') throw new Error(`${file} has no phoneme vocabulary ("vocab")`);
  const vocab = new Map(Object.entries(json.vocab).filter(([symbol, id]) => [...symbol].length === 1 && Number.isInteger(id)));
  return { vocab, bertLayers: json.plbert?.num_hidden_layers ?? 12, bertHeads: json.plbert?.num_attention_heads ?? 12 };
}

/** Every voice pack in `dir`: rows of 256 style values, by name. */
async function readVoicePacks(dir: string): Promise<Map<string, Float32Array>> {
  const packs = new Map<string, Float32Array>();
  for (const file of (await readdir(dir).catch(() => [] as string[])).sort()) {
    const [, name, kind] = /^([a-z0-9_]+)\.(pt|bin)$/i.exec(file) ?? [];
    if (!name || !kind || packs.has(name.toLowerCase())) continue;
    const full = path.join(dir, file);
    const values = kind.toLowerCase() === 'pt' ? (await loadNative().readTorchTensor(full, '')).data : floats(await readFile(full));
    if (values.length === 0 || values.length % STYLE_DIM !== 0) throw new Error(`${full} is not a Kokoro voice pack (rows of ${STYLE_DIM} values)`);
    packs.set(name.toLowerCase(), values);
  }
  return packs;
}

function floats(bytes: Buffer): Float32Array {
  return new Float32Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.length - (bytes.length % 4)));
}

// ---- voices ----

interface MixTerm {
  name: string;
  weight: number;
  sign: 1 | -1;
}

/** A voice's description: its language and gender from its name's prefix (`af_`: American English, female). */
function describeVoice(id: string): string {
  const match = /^([a-z])([fm])_/.exec(id);
  const language = match ? VOICE_LANGUAGES[match[1] as string] : undefined;
  return match && language ? `${id} (${language}, ${match[2] === 'f' ? 'female' : 'male'})` : id;
}

/** The API error for a native one the client caused; others as they are. */
function clientError(error: unknown): unknown {
  return apiErrorFromNative(error, { codes: ['invalid_argument'], input: 'synthesis.text' });
}

class KokoroTtsModel implements TtsModel {
  readonly task = 'tts' as const;
  readonly engine = KOKORO_ENGINE;
  readonly sampleRate = SAMPLE_RATE;
  readonly voices: readonly Voice[];
  readonly defaultVoice: string;
  readonly voiceAliases: Readonly<Record<string, string>>;
  readonly capabilities = { cloning: false, instructions: false, sampling: false, languages: Object.keys(LANGUAGES) };
  /** The languages it speaks by their one-letter codes (j and z, which it has voices for but cannot read, left out). */
  readonly languageNames = Object.fromEntries(Object.entries(VOICE_LANGUAGES).filter(([code]) => code in LANGUAGES));
  /** One forward pass keeps every core busy. */
  readonly concurrency = 1;
  readonly mixedBatches = true;
  private readonly mixes = new Map<string, Float32Array>();

  constructor(
    readonly id: string,
    private native: NativeKokoroModel | null,
    private readonly config: KokoroConfig,
    private readonly packs: Map<string, Float32Array>,
  ) {
    this.defaultVoice = packs.has(DEFAULT_VOICE) ? DEFAULT_VOICE : ([...packs.keys()][0] ?? DEFAULT_VOICE);
    // the default first (clients, the web interface among them, offer the first voice listed), then by name
    const names = [this.defaultVoice, ...[...packs.keys()].filter((name) => name !== this.defaultVoice)];
    this.voices = names.filter((name) => packs.has(name)).map((name) => ({ id: name, name: describeVoice(name), language: name[0] as string }));
    const aliases: Record<string, string> = {};
    for (const [vendor, voice] of Object.entries(VENDOR_VOICES)) aliases[vendor] = packs.has(voice) ? voice : this.defaultVoice;
    for (const vendor of UNMAPPED_VENDOR_VOICES) aliases[vendor] = this.defaultVoice;
    this.voiceAliases = Object.freeze(aliases);
  }

  /**
   * A weighted mix of the model's voices in its canonical form (`af_bella(2)+af_sky(1)`), or null for a voice
   * that is not a mix. Throws an ApiError naming what is wrong with a malformed one.
   */
  combineVoices(voice: string): string | null {
    const text = voice.replace(/\s+/g, '').toLowerCase();
    if (!/[+\-()]/.test(text)) return null;
    return this.mixTerms(text, voice)
      .map((t, i) => `${i === 0 ? (t.sign < 0 ? '-' : '') : t.sign < 0 ? '-' : '+'}${t.name}(${t.weight})`)
      .join('');
  }

  private mixTerms(text: string, original: string): MixTerm[] {
    const fail = (why: string): never => {
      throw new ApiError('invalid_request', `voice '${original}' is not a mix of this model's voices: ${why}`, { param: 'voice' });
    };
    const parts = text.split(/([+-])/);
    const terms: MixTerm[] = [];
    let sign: 1 | -1 = 1;
    for (let i = 0; i < parts.length; i++) {
      const part = parts[i] as string;
      if (i % 2 === 1) {
        sign = part === '-' ? -1 : 1;
        continue;
      }
      if (!part) {
        if (i === 0 && parts[1] === '-') continue; // a leading minus: the first term subtracts
        fail(i === 0 ? 'it starts with an operator' : 'an operator has no voice after it');
      }
      const match = MIX_TERM.exec(part) ?? fail(`'${part}' is not a voice name or name(weight)`);
      const given = match[1] as string;
      const name = this.packs.has(given) ? given : VENDOR_VOICES[given];
      if (!name || !this.packs.has(name)) fail(`'${given}' is not one of its voices (${this.voices.map((v) => v.id).join(', ')})`);
      const weight = match[2] === undefined ? 1 : Number(match[2]);
      if (!(Number.isFinite(weight) && weight > 0)) fail(`the weight of '${given}' must be a positive number`);
      terms.push({ name: name as string, weight, sign });
      sign = 1;
    }
    return terms;
  }

  /** The pack for a voice: one of the model's, or a mix of them (each term's weight over the sum of the weights). */
  private packFor(voice: string): Float32Array {
    const own = this.packs.get(voice);
    if (own) return own;
    const cached = this.mixes.get(voice);
    if (cached) return cached;
    const terms = this.mixTerms(voice, voice);
    const total = terms.reduce((sum, t) => sum + t.weight, 0);
    const rows = Math.min(...terms.map((t) => (this.packs.get(t.name) as Float32Array).length));
    const mixed = new Float32Array(rows);
    for (const t of terms) {
      const pack = this.packs.get(t.name) as Float32Array;
      const scale = (t.sign * t.weight) / total;
      for (let i = 0; i < rows; i++) mixed[i] = (mixed[i] as number) + (pack[i] as number) * scale;
    }
    if (this.mixes.size >= MAX_CACHED_MIXES) this.mixes.delete(this.mixes.keys().next().value as string);
    this.mixes.set(voice, mixed);
    return mixed;
  }

  /** The native inputs for a request: one per phoneme piece of its text. */
  private async inputs(request: SynthesisRequest): Promise<NativeKokoroInput[]> {
    const language = LANGUAGES[(request.language ?? 'a').toLowerCase()] ?? 'a';
    let pieces;
    try {
      pieces = await phonemizerProcess.phonemes(request.text, language, nativeOrigin().espeakDataDir ?? '');
    } catch (error) {
      throw clientError(error);
    }
    const pack = this.packFor(request.voice);
    const rows = pack.length / STYLE_DIM;
    return pieces.map((piece, index) => {
      const symbols = [...piece.phonemes];
      const ids = [0];
      for (const symbol of symbols) {
        const id = this.config.vocab.get(symbol);
        if (id !== undefined) ids.push(id);
      }
      ids.push(0);
      // the upstream pipeline's style row: the phoneme count less one
      const row = Math.min(Math.max(symbols.length - 1, 0), rows - 1);
      return {
        ids: Int32Array.from(ids),
        style: pack.slice(row * STYLE_DIM, (row + 1) * STYLE_DIM),
        speed: request.speed,
        seed: index,
        noise: true,
      };
    });
  }

  async synthesize(request: SynthesisRequest, options: SynthesisOptions = {}): Promise<Float32Array> {
    const native = this.loaded();
    const inputs = await this.inputs(request);
    return withCallbackAbort(options.signal, options.onAudio, async (flag, onAudio) => {
      const spoken: Float32Array[] = [];
      // a piece at a time, so its audio goes out before the next piece is spoken
      for (const input of inputs) {
        const [output] = await native.synthesize([input], {}, flag).catch((error: unknown) => {
          throw clientError(error);
        });
        const audio = output?.audio ?? new Float32Array(0);
        onAudio?.(audio);
        spoken.push(audio);
      }
      return concatSamples(spoken);
    });
  }

  /** Every piece of every request in one forward pass; each request's audio in order. */
  async synthesizeBatch(requests: SynthesisRequest[], signal?: AbortSignal): Promise<Float32Array[]> {
    const native = this.loaded();
    const perRequest = await Promise.all(requests.map((request) => this.inputs(request)));
    const outputs = await withCallbackAbort(signal, undefined, (flag) =>
      native.synthesize(perRequest.flat(), {}, flag).catch((error: unknown) => {
        throw clientError(error);
      }),
    );
    let next = 0;
    return perRequest.map((inputs) => concatSamples(outputs.slice(next, (next += inputs.length)).map((o) => o.audio)));
  }

  private loaded(): NativeKokoroModel {
    if (!this.native) throw unloadedModelError(this.id);
    return this.native;
  }

  async dispose(): Promise<void> {
    this.native?.release(); // a synthesis in flight keeps the weights until it ends
    this.native = null;
  }
}

export const kokoroEngine: Engine<TtsModel> = {
  name: KOKORO_ENGINE,
  task: 'tts',

  async detect(p: string): Promise<boolean> {
    return (await locateCheckpoint(p)) !== null;
  },

  async load(resolved: ResolvedModel): Promise<TtsModel> {
    const checkpoint = await locateCheckpoint(resolved.path);
    if (!checkpoint) throw new Error(`${resolved.path} holds no Kokoro checkpoint (a .pth with its bert, predictor, text_encoder and decoder)`);
    const dir = path.dirname(checkpoint);
    const config = await readConfig(dir);
    const packs = await readVoicePacks(path.join(dir, VOICES_DIR));
    if (packs.size === 0) throw new Error(`${path.join(dir, VOICES_DIR)} holds no voice pack (<name>.pt or <name>.bin)`);
    // espeak-ng's data is read now, so that a server without it refuses the model, not each request
    await phonemizerProcess.phonemes('', 'a', nativeOrigin().espeakDataDir ?? '').catch((error: unknown) => {
      throw unavailableModelError(resolved.id, error);
    });
    const native = await loadNative().KokoroModel.load({ checkpoint, bertLayers: config.bertLayers, bertHeads: config.bertHeads });
    return new KokoroTtsModel(resolved.id, native, config, packs);
  },
};
