/**
 * Text-to-speech benchmark (`npm run bench:tts`): ratios measured side by side in one run on this machine.
 *  1. streaming time to first byte of a five-sentence input vs the time to synthesise its first sentence alone
 *     (both over HTTP, A/B interleaved; target ≤ 1.2x);
 *  2. encoder throughput per format: seconds of audio encoded per second (in-process FFmpeg encoders);
 *  3. 4 concurrent requests on the built-in voice vs the same 4 in series.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { pino } from 'pino';
import { resolveConfig } from '../src/config.js';
import { AUDIO_FORMATS, encodeAudio } from '../src/services/audio/encode.js';
import { decodeAudio } from '../src/services/audio/decode.js';
import { startServer } from '../src/server.js';
import { median, timed } from './stats.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const JFK_WAV = path.join(root, '..', 'shared', 'audio', 'speech', 'jfk.wav');
const FIRST = 'The quick brown fox jumps over the lazy dog.';
const FIVE_SENTENCES = `${FIRST} A second sentence follows the first one. Here is a third sentence with a few more words. The fourth sentence is short. And this is the fifth and final sentence.`;

const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'voxd-bench-tts-'));
const config = resolveConfig({ host: '127.0.0.1', port: 0, logDir: path.join(scratch, 'logs') }, {});
const server = await startServer(config, pino({ level: 'silent' }), { HF_ENDPOINT: 'http://127.0.0.1:9', HF_HUB_CACHE: path.join(scratch, 'hub') });
const speech = (body: Record<string, unknown>): Promise<Response> =>
  fetch(`http://127.0.0.1:${server.port}/v1/audio/speech`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'tts-1', response_format: 'wav', ...body }),
  });

async function firstByteMs(): Promise<number> {
  const start = performance.now();
  const response = await speech({ input: FIVE_SENTENCES, stream: true });
  const reader = (response.body as ReadableStream<Uint8Array>).getReader();
  await reader.read();
  const elapsed = performance.now() - start;
  while (!(await reader.read()).done);
  return elapsed;
}

async function benchFirstByte(runs: number): Promise<void> {
  const streamed: number[] = [];
  const alone: number[] = [];
  await firstByteMs(); // load and warm up
  for (let i = 0; i < runs; i++) {
    streamed.push(await firstByteMs());
    alone.push(await timed(async () => (await speech({ input: FIRST })).arrayBuffer()));
  }
  const a = median(streamed);
  const b = median(alone);
  console.log(`streaming first byte (5 sentences) ${a.toFixed(1)} ms vs first sentence alone ${b.toFixed(1)} ms -> ${(a / b).toFixed(2)}x (target <= 1.2x)`);
}

async function benchEncoders(): Promise<void> {
  const { samples } = await decodeAudio(fs.readFileSync(JFK_WAV), { sampleRate: 16000 });
  const minute = new Float32Array(samples.length * 6); // 66 s of speech
  for (let i = 0; i < 6; i++) minute.set(samples, i * samples.length);
  const seconds = minute.length / 16000;
  const rows: string[] = [];
  for (const format of AUDIO_FORMATS) {
    await encodeAudio(minute, { format, sampleRate: 16000 }); // warm up
    const runs: number[] = [];
    for (let i = 0; i < 3; i++) runs.push(await timed(() => encodeAudio(minute, { format, sampleRate: 16000 })));
    const ms = median(runs);
    rows.push(`${format} ${(seconds / (ms / 1000)).toFixed(0)}x`);
  }
  console.log(`encoding ${seconds.toFixed(0)} s of 16 kHz speech, seconds of audio per second: ${rows.join(', ')}`);
}

async function benchConcurrency(requests: number): Promise<void> {
  const input = 'This sentence is spoken by the built-in voice, several times at once. And then once more.';
  const one = async (): Promise<unknown> => (await speech({ input, response_format: 'mp3' })).arrayBuffer();
  await one();
  const serial = await timed(async () => {
    for (let i = 0; i < requests; i++) await one();
  });
  const concurrent = await timed(() => Promise.all(Array.from({ length: requests }, one)));
  console.log(
    `built-in voice (flite), ${requests} in series ${(serial / 1000).toFixed(2)} s, ${requests} concurrent ${(concurrent / 1000).toFixed(2)} s -> ${(serial / concurrent).toFixed(2)}x`,
  );
}

console.log(`voxd TTS benchmark on ${os.availableParallelism()} cores (${os.cpus()[0]?.model ?? 'unknown CPU'})`);
try {
  await benchFirstByte(7);
  await benchEncoders();
  await benchConcurrency(4);
} finally {
  await server.close();
  fs.rmSync(scratch, { recursive: true, force: true });
}
