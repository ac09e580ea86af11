/** Helpers of the GGML TTS suites (test/server/tts-ggml*.test.ts): the random-weight test models, and speech requests. */
import assert from 'node:assert/strict';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { AudioFormat } from '../../src/services/audio/encode.js';
import { decodeAudio } from '../../src/services/audio/decode.js';
import { ROOT } from './paths.js';

/** The rate both families speak at. */
export const RATE = 24000;
/** Samples per frame: both families make 12.5 frames per second. */
export const FRAME = 1920;

export interface TtsModelPaths {
  dir: string;
  model: string;
  mmproj: string;
}

export async function makeTiny(arch: 'pockettts' | 'qwen3tts' = 'pockettts'): Promise<TtsModelPaths> {
  const generator = (await import(pathToFileURL(path.join(ROOT, 'scripts', 'make-tts-test-model.mjs')).href)) as {
    makeTtsTestModel(options: { arch: string; size: 'tiny' }): Promise<TtsModelPaths>;
  };
  return generator.makeTtsTestModel({ arch, size: 'tiny' });
}

export function post(base: string, body: unknown, signal?: AbortSignal): Promise<Response> {
  return fetch(`${base}/v1/audio/speech`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
    ...(signal ? { signal } : {}),
  });
}

export async function pcmOf(base: string, body: Record<string, unknown>): Promise<Buffer> {
  const response = await post(base, { response_format: 'pcm', ...body });
  assert.equal(response.status, 200, await response.clone().text());
  return Buffer.from(await response.arrayBuffer());
}

/** What a 24 kHz stream declares per format (Ogg Opus decodes at 48 kHz). */
const RATES: Record<Exclude<AudioFormat, 'pcm'>, number> = { mp3: 24000, wav: 24000, flac: 24000, ogg: 24000, opus: 48000, aac: 24000 };

export async function durationOf(body: Buffer, format: AudioFormat): Promise<number> {
  if (format === 'pcm') return body.length / 2 / RATE;
  const audio = await decodeAudio(body, { sampleRate: RATE });
  assert.equal(audio.sourceSampleRate, RATES[format], `${format}: the rate the file declares`);
  return audio.duration;
}
