/**
 * Custom voices and the consents they name, kept on disk (docs/api.md, "Custom voices"): each record is a JSON file
 * with its audio beside it as a 24 kHz float WAV, both written under a temporary name and renamed into place (audio
 * first, so a record never names audio that is not there). Creating, renaming and deleting take a lock file in the
 * directory, so instances that share it (as they share the hub cache) never give two voices one name or pass
 * --max-voices together.
 */
import { randomBytes } from 'node:crypto';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { ApiError } from '../../errors.js';
import { replaceAtomically } from '../atomic-file.js';
import { decodeAudio } from '../audio/decode.js';
import { encodeFloatWav } from '../audio/wav.js';
import { acquireFileLock, isNotFound } from '../file-lock.js';

/** The vendor's limits on a voice sample and a consent recording. */
export const MAX_SAMPLE_BYTES = 10 * 1024 * 1024;
export const MIN_SAMPLE_SECONDS = 2;
export const MAX_SAMPLE_SECONDS = 30;
/** The rate samples are kept at: the rate of the models that clone. */
const STORED_RATE = 24000;
const MAX_NAME_CHARS = 64;

export interface CustomVoice {
  id: string;
  object: 'audio.voice';
  name: string;
  created_at: number;
  type: 'audio_sample';
  /** The consent it names; null where the server requires none. */
  consent: string | null;
  /** What the sample says (voxd's `ref_text`), or null. */
  ref_text: string | null;
}

export interface VoiceConsent {
  id: string;
  object: 'audio.voice_consent';
  name: string;
  language: string;
  created_at: number;
}

type Kind = 'voice' | 'consent';
const PREFIX: Record<Kind, string> = { voice: 'voice_', consent: 'cons_' };
const FOLDER: Record<Kind, string> = { voice: 'voices', consent: 'consents' };
const ID = { voice: /^voice_[0-9a-f]{24}$/, consent: /^cons_[0-9a-f]{24}$/ } as const;

export interface CustomVoiceOptions {
  /** Where voices and consents live (--custom-voices-dir). */
  root: string;
  /** --max-voices. */
  maxVoices: number;
  /** --require-voice-consent: a voice names a consent that exists. */
  requireConsent: boolean;
}

/** What POST /v1/audio/voices gives for a new voice. */
export interface NewVoiceFields {
  name: string;
  sample: Buffer;
  consent: string | null;
  refText: string | null;
}

export class CustomVoices {
  constructor(private readonly options: CustomVoiceOptions) {}

  /** A new voice from an uploaded sample (any audio format, 2 to 30 s). */
  async create(fields: NewVoiceFields, signal: AbortSignal): Promise<CustomVoice> {
    const name = checkName(fields.name);
    if (this.options.requireConsent && !fields.consent) {
      throw new ApiError('invalid_request', 'a voice needs the consent of its speaker: create one at /v1/audio/voice_consents and name it in consent', {
        param: 'consent',
      });
    }
    if (fields.consent) checkId('consent', fields.consent, 'consent');
    const samples = await decodeSample(fields.sample, 'audio_sample', signal);
    return this.locked(signal, async () => {
      if (fields.consent && !(await this.read('consent', fields.consent))) {
        throw new ApiError('invalid_request', `no voice consent ${fields.consent}`, { param: 'consent' });
      }
      const voices = await this.list('voice');
      if (voices.some((v) => v.name === name)) throw new ApiError('invalid_request', `a voice named '${name}' exists`, { param: 'name' });
      if (voices.length >= this.options.maxVoices) {
        throw new ApiError('invalid_request', `this server keeps at most ${this.options.maxVoices} voices (--max-voices); delete one first`, {
          param: 'name',
        });
      }
      const voice: CustomVoice = {
        id: newId('voice'),
        object: 'audio.voice',
        name,
        created_at: now(),
        type: 'audio_sample',
        consent: fields.consent,
        ref_text: fields.refText?.trim() || null,
      };
      await this.write('voice', voice, samples);
      return voice;
    });
  }

  /** Every voice, oldest first. */
  voices(): Promise<CustomVoice[]> {
    return this.list('voice');
  }

  /** The voice with this ID; a 404 when there is none, a 400 for an ID of another form. */
  async voice(id: string): Promise<CustomVoice> {
    checkId('voice', id, 'voice_id');
    return (await this.read('voice', id)) ?? notFound('voice', id);
  }

  /** The voice a speech request names by its ID or its name, or null when none has it. */
  async find(voice: string): Promise<CustomVoice | null> {
    if (ID.voice.test(voice)) return this.read('voice', voice);
    return (await this.list('voice')).find((v) => v.name === voice) ?? null;
  }

  /** A voice's sample, decoded at `sampleRate`. */
  async sample(voice: CustomVoice, sampleRate: number, signal?: AbortSignal): Promise<Float32Array> {
    const wav = await fsp.readFile(this.audioPath('voice', voice.id)).catch((error: unknown) => {
      if (isNotFound(error)) notFound('voice', voice.id);
      throw error;
    });
    return (await decodeAudio(wav, { sampleRate, maxSeconds: MAX_SAMPLE_SECONDS + 1, ...(signal ? { signal } : {}) })).samples;
  }

  async deleteVoice(id: string, signal: AbortSignal): Promise<{ id: string; object: 'audio.voice.deleted'; deleted: true }> {
    checkId('voice', id, 'voice_id');
    await this.locked(signal, () => this.remove('voice', id));
    return { id, object: 'audio.voice.deleted', deleted: true };
  }

  /** A new consent: its speaker's recording saying they agree, in `language` (BCP 47). */
  async createConsent(fields: { name: string; language: string; recording: Buffer }, signal: AbortSignal): Promise<VoiceConsent> {
    const name = checkName(fields.name);
    const language = fields.language.trim();
    if (!/^[A-Za-z]{2,3}(-[A-Za-z0-9]{2,8})*$/.test(language)) {
      throw new ApiError('invalid_request', `language '${fields.language}' is not a BCP 47 tag such as en-US`, { param: 'language' });
    }
    const samples = await decodeSample(fields.recording, 'recording', signal);
    const consent: VoiceConsent = { id: newId('consent'), object: 'audio.voice_consent', name, language, created_at: now() };
    await this.locked(signal, () => this.write('consent', consent, samples));
    return consent;
  }

  /** A page of consents, oldest first, after the consent `after` (the vendor's cursor). */
  async consents(
    after: string | null,
    limit: number,
  ): Promise<{ object: 'list'; data: VoiceConsent[]; has_more: boolean; first_id: string | null; last_id: string | null }> {
    const all = await this.list('consent');
    const from = after === null ? 0 : all.findIndex((c) => c.id === after) + 1;
    if (after !== null && from === 0) throw new ApiError('invalid_request', `no voice consent ${after}`, { param: 'after' });
    const data = all.slice(from, from + limit);
    return { object: 'list', data, has_more: from + limit < all.length, first_id: data[0]?.id ?? null, last_id: data.at(-1)?.id ?? null };
  }

  async consent(id: string): Promise<VoiceConsent> {
    checkId('consent', id, 'consent_id');
    return (await this.read('consent', id)) ?? notFound('consent', id);
  }

  async renameConsent(id: string, name: string, signal: AbortSignal): Promise<VoiceConsent> {
    checkId('consent', id, 'consent_id');
    const renamed = checkName(name);
    return this.locked(signal, async () => {
      const consent = (await this.read('consent', id)) ?? notFound('consent', id);
      const updated = { ...consent, name: renamed };
      await replaceAtomically(this.recordPath('consent', id), (temporary) => fsp.writeFile(temporary, JSON.stringify(updated)));
      return updated;
    });
  }

  async deleteConsent(id: string, signal: AbortSignal): Promise<{ id: string; object: 'audio.voice_consent'; deleted: true }> {
    checkId('consent', id, 'consent_id');
    await this.locked(signal, () => this.remove('consent', id));
    return { id, object: 'audio.voice_consent', deleted: true };
  }

  private recordPath(kind: Kind, id: string): string {
    return path.join(this.options.root, FOLDER[kind], `${id}.json`);
  }

  private audioPath(kind: Kind, id: string): string {
    return path.join(this.options.root, FOLDER[kind], `${id}.wav`);
  }

  /** The audio first, then the record that names it. */
  private async write(kind: Kind, record: CustomVoice | VoiceConsent, samples: Float32Array): Promise<void> {
    await replaceAtomically(this.audioPath(kind, record.id), (temporary) => fsp.writeFile(temporary, encodeFloatWav([samples], STORED_RATE)));
    await replaceAtomically(this.recordPath(kind, record.id), (temporary) => fsp.writeFile(temporary, JSON.stringify(record)));
  }

  /** The record first (readers then stop finding it), then its audio. */
  private async remove(kind: Kind, id: string): Promise<void> {
    await fsp.rm(this.recordPath(kind, id)).catch((error: unknown) => {
      if (isNotFound(error)) notFound(kind, id);
      throw error;
    });
    await fsp.rm(this.audioPath(kind, id), { force: true });
  }

  private async read<K extends Kind>(kind: K, id: string): Promise<(K extends 'voice' ? CustomVoice : VoiceConsent) | null> {
    try {
      return JSON.parse(await fsp.readFile(this.recordPath(kind, id), 'utf8')) as K extends 'voice' ? CustomVoice : VoiceConsent;
    } catch (error) {
      if (isNotFound(error)) return null;
      throw error;
    }
  }

  private async list<K extends Kind>(kind: K): Promise<(K extends 'voice' ? CustomVoice : VoiceConsent)[]> {
    const names = await fsp.readdir(path.join(this.options.root, FOLDER[kind])).catch((error: unknown) => {
      if (isNotFound(error)) return [];
      throw error;
    });
    const ids = names
      .filter((n) => n.endsWith('.json'))
      .map((n) => n.slice(0, -'.json'.length))
      .filter((id) => ID[kind].test(id));
    const records = await Promise.all(ids.map((id) => this.read(kind, id)));
    // oldest first: created_at counts seconds, the ID's time milliseconds
    return records.filter((r) => r !== null).sort((a, b) => a.id.slice(PREFIX[kind].length).localeCompare(b.id.slice(PREFIX[kind].length)));
  }

  /** `work` under the directory's lock, shared with every instance that uses the directory. */
  private async locked<T>(signal: AbortSignal, work: () => Promise<T>): Promise<T> {
    await fsp.mkdir(this.options.root, { recursive: true });
    const lock = await acquireFileLock(path.join(this.options.root, '.lock'), { signal });
    try {
      return await work();
    } finally {
      await lock?.release();
    }
  }
}

/** The prefix, then the creation time in milliseconds and 6 random bytes (24 hex digits): IDs sort as they were made. */
function newId(kind: Kind): string {
  return PREFIX[kind] + Date.now().toString(16).padStart(12, '0') + randomBytes(6).toString('hex');
}

function now(): number {
  return Math.floor(Date.now() / 1000);
}

function checkName(name: string): string {
  const trimmed = name.trim();
  if (!trimmed || trimmed.length > MAX_NAME_CHARS) {
    throw new ApiError('invalid_request', `a name has 1 to ${MAX_NAME_CHARS} characters`, { param: 'name' });
  }
  return trimmed;
}

function checkId(kind: Kind, id: string, param: string): void {
  if (!ID[kind].test(id)) throw new ApiError('invalid_request', `'${id}' is not a ${kind} ID (${PREFIX[kind]} and 24 hex digits)`, { param });
}

function notFound(kind: Kind, id: string): never {
  throw new ApiError('not_found', `no ${kind === 'voice' ? 'voice' : 'voice consent'} ${id}`);
}

/** An uploaded clip decoded at the stored rate, 2 to 30 s long. */
async function decodeSample(bytes: Buffer, param: string, signal: AbortSignal): Promise<Float32Array> {
  const audio = await decodeAudio(bytes, { sampleRate: STORED_RATE, maxSeconds: MAX_SAMPLE_SECONDS, signal }).catch((error: unknown) => {
    if (error instanceof ApiError && error.code === 'invalid_audio') throw new ApiError('invalid_audio', `${param}: ${error.message}`, { param });
    throw error;
  });
  if (audio.duration < MIN_SAMPLE_SECONDS) {
    throw new ApiError('invalid_audio', `${param} lasts ${audio.duration.toFixed(2)} s; it must last ${MIN_SAMPLE_SECONDS} to ${MAX_SAMPLE_SECONDS} s`, {
      param,
    });
  }
  return audio.samples;
}
