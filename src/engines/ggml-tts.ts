/**
 * GGML text-to-speech through llama.cpp's libmtmd audio generation (the addon's TtsGgmlModel): a backbone GGUF plus
 * its mmproj GGUF, of two families: Pocket TTS (kyutai; llama.cpp architecture `pockettts`: English) and Qwen3-TTS
 * (Qwen; `qwen3tts`: ten languages), both 24 kHz, 12.5 frames per second, and cloning a voice from a reference clip
 * through the mmproj's speaker encoder. Requests are sequences of the model's one context: a serial synthesis
 * (streaming) steps its own, a continuous-batching session (the other requests) makes a frame for all of its
 * requests with one backbone decode per step; a request's audio is the same either way.
 *
 * A model is a directory holding `<name>.gguf` and `mmproj*.gguf` (the layout of llama.cpp's hub repositories), a
 * backbone file with its mmproj beside it, or a hub repository (the registry downloads both). Voices: `default`
 * (no reference) and one per audio clip in the model directory's `voices/` folder, which clones that clip, plus one
 * per clip of the server's `--voices-dir` (handed in through `createGgmlTtsEngine`; the model's own clip wins on a
 * name clash).
 *
 * Request fields: `max_tokens` bounds the frames, the `seed` extension makes the sampling reproducible,
 * `temperature` scales the sampling (default: the model's own; 0 the least randomness), `ref_audio` clones a voice,
 * `lang_code` picks the language among the family's; `ref_text` is ignored (both clone from audio alone); neither
 * family takes style instructions (the speech service speaks without them and says so); `speed` other than 1 is a
 * 400.
 */
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { ApiError, apiErrorFromNative, unloadedModelError } from '../errors.js';
import type { NativeTtsGgmlModel, NativeTtsGgmlRequest } from '../native/addon.js';
import { loadNative } from '../native/load.js';
import { withCallbackAbort } from '../native/abort.js';
import { locateGgufPair, readGgufArchitecture } from './gguf-files.js';
import type { Engine, ResolvedModel, SynthesisOptions, SynthesisRequest, TtsBatchSession, TtsModel, Voice } from './types.js';

export const GGML_TTS_ENGINE = 'ggml-tts';

/** What the engine knows of a model family beyond its native model: its name and languages. */
interface Family {
  label: string;
  /** The `lang_code`s it speaks, each to the language name the native model takes (null: it has no choice). */
  languages: Readonly<Record<string, string | null>>;
}

const ENGLISH_CODES = ['a', 'b', 'en', 'en-us', 'en-gb'];

/** Backbone architectures (GGUF `general.architecture`) this engine drives. */
const FAMILIES: Readonly<Record<string, Family>> = {
  // English only: the language is the weight pack's
  pockettts: { label: 'Pocket TTS', languages: Object.fromEntries(ENGLISH_CODES.map((code) => [code, null])) },
  // `lang_code`'s letters (docs/api.md) where the model has the language (not Hindi), and ISO 639-1 codes for all ten it has
  qwen3tts: {
    label: 'Qwen3-TTS',
    languages: {
      ...Object.fromEntries(ENGLISH_CODES.map((code) => [code, 'english'])),
      e: 'spanish',
      es: 'spanish',
      f: 'french',
      fr: 'french',
      i: 'italian',
      it: 'italian',
      j: 'japanese',
      ja: 'japanese',
      p: 'portuguese',
      pt: 'portuguese',
      z: 'chinese',
      zh: 'chinese',
      de: 'german',
      ko: 'korean',
      ru: 'russian',
    },
  },
};
export const GGML_TTS_ARCHITECTURES: readonly string[] = Object.keys(FAMILIES);
const DEFAULT_VOICE = 'default';
/** The shortest reference clip the native model takes (libmtmd's encoders fail on a few dozen milliseconds). */
const MIN_REFERENCE_SECONDS = 0.5;
/** The most sequences the native model takes. */
const MAX_SEQUENCES = 64;
const VOICES_DIR = 'voices';
const VENDOR_VOICE_NAMES = ['alloy', 'ash', 'ballad', 'cedar', 'coral', 'echo', 'fable', 'marin', 'nova', 'onyx', 'sage', 'shimmer', 'verse'];

// ---- locating the files ----

interface ModelFiles {
  model: string;
  mmproj: string | null;
  /** Where preset voices (reference clips) live. */
  voicesDir: string;
}

/** A backbone: a GGUF of a supported architecture. */
async function isBackbone(file: string): Promise<boolean> {
  const arch = await readGgufArchitecture(file);
  return arch !== null && GGML_TTS_ARCHITECTURES.includes(arch);
}

async function locateFiles(resolved: ResolvedModel): Promise<ModelFiles> {
  const files = await locateGgufPair(resolved, isBackbone);
  if (!files) throw new Error(`${resolved.path} holds no backbone GGUF of a supported architecture (${GGML_TTS_ARCHITECTURES.join(', ')})`);
  return { ...files, voicesDir: path.join(files.dir, VOICES_DIR) };
}

/**
 * Preset voices: every clip in `dir` the decoder reads, at `sampleRate` mono, named by its file name less the
 * extension, added to `clips` unless it already holds that name (so the directory read first wins).
 */
async function loadVoiceClips(dir: string, sampleRate: number, clips: Map<string, VoiceClip>, origin: string): Promise<void> {
  for (const name of (await readdir(dir).catch(() => [] as string[])).sort()) {
    if (name.startsWith('.')) continue;
    const id = name.replace(/\.[^.]*$/, '');
    if (!id || id.toLowerCase() === DEFAULT_VOICE || clips.has(id)) continue;
    const data = await readFile(path.join(dir, name)).catch(() => null);
    if (!data || data.length === 0) continue;
    // files that are not audio (a README, a licence) are skipped,
    const decoded = await loadNative()
      .decodeAudio(data, { sampleRate, maxSeconds: 60 })
      .catch(() => null);
    // nor are clips too short to clone a voice from
    if (decoded && decoded.samples.length >= MIN_REFERENCE_SECONDS * sampleRate) clips.set(id, { samples: decoded.samples, origin });
  }
}

/** A preset voice's reference clip and where it came from (for the voice list). */
interface VoiceClip {
  samples: Float32Array;
  origin: string;
}

// ---- the model ----

/** The API error for a native one the client caused (bad input, every sequence taken); others as they are. */
function clientError(error: unknown): unknown {
  return apiErrorFromNative(error, { codes: ['invalid_argument', 'batch_full'] });
}

class GgmlTtsModel implements TtsModel {
  readonly task = 'tts' as const;
  readonly engine = GGML_TTS_ENGINE;
  readonly sampleRate: number;
  readonly voices: readonly Voice[];
  readonly defaultVoice = DEFAULT_VOICE;
  readonly voiceAliases: Readonly<Record<string, string>>;
  readonly capabilities: TtsModel['capabilities'];
  /**
   * Two jobs: the batch session's loop and a serial (streaming) synthesis, whose frames take turns on the model's
   * executor; with one, a stream would wait for the batch to drain, which under steady load is never. Each job
   * holds one of the model's sequences (the batch, one per member), so the batch size + 1 covers both.
   */
  readonly concurrency = 2;
  readonly arch: string;
  readonly variant: string;
  private readonly family: Family;

  constructor(
    readonly id: string,
    private native: NativeTtsGgmlModel | null,
    private readonly clips: Map<string, VoiceClip>,
  ) {
    const info = native?.info() ?? { arch: '', sampleRate: 24000, variant: '' };
    this.sampleRate = info.sampleRate;
    this.arch = info.arch;
    this.variant = info.variant;
    this.family = FAMILIES[info.arch] ?? { label: info.arch, languages: {} };
    this.capabilities = { cloning: true, instructions: false, sampling: true, languages: Object.keys(this.family.languages) };
    this.voices = [
      { id: DEFAULT_VOICE, name: 'default (no reference voice)' },
      ...[...clips].map(([id, clip]) => ({ id, name: `${id} (${clip.origin} clip)` })),
    ];
    this.voiceAliases = Object.freeze(Object.fromEntries(VENDOR_VOICE_NAMES.map((name) => [name, DEFAULT_VOICE])));
  }

  async synthesize(request: SynthesisRequest, options: SynthesisOptions = {}): Promise<Float32Array> {
    const native = this.loaded();
    const nativeRequest = this.nativeRequest(request);
    return withCallbackAbort(options.signal, options.onAudio, async (flag, onAudio) => {
      try {
        return await native.synthesize(nativeRequest, onAudio, flag);
      } catch (error) {
        throw clientError(error);
      }
    });
  }

  supportsBatchSession(): boolean {
    return true;
  }

  /** Continuous batching: every request is a sequence of the model, and a step makes a frame for each. */
  createBatchSession(): TtsBatchSession {
    const batch = this.loaded().createBatch();
    return {
      add: (request) => {
        try {
          return batch.add(this.nativeRequest(request));
        } catch (error) {
          throw clientError(error);
        }
      },
      cancel: (slot) => batch.cancel(slot),
      step: async () => (await batch.step()).map((result) => ('error' in result ? { slot: result.slot, error: clientError(result.error) as Error } : result)),
      get active() {
        return batch.active;
      },
      close: async () => batch.close(),
    };
  }

  private loaded(): NativeTtsGgmlModel {
    if (!this.native) throw unloadedModelError(this.id);
    return this.native;
  }

  /** The native request for `request`, or an ApiError naming the input the model does not take. */
  private nativeRequest(request: SynthesisRequest): NativeTtsGgmlRequest {
    const { label, languages } = this.family;
    // the language was checked against `capabilities.languages` (these keys) by the speech service
    const code = request.language?.trim().toLowerCase();
    const language = (code && languages[code]) ?? null;
    if (request.speed !== undefined && request.speed !== 1) {
      throw new ApiError('invalid_request', `model ${this.id} (${label}) has no rate control; speed must be 1 (got ${request.speed})`, {
        input: 'synthesis.speed',
      });
    }
    let reference: Float32Array | null = null;
    let voiceKey: string | null = null;
    if (request.reference) {
      // worded by the engine's own names: `input` makes the error's param the request field that carried the clip
      if (request.reference.samples.length === 0) {
        throw new ApiError('invalid_audio', 'the reference clip has no samples', { input: 'synthesis.reference' });
      }
      if (request.reference.samples.length < MIN_REFERENCE_SECONDS * this.sampleRate) {
        const seconds = (request.reference.samples.length / this.sampleRate).toFixed(2);
        throw new ApiError('invalid_audio', `the reference clip is ${seconds} s long; a voice needs at least ${MIN_REFERENCE_SECONDS} s`, {
          input: 'synthesis.reference',
        });
      }
      reference = request.reference.samples;
      voiceKey = request.reference.key ?? null;
    } else if (request.voice && request.voice !== DEFAULT_VOICE) {
      reference = this.clips.get(request.voice)?.samples ?? null;
      // the model's clips stay as loaded: each is encoded once
      voiceKey = `preset:${request.voice}`;
      if (!reference) {
        throw new ApiError('invalid_request', `unknown voice '${request.voice}' for model ${this.id}; voices: ${this.voices.map((v) => v.id).join(', ')}`, {
          input: 'synthesis.voice',
        });
      }
    }
    return {
      text: request.text,
      reference,
      voiceKey,
      language,
      seed: request.seed ?? null,
      temperature: request.temperature ?? null,
      maxFrames: request.maxTokens ?? null,
    };
  }

  async dispose(): Promise<void> {
    this.native?.release(); // a synthesis in flight keeps the weights until it ends
    this.native = null;
  }
}

export interface GgmlTtsEngineOptions {
  /**
   * A directory of reference clips (`--voices-dir`) offered as preset voices by every model that clones, after the
   * model's own `voices/` folder (whose clip wins on a name clash). Null: the model's own voices only.
   */
  voicesDir?: string | null;
  /** Requests a continuous batch holds at once (--tts-max-batch-size): each model keeps a sequence for each, and one more. */
  maxBatchSize?: number;
}

/** The engine, with the server-wide options every model it loads shares. */
export function createGgmlTtsEngine(options: GgmlTtsEngineOptions = {}): Engine<TtsModel> {
  const extraVoicesDir = options.voicesDir ?? null;
  // a sequence per batch member and one for a serial synthesis, within the native model's 64
  const sequences = Math.min((options.maxBatchSize ?? 8) + 1, MAX_SEQUENCES);
  return {
    name: GGML_TTS_ENGINE,
    task: 'tts',

    async detect(p: string): Promise<boolean> {
      return (await locateGgufPair({ path: p, projector: null }, isBackbone)) !== null;
    },

    async load(resolved: ResolvedModel): Promise<TtsModel> {
      const files = await locateFiles(resolved);
      if (!files.mmproj) {
        throw new Error(
          `no mmproj found for ${files.model}: a GGML TTS model needs its mmproj GGUF (mmproj*.gguf beside the backbone, or in the hub repository)`,
        );
      }
      const native = await loadNative().TtsGgmlModel.load({ model: files.model, mmproj: files.mmproj, sequences });
      try {
        const sampleRate = native.info().sampleRate;
        const clips = new Map<string, VoiceClip>();
        await loadVoiceClips(files.voicesDir, sampleRate, clips, `${VOICES_DIR}/`);
        // every model this engine drives clones; one that did not would skip the shared clips
        if (extraVoicesDir) await loadVoiceClips(extraVoicesDir, sampleRate, clips, '--voices-dir');
        return new GgmlTtsModel(resolved.id, native, clips);
      } catch (error) {
        native.release();
        throw error;
      }
    },
  };
}

/** The engine without server-wide voices (the model's own `voices/` only). */
export const ggmlTtsEngine: Engine<TtsModel> = createGgmlTtsEngine();
