import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { ROOT } from './paths.js';

export interface WhisperTestModelOptions {
  size?: 'tiny' | 'base';
  en?: boolean;
  seed?: number;
}

interface Generator {
  makeWhisperTestModel(options: WhisperTestModelOptions): Promise<string>;
  writeWhisperTestModel(out: string, options: WhisperTestModelOptions): Promise<string>;
}

/** scripts/make-whisper-test-model.mjs, loaded from the source tree (tests run compiled from dist/test). */
export async function whisperModelGenerator(): Promise<Generator> {
  return (await import(pathToFileURL(path.join(ROOT, 'scripts', 'make-whisper-test-model.mjs')).href)) as Generator;
}

/** A cached random-weight Whisper model (generated on first use); resolves to its path. */
export async function whisperTestModel(options: WhisperTestModelOptions = {}): Promise<string> {
  return (await whisperModelGenerator()).makeWhisperTestModel(options);
}
