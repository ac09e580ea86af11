/**
 * Text-to-speech for POST /v1/audio/speech and GET /v1/audio/voices: leases the model, checks the request against
 * what the model declares it can do (docs/api.md), loads a reference clip, splits the input at sentence
 * boundaries, has the Synthesizer speak the pieces by the model's path, and encodes the audio, whole or as one
 * continuously encoded stream.
 */
import type { SynthesisRequest, TtsModel, Voice } from '../../engines/types.js';
import { ApiError } from '../../errors.js';
import { contentTypeOf, createEncoder, encodeAudio, fileExtensionOf, type AudioEncoderStream, type AudioFormat } from '../audio/encode.js';
import { concatSamples } from '../../engines/samples.js';
import { callbackStream } from '../callback-stream.js';
import type { ModelLease, ModelRegistry } from '../registry.js';
import type { CustomVoice, CustomVoices, NewVoiceFields } from './custom-voices.js';
import { loadReferenceAudio } from './reference.js';
import { splitSentences } from './sentences.js';
import type { Synthesizer } from './synthesizer.js';

/** A speech request, as validated from the client's fields. */
export interface SpeechRequest {
  model: string;
  input: string;
  /** A voice of the model's, a vendor voice name it maps, or null for its default. */
  voice: string | null;
  speed: number;
  /** `lang_code`. */
  language: string;
  format: AudioFormat;
  temperature: number | null;
  maxTokens: number | null;
  seed: number | null;
  /** `ref_audio`: a server-side path or a base64 `data:` URL. */
  referenceAudio: string | null;
  referenceText: string | null;
  /** Style instructions, and the field they came in (`instructions`, or `instruct`). */
  instructions: { text: string; field: string } | null;
}

/** A speech request for `input` with the API's defaults (the model's default voice, speed 1, `lang_code` a, pcm), `fields` over them. */
export function speechRequest(model: string, input: string, fields: Partial<SpeechRequest> = {}): SpeechRequest {
  return {
    model,
    input,
    voice: null,
    speed: 1,
    language: 'a',
    format: 'pcm',
    temperature: null,
    maxTokens: null,
    seed: null,
    referenceAudio: null,
    referenceText: null,
    instructions: null,
    ...fields,
  };
}

export interface SpeechLimits {
  /** --max-input-chars. */
  maxInputChars: number;
  /** --max-audio-seconds: the longest reference clip. */
  maxAudioSeconds: number;
  /** --max-upload-mb in bytes: the largest reference file. */
  maxUploadBytes: number;
  /** --models-dir: the roots reference paths must lie under. */
  modelsDirs: string[];
}

/** The engine's request (all but the text), and the fields left out because the model cannot honour them. */
export interface SynthesisPlan {
  request: Omit<SynthesisRequest, 'text'>;
  /** Request fields the model ignores. */
  ignored: string[];
}

/** The model's own voice for `voice` (an ID or name of its voices, or a vendor name it maps), or null. */
function ownVoice(model: TtsModel, voice: string): string | null {
  const wanted = voice.toLowerCase();
  const own = model.voices.find((v) => v.id.toLowerCase() === wanted || v.name.toLowerCase() === wanted);
  if (own) return own.id;
  // own keys only: `__proto__` or `constructor` must not find Object.prototype's members
  return (model.voiceAliases && Object.hasOwn(model.voiceAliases, wanted) ? model.voiceAliases[wanted] : undefined) ?? null;
}

/** The model's voice for the request's `voice`: an ID or name of the model's, a vendor name it maps, or a combination of its voices. */
function resolveVoice(model: TtsModel, voice: string | null): string {
  if (!voice) return model.defaultVoice;
  const own = ownVoice(model, voice);
  if (own) return own;
  const combined = model.combineVoices?.(voice);
  if (combined) return combined;
  const offered = [...model.voices.map((v) => v.id), ...Object.keys(model.voiceAliases ?? {})].join(', ');
  throw new ApiError('invalid_request', `unknown voice '${voice}' for model ${model.id}; voices: ${offered}`, { param: 'voice' });
}

/**
 * Checks a request against the model's declared capabilities: the one place language, cloning and instructions
 * are decided. Fields that change what is said or who says it (language, voice, a reference) are refused when the
 * model cannot honour them; style instructions are only a wish, so a model without style control speaks anyway
 * and the plan names them as ignored (vendor clients send them by default). Sampling settings reach only engines
 * that sample.
 */
export function planSynthesis(model: TtsModel, speech: Omit<SpeechRequest, 'input' | 'format'>): SynthesisPlan {
  const { capabilities } = model;
  const language = speech.language.toLowerCase();
  if (capabilities.languages && !capabilities.languages.includes(language)) {
    throw new ApiError('invalid_request', `model ${model.id} does not speak lang_code '${speech.language}'; it takes ${capabilities.languages.join(', ')}`, {
      param: 'lang_code',
    });
  }
  if ((speech.referenceAudio || speech.referenceText) && !capabilities.cloning) {
    throw new ApiError('invalid_request', `model ${model.id} cannot clone a voice from ref_audio`, { param: speech.referenceAudio ? 'ref_audio' : 'ref_text' });
  }
  const request: Omit<SynthesisRequest, 'text'> = { voice: resolveVoice(model, speech.voice), speed: speech.speed, language };
  const ignored: string[] = [];
  if (speech.instructions && capabilities.instructions) request.instructions = speech.instructions.text;
  else if (speech.instructions) ignored.push(speech.instructions.field);
  if (capabilities.sampling && speech.temperature !== null) request.temperature = speech.temperature;
  if (capabilities.sampling && speech.maxTokens !== null) request.maxTokens = speech.maxTokens;
  if (capabilities.sampling && speech.seed !== null) request.seed = speech.seed;
  return { request, ignored };
}

export interface SpeechServiceOptions {
  registry: ModelRegistry;
  synthesizer: Synthesizer;
  limits: SpeechLimits;
  /** The voices clients created (POST /v1/audio/voices). */
  customVoices: CustomVoices;
}

export class SpeechService {
  constructor(private readonly options: SpeechServiceOptions) {}

  /**
   * The voices of a TTS model, and what it can do beyond them (cloning, instructions, the languages to choose from).
   * `signal`: the client's (see `acquire`).
   */
  async voices(
    modelId: string,
    signal: AbortSignal,
  ): Promise<{
    voices: readonly Voice[];
    custom: CustomVoice[];
    cloning: boolean;
    instructions: boolean;
    languages: { code: string; name: string }[] | null;
  }> {
    using lease = await this.options.registry.acquire<TtsModel>(modelId, 'tts', signal);
    const { cloning, instructions } = lease.model.capabilities;
    const names = lease.model.languageNames;
    const languages = names ? Object.entries(names).map(([code, name]) => ({ code, name })) : null;
    // a model that clones speaks the custom voices too
    const custom = cloning ? await this.options.customVoices.voices() : [];
    return { voices: lease.model.voices, custom, cloning, instructions, languages };
  }

  /**
   * A speech request ready to speak: input split, model leased and checked, reference clip loaded (4xx errors come
   * from here, before any answer begins). It holds the model until disposed: `using speech = await ...`.
   */
  async prepare(speech: SpeechRequest, signal: AbortSignal): Promise<PreparedSpeech> {
    const { limits } = this.options;
    const pieces = splitSentences(speech.input);
    if (pieces.length === 0) throw new ApiError('invalid_request', 'input is empty: there is no text to speak', { param: 'input' });
    if (speech.input.length > limits.maxInputChars) {
      throw new ApiError('invalid_request', `input is ${speech.input.length} characters; the limit is ${limits.maxInputChars} (--max-input-chars)`, {
        param: 'input',
      });
    }
    const lease = await this.options.registry.acquire<TtsModel>(speech.model, 'tts', signal);
    try {
      const model = lease.model;
      const custom = await this.customVoice(model, speech);
      const { request, ignored } = planSynthesis(model, custom ? { ...speech, voice: null } : speech);
      if (custom) {
        const samples = await this.options.customVoices.sample(custom, model.sampleRate, signal);
        // the voice's ID names its sample for good (IDs are never reused): the model encodes it once
        request.reference = { samples, key: custom.id, ...(custom.ref_text ? { text: custom.ref_text } : {}) };
      } else if (speech.referenceAudio) {
        const samples = await loadReferenceAudio(speech.referenceAudio, {
          sampleRate: model.sampleRate,
          roots: limits.modelsDirs,
          maxSeconds: limits.maxAudioSeconds,
          maxBytes: limits.maxUploadBytes,
          signal,
        });
        request.reference = speech.referenceText ? { samples, text: speech.referenceText } : { samples };
      }
      const requests = pieces.map((text) => ({ ...request, text }));
      return new PreparedSpeech(this.options.synthesizer, lease, requests, speech.format, ignored, signal);
    } catch (error) {
      lease.release();
      throw error;
    }
  }

  /**
   * A new custom voice (POST /v1/audio/voices). With `model` (voxd's extension), which must clone, the model encodes
   * the voice at once, by speaking one frame with it through the usual path, so its first request costs what later
   * ones do; a voice the model cannot encode is not kept.
   */
  async createVoice(fields: NewVoiceFields, model: string | null, signal: AbortSignal): Promise<CustomVoice> {
    const { customVoices } = this.options;
    if (!model) return customVoices.create(fields, signal);
    // the model is checked before anything is written
    using lease = await this.options.registry.acquire<TtsModel>(model, 'tts', signal);
    if (!lease.model.capabilities.cloning) {
      throw new ApiError('invalid_request', `model ${model} cannot clone voices, so it cannot encode one; use a model that does (Pocket TTS, Qwen3-TTS base)`, {
        param: 'model',
      });
    }
    const voice = await customVoices.create(fields, signal);
    try {
      using prepared = await this.prepare(speechRequest(model, 'Hello.', { voice: voice.id, language: 'en', maxTokens: 1 }), signal);
      await prepared.whole();
    } catch (error) {
      // not kept half-made: the client sees the failure and may send the voice again (the deletion runs to its end)
      await customVoices.deleteVoice(voice.id, new AbortController().signal);
      throw error;
    }
    return voice;
  }

  /** The custom voice a request names (by ID or name; the model's own voices come first), checked against the model. */
  private async customVoice(model: TtsModel, speech: SpeechRequest): Promise<CustomVoice | null> {
    if (!speech.voice || ownVoice(model, speech.voice)) return null;
    const custom = await this.options.customVoices.find(speech.voice);
    if (!custom) return null;
    if (!model.capabilities.cloning) {
      throw new ApiError(
        'invalid_request',
        `voice '${custom.name}' (${custom.id}) is a custom voice, and model ${model.id} cannot clone voices; use a model that does (Pocket TTS, Qwen3-TTS base)`,
        { param: 'voice' },
      );
    }
    if (speech.referenceAudio) {
      throw new ApiError('invalid_request', `ref_audio and the custom voice '${custom.name}' both give the voice; send one`, { param: 'ref_audio' });
    }
    return custom;
  }
}

/** A prepared speech request (SpeechService.prepare); speak it once, whole or streamed. */
export class PreparedSpeech implements Disposable {
  readonly contentType: string;
  readonly fileExtension: string;

  constructor(
    private readonly synthesizer: Synthesizer,
    private readonly lease: ModelLease<TtsModel>,
    private readonly requests: SynthesisRequest[],
    private readonly format: AudioFormat,
    /** Request fields the model cannot honour and speaks without. */
    readonly ignored: readonly string[],
    private readonly signal: AbortSignal,
  ) {
    this.contentType = contentTypeOf(format);
    this.fileExtension = fileExtensionOf(format);
  }

  get modelId(): string {
    return this.lease.model.id;
  }

  /** The rate of the audio it speaks (its PCM is 16-bit mono at this rate). */
  get sampleRate(): number {
    return this.lease.model.sampleRate;
  }

  /** The whole file: every piece through the model's batching path, encoded at once. */
  async whole(): Promise<Buffer> {
    const model = this.lease.model;
    const audio = await this.synthesizer.speak(model, this.requests, { signal: this.signal });
    return encodeAudio(concatSamples(audio), { format: this.format, sampleRate: model.sampleRate });
  }

  /**
   * One continuously encoded file, in chunks: the pieces are spoken in order, and a chunk is encoded once
   * `intervalSeconds` of audio are pending, and after the first piece, so playback starts as early as possible.
   */
  stream(intervalSeconds: number): AsyncGenerator<Buffer> {
    // made now, so a format this server's FFmpeg lacks is refused before the answer begins
    const encoder = createEncoder({ format: this.format, sampleRate: this.lease.model.sampleRate, streaming: true });
    return this.encodeSpoken(encoder, intervalSeconds);
  }

  private async *encodeSpoken(encoder: AudioEncoderStream, intervalSeconds: number): AsyncGenerator<Buffer> {
    const model = this.lease.model;
    const chunkSamples = Math.max(1, Math.round(intervalSeconds * model.sampleRate));
    let pending: Float32Array[] = [];
    let pendingSamples = 0;
    const encodePending = (): Promise<Buffer> => {
      const samples = concatSamples(pending);
      pending = [];
      pendingSamples = 0;
      return encoder.write(samples);
    };
    const spoken = callbackStream<Float32Array | 'first piece spoken', Float32Array[]>((emit) =>
      this.synthesizer.speak(model, this.requests, {
        signal: this.signal,
        onAudio: emit,
        onPieceEnd: (index) => index === 0 && emit('first piece spoken'),
      }),
    );
    for await (const event of spoken) {
      if (event instanceof Float32Array) {
        pending.push(event);
        pendingSamples += event.length;
      }
      if (pendingSamples > 0 && (pendingSamples >= chunkSamples || event === 'first piece spoken')) yield await encodePending();
    }
    if (pendingSamples > 0) yield await encodePending();
    yield await encoder.end();
  }

  [Symbol.dispose](): void {
    this.lease.release();
  }
}
