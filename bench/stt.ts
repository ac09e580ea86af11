/**
 * Speech-to-text benchmark (`npm run bench:stt`): ratios measured side by side in one run on this machine.
 *  1. decoding: the in-process FFmpeg decoder vs spawning the ffmpeg CLI per file (target ≥ 5x faster);
 *  2. one transcription through POST /v1/audio/transcriptions vs whisper.cpp's own CLI (built from the same
 *     whisper and ggml libraries), same random base-size model, clip, threads and decoding settings, A/B
 *     interleaved (target: voxd's time ≤ 1.05x the CLI's, the CLI's model load not counted);
 *  3. throughput of 4 concurrent requests vs the same 4 in series through POST /v1/audio/transcriptions, on the
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

/** A voxd server on a loopback port whose default STT model is `sttModel`; `transcribe` posts jfk.wav to it. */
async function withServer(label: string, sttModel: string, run: (transcribe: () => Promise<string>) => Promise<void>): Promise<void> {
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'voxd-bench-'));
  const config = resolveConfig({ host: '127.0.0.1', port: 0, logDir: path.join(scratch, 'logs'), sttModel }, {});
  const server = await startServer(config, pino({ level: 'silent' }), { HF_ENDPOINT: 'http://127.0.0.1:9', HF_HUB_CACHE: path.join(scratch, 'hub') });
  const file = fs.readFileSync(JFK_WAV);
  const transcribe = async (): Promise<string> => {
    const body = new FormData();
    body.append('file', new Blob([new Uint8Array(file)]), 'jfk.wav');
    body.append('model', 'whisper-1');
    body.append('language', 'en');
    body.append('response_format', 'text');
    const response = await fetch(`http://127.0.0.1:${server.port}/v1/audio/transcriptions`, { method: 'POST', body });
    if (response.status !== 200) throw new Error(`${label}: HTTP ${response.status} ${await response.text()}`);
    return await response.text();
  };
  try {
    await transcribe(); // load and warm up
    await run(transcribe);
  } finally {
    await server.close();
    fs.rmSync(scratch, { recursive: true, force: true });
  }
}

/** whisper.cpp's CLI from the addon's build tree, built on first use from the same libraries as the addon. */
function whisperCli(): string {
  const binary = path.join(root, 'build', 'whisper-cli');
  if (!fs.existsSync(binary)) {
    console.log("building whisper.cpp's CLI (cmake --build build --target whisper-cli) ...");
    const build = spawnSync('cmake', ['--build', path.join(root, 'build'), '--target', 'whisper-cli', '--parallel', String(os.availableParallelism())], {
      stdio: 'inherit',
    });
    if (build.status !== 0) throw new Error('building whisper-cli failed; run `npm run build:native` first');
  }
  return binary;
}

async function benchAgainstWhisperCli(model: string, runs: number): Promise<void> {
  const cli = whisperCli();
  // the addon's choice for one job on an idle server (src/engines/whisper.ts): every core, at most 8
  const threads = Math.min(8, os.availableParallelism());
  // greedy with whisper.cpp's fallback schedule, timestamps on, English: what the server does for this request
  const args = ['-m', model, '-f', JFK_WAV, '-t', String(threads), '-bs', '1', '-l', 'en'];
  await withServer('Whisper random base model vs whisper-cli', model, async (transcribe) => {
    const voxd: number[] = [];
    const cliTotal: number[] = [];
    const cliWithoutLoad: number[] = [];
    let voxdText = '';
    let cliText = '';
    for (let i = 0; i < runs; i++) {
      voxd.push(await timed(async () => (voxdText = await transcribe())));
      const started = performance.now();
      const run = spawnSync(cli, args, { encoding: 'utf8' });
      const elapsed = performance.now() - started;
      if (run.status !== 0) throw new Error(`whisper-cli failed: ${run.stderr}`);
      cliText = run.stdout.replace(/^\[[^\]]*\]/gm, ''); // the segments' time ranges
      const load = Number(/load time =\s*([\d.]+) ms/.exec(run.stderr)?.[1] ?? 0);
      cliTotal.push(elapsed);
      cliWithoutLoad.push(elapsed - load);
    }
    const same = voxdText.replace(/\s+/g, ' ').trim() === cliText.replace(/\s+/g, ' ').trim();
    const a = median(voxd);
    const b = median(cliWithoutLoad);
    console.log(
      `Whisper random base model, jfk.wav, ${threads} threads: voxd over HTTP ${a.toFixed(0)} ms, whisper-cli ${median(cliTotal).toFixed(0)} ms ` +
        `(${b.toFixed(0)} ms without its model load) -> ${(a / b).toFixed(3)}x the CLI's time (target <= 1.05); ` +
        `transcripts ${same ? 'identical' : `DIFFER: voxd ${JSON.stringify(voxdText)} vs CLI ${JSON.stringify(cliText)}`}`,
    );
  });
}

async function benchConcurrency(label: string, sttModel: string, requests: number, target: string): Promise<void> {
  await withServer(label, sttModel, async (transcribe) => {
    const serial = await timed(async () => {
      for (let i = 0; i < requests; i++) await transcribe();
    });
    const concurrent = await timed(() => Promise.all(Array.from({ length: requests }, transcribe)));
    console.log(
      `${label}: ${requests} in series ${(serial / 1000).toFixed(2)} s, ${requests} concurrent ${(concurrent / 1000).toFixed(2)} s -> ${(serial / concurrent).toFixed(2)}x (target ${target})`,
    );
  });
}

const generator = (await import(pathToFileURL(path.join(root, 'scripts', 'make-whisper-test-model.mjs')).href)) as {
  makeWhisperTestModel(options: { size: 'tiny' | 'base' }): Promise<string>;
};

console.log(`voxd STT benchmark on ${os.availableParallelism()} cores (${os.cpus()[0]?.model ?? 'unknown CPU'})`);
const baseModel = await generator.makeWhisperTestModel({ size: 'base' });
await benchDecoder(10);
await benchAgainstWhisperCli(baseModel, 7);
await benchConcurrency('built-in recognizer (sphinx), jfk.wav', 'sphinx', 4, '>= 1.7x');
await benchConcurrency('Whisper random base model, jfk.wav', baseModel, 4, '>= 0.95x');
