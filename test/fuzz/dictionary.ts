/**
 * Values that mean something to voxd, for the targets that talk to a server: model IDs of every kind the registry
 * tells apart, languages, and the names of things (voices, formats). Mutations draw on them so that inputs reach
 * past the first validation more often than random text would.
 */
import type { Rng } from './random.js';

/**
 * Built-in models, vendor aliases, hub IDs (the fuzz server's hub is out of reach), local paths (special files
 * among them: a model ID that names an existing path is read as a model file) and IDs that name nothing.
 */
export const MODEL_IDS: readonly string[] = [
  'sphinx',
  'flite',
  'spectral',
  'whisper-1',
  'gpt-4o-transcribe',
  'gpt-4o-mini-transcribe',
  'tts-1',
  'tts-1-hd',
  'gpt-4o-mini-tts',
  'ggml-org/whisper-vad/ggml-silero-v6.2.0.bin',
  'ggerganov/whisper.cpp/ggml-base.en.bin',
  'owner/repo',
  'owner/repo:Q4_K_M',
  'owner/repo/sub/dir/model.gguf',
  'a/b:c:d',
  'owner/../repo',
  '../../../etc/passwd',
  '/etc/passwd',
  '/etc',
  '/',
  '.',
  '..',
  'dist',
  '/dev/null',
  '/dev/zero',
  '/dev/urandom',
  '/dev/stdin',
  '/proc/self/fd/0',
  '/proc/self/fd/1',
  '/proc/self/fd/2',
  '/proc/self/environ',
  '/proc/self/mem',
  '"sphinx"',
  "'flite'",
  'SPHINX',
  ' sphinx ',
  'sphinx\u0000',
  '__proto__',
  'constructor',
  'hasOwnProperty',
  '',
  'x'.repeat(1025),
  'owner/' + 'r'.repeat(97),
  'a/'.repeat(300),
];

export const LANGUAGES: readonly string[] = ['en', 'EN', 'english', 'English', 'en-US', 'fr', 'zh', 'xx', 'auto', '', ' ', 'e\u0301n'];

export const VOICES: readonly string[] = ['alloy', 'ash', 'ballad', 'cedar', 'slt', 'kal', 'awb', 'rms', 'SLT', 'default', 'nobody', ''];

/** A model ID: mostly from MODEL_IDS, sometimes percent-encoded or with a character flipped. */
export function modelId(rng: Rng): string {
  const id = rng.pick(MODEL_IDS);
  if (rng.chance(0.85)) return id;
  const at = rng.below(id.length + 1);
  return id.slice(0, at) + rng.pick(['%', '%00', '%2F', '/', ':', '..', '\\', ' ', '\u00e9', '?', '#']) + id.slice(at + 1);
}
