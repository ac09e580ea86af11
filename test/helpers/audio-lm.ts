/**
 * Audio language models for the tests and bench/stt: random-weight GGUF pairs (scripts/make-asr-test-model.mjs) and
 * llama.cpp's llama-server as the oracle, built in the addon's build tree against the addon's own llama, mtmd and
 * ggml (CMakeLists.txt), asked through its own /v1/audio/transcriptions: its greedy answer is the one the engine must
 * give. (llama-mtmd-cli prints its answer through llama.cpp's asynchronous log, which loses the end of it when the
 * process exits on a busy machine, so it cannot be the oracle.)
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { buildTreeTool } from './build-tree.js';
import { ROOT } from './paths.js';
import { freePort } from './process.js';

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

/** The instruction llama-server gives when the request names no language; the engine's too on llama.cpp's prompt. */
export const TRANSCRIBE_INSTRUCTION = 'Transcribe audio to text';

export interface LlamaServer {
  base: string;
  /** Its greedy answer to a WAV file: `tokens` tokens at most, every token's piece (as the engine's `text`). */
  transcribe(file: string | Buffer, tokens: number): Promise<string>;
  /** Its greedy chat answer to a system message and a user message of the WAV file alone (Qwen3-ASR's own layout). */
  chat(system: string, file: string, tokens: number): Promise<string>;
  close(): Promise<void>;
}

/** build/llama-server (built on first use) on the pair, with `slots` sequences of 1024 cells each and `threads` threads. */
export async function startLlamaServer(model: AudioLmTestModel, options: { slots: number; threads: number }): Promise<LlamaServer> {
  const port = await freePort();
  // the chat template as llama.cpp's own code applies it (llama_chat_apply_template), as the engine and llama-mtmd-cli
  // do: through its Jinja engine, Voxtral's template (Devstral's) prepends a default system prompt of 4000 tokens
  const args = ['-m', model.model, '--mmproj', model.mmproj, '--host', '127.0.0.1', '--port', String(port), '--no-warmup', '--no-jinja'];
  args.push('-t', String(options.threads), '-tb', String(options.threads), '-np', String(options.slots), '-c', String(1024 * options.slots));
  const server = spawn(buildTreeTool('llama-server'), args, { stdio: 'ignore' });
  const exited = new Promise((resolve) => server.once('exit', resolve));
  const base = `http://127.0.0.1:${port}`;
  const close = async (): Promise<void> => {
    if (server.exitCode === null) server.kill();
    await exited;
  };
  for (let waited = 0; ; waited += 100) {
    if ((await fetch(`${base}/health`).catch(() => null))?.status === 200) break;
    if (server.exitCode !== null || waited > 120_000) {
      await close();
      throw new Error(`llama-server did not start (exit ${server.exitCode})`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return {
    base,
    async transcribe(file, tokens) {
      const body = new FormData();
      body.append('file', new Blob([new Uint8Array(typeof file === 'string' ? fs.readFileSync(file) : file)]), 'clip.wav');
      body.append('model', 'oracle');
      body.append('temperature', '0');
      body.append('max_tokens', String(tokens));
      const response = await fetch(`${base}/v1/audio/transcriptions`, { method: 'POST', body });
      if (response.status !== 200) throw new Error(`llama-server: HTTP ${response.status} ${await response.text()}`);
      return ((await response.json()) as { text: string }).text;
    },
    async chat(system, file, tokens) {
      const audio = { type: 'input_audio', input_audio: { data: fs.readFileSync(file).toString('base64'), format: 'wav' } };
      const messages = [
        { role: 'system', content: system },
        { role: 'user', content: [audio] },
      ];
      const body = JSON.stringify({ messages, temperature: 0, max_tokens: tokens });
      const response = await fetch(`${base}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
      if (response.status !== 200) throw new Error(`llama-server: HTTP ${response.status} ${await response.text()}`);
      return ((await response.json()) as { choices: { message: { content: string } }[] }).choices[0]?.message.content ?? '';
    },
    close,
  };
}
