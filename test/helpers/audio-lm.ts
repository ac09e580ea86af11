/**
 * Audio language models for the tests: random-weight GGUF pairs (scripts/make-asr-test-model.mjs) and llama.cpp's
 * llama-mtmd-cli as the oracle, built in the addon's build tree against the addon's own llama, mtmd and ggml
 * (CMakeLists.txt), so its greedy answer is the one the engine must give.
 */
import { execFile } from 'node:child_process';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { buildTreeTool } from './build-tree.js';
import { ROOT } from './paths.js';

export interface AudioLmTestModelOptions {
  arch?: 'qwen3asr' | 'voxtral';
  size?: 'tiny' | 'realistic';
  seed?: number;
}

export interface AudioLmTestModel {
  dir: string;
  model: string;
  mmproj: string;
}

interface Generator {
  makeAsrTestModel(options: AudioLmTestModelOptions): Promise<AudioLmTestModel>;
}

/** A cached random-weight pair (generated on first use). */
export async function audioLmTestModel(options: AudioLmTestModelOptions = {}): Promise<AudioLmTestModel> {
  const script = pathToFileURL(path.join(ROOT, 'scripts', 'make-asr-test-model.mjs')).href;
  return ((await import(script)) as Generator).makeAsrTestModel(options);
}

/** The instruction the engine gives when the request names no language (llama.cpp's server's, too). */
export const TRANSCRIBE_INSTRUCTION = 'Transcribe audio to text';

/**
 * llama-mtmd-cli's greedy answer to the engine's prompt (the instruction, then the audio, in the model's chat
 * template) on a 16 kHz WAV: the text it prints, every token's piece (control tokens' included), up to `tokens`
 * tokens or the end of generation.
 */
export async function runMtmdCli(model: AudioLmTestModel, wav: string, options: { tokens: number; threads: number; instruction?: string }): Promise<string> {
  const cli = buildTreeTool('llama-mtmd-cli');
  const args = ['-m', model.model, '--mmproj', model.mmproj, '--audio', wav];
  // the marker after the instruction: the engine's layout (the CLI puts it first when the prompt has none)
  args.push('-p', `${options.instruction ?? TRANSCRIBE_INSTRUCTION}<__media__>`, '--temp', '0', '-n', String(options.tokens));
  args.push('-t', String(options.threads), '--no-warmup');
  const { stdout } = await promisify(execFile)(cli, args, { maxBuffer: 64 * 1024 * 1024, env: { ...process.env, OMP_WAIT_POLICY: 'passive' } });
  // the answer is printed between a newline before it and the newlines after it (its logs go to stderr)
  return stdout.replace(/^\n/, '').replace(/\n+$/, '');
}
