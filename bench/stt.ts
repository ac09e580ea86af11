/**
 * Speech-to-text benchmark (`npm run bench:stt`): ratios measured side by side in one run on this machine.
 *  1. decoding: the in-process FFmpeg decoder vs spawning the ffmpeg CLI per file (target ≥ 5x faster);
 *  2. throughput of 4 concurrent requests vs the same 4 in series through POST /v1/audio/transcriptions, on the
 *     built-in recognizer (target ≥ 1.7x on 2 cores) and on a random base-size Whisper model (target ≥ 0.95x).
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { pino } from 'pino';
import { resolveConfig } from '../src/config.js';
import { decodeAudio } from '../src/services/audio/decode.js';
import { startServer } from '../src/server.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const speech = path.join(root, '..', 'shared', 'audio', 'speech');
const JFK_MP3 = path.join(speech, 'jfk.mp3');
const JFK_WAV = path.join(speech, 'jfk.wav');

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] as number;
}

async function timed(fn: () => Promise<unknown> | unknown): Promise<number> {
  const start = performance.now();
  await fn();
  return performance.now() - start;
}

async function benchDecoder(runs: number): Promise<void> {
  const data = fs.readFileSync(JFK_MP3);
  await decodeAudio(data, { sampleRate: 16000 });
  const inProcess: number[] = [];
  const cli: number[] = [];
  for (let i = 0; i < runs; i++) {
    // A/B interleaved so drift of the machine hits both sides alike
    inProcess.push(await timed(() => decodeAudio(data, { sampleRate: 16000 })));
    cli.push(await timed(() => spawnSync('ffmpeg', ['-v', 'quiet', '-i', JFK_MP3, '-f', 'f32le', '-ac', '1', '-ar', '16000', '-'], { maxBuffer: 1 << 26 })));
  }
  const a = median(inProcess);
  const b = median(cli);
  console.log(`decode jfk.mp3 (11 s): in-process ${a.toFixed(1)} ms, ffmpeg CLI ${b.toFixed(1)} ms -> ${(b / a).toFixed(1)}x faster (target >= 5x)`);
}

async function benchConcurrency(label: string, sttModel: string, requests: number, target: string): Promise<void> {
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'voxd-bench-'));
  const config = resolveConfig({ host: '127.0.0.1', port: 0, logDir: path.join(scratch, 'logs'), cacheDir: path.join(scratch, 'cache'), sttModel }, {});
  const server = await startServer(config, pino({ level: 'silent' }), { HF_ENDPOINT: 'http://127.0.0.1:9', HF_HUB_CACHE: path.join(scratch, 'hub') });
  const file = fs.readFileSync(JFK_WAV);
  const post = async (): Promise<void> => {
    const body = new FormData();
    body.append('file', new Blob([new Uint8Array(file)]), 'jfk.wav');
    body.append('model', 'whisper-1');
    const response = await fetch(`http://127.0.0.1:${server.port}/v1/audio/transcriptions`, { method: 'POST', body });
    if (response.status !== 200) throw new Error(`${label}: HTTP ${response.status} ${await response.text()}`);
    await response.arrayBuffer();
  };
  try {
    await post(); // load and warm up
    const serial = await timed(async () => {
      for (let i = 0; i < requests; i++) await post();
    });
    const concurrent = await timed(() => Promise.all(Array.from({ length: requests }, post)));
    console.log(
      `${label}: ${requests} in series ${(serial / 1000).toFixed(2)} s, ${requests} concurrent ${(concurrent / 1000).toFixed(2)} s -> ${(serial / concurrent).toFixed(2)}x (target ${target})`,
    );
  } finally {
    await server.close();
    fs.rmSync(scratch, { recursive: true, force: true });
  }
}

const generator = (await import(pathToFileURL(path.join(root, 'scripts', 'make-whisper-test-model.mjs')).href)) as {
  makeWhisperTestModel(options: { size: 'tiny' | 'base' }): Promise<string>;
};

console.log(`voxd STT benchmark on ${os.availableParallelism()} cores (${os.cpus()[0]?.model ?? 'unknown CPU'})`);
await benchDecoder(10);
await benchConcurrency('built-in recognizer (sphinx), jfk.wav', 'sphinx', 4, '>= 1.7x');
await benchConcurrency('Whisper random base model, jfk.wav', await generator.makeWhisperTestModel({ size: 'base' }), 4, '>= 0.95x');
