/**
 * GGML text-to-speech benchmark (`npm run bench:tts-ggml`) on the realistic-size random-weight Pocket TTS model
 * (scripts/make-tts-test-model.mjs, generated into build/test-models on first use): one request of a fixed number
 * of frames with a fixed seed, with and without a reference clip (jfk.wav through the speaker encoder),
 *  1. in-process through the engine: frames per second and real-time factor (median of 3 after a warm-up);
 *  2. the same over HTTP (POST /v1/audio/speech, pcm, the model directory as `model`), so the HTTP overhead shows,
 *     and jfk.wav three ways: as a built-in voice (a `--voices-dir` clip), as a custom voice (POST /v1/audio/voices,
 *     then `voice: {id}`) and as `ref_audio` (target: the custom voice within 5 % of the built-in);
 *  3. for reference, llama.cpp's own llama-tts on the same model and text, from the addon's build tree (built on
 *     first use, `cmake --build build --target llama-tts`, from third_party/llama.cpp's tools/tts and the same llama,
 *     mtmd and ggml libraries as the addon). Its wall time includes loading the model, so a 1-frame run is timed too
 *     and the difference gives the generation rate; its own `timings:` line is reported beside.
 *  4. continuous batching: 8 concurrent requests (seeds 1..8, the same max_tokens) over HTTP, as streaming
 *     requests (the serial path: no batching, at most two at a time taking turns) and as plain requests (the
 *     continuous batch: one backbone decode per step for all), alternately, RUNS times each. Prints the median
 *     wall times, their throughput ratio, each request's completion against its fair share (8 x its time alone),
 *     and whether every request's audio is the same both ways;
 *  5. where a frame's time goes, serial and in a native batch of 8 (the model's own stage timings): the backbone
 *     decode, the generator (Pocket's flow net) and the audio decoder (mimi), with the rows or windows each of their
 *     calls served.
 * Peak RSS of this process (and of llama-tts, through /usr/bin/time) is printed too. `--only engine,http,...` runs
 * the named parts alone (engine, http, llama-tts, batching, stages).
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { pino } from 'pino';
import { resolveConfig } from '../src/config.js';
import { ggmlTtsEngine } from '../src/engines/ggml-tts.js';
import type { SynthesisRequest, TtsModel } from '../src/engines/types.js';
import { NativeLogLevel, type NativeTtsGgmlTimings } from '../src/native/addon.js';
import { loadNative } from '../src/native/load.js';
import { decodeAudio } from '../src/services/audio/decode.js';
import { startServer } from '../src/server.js';
import { buildTreeTool } from '../test/helpers/build-tree.js';
import { median } from './stats.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const JFK_WAV = path.join(root, '..', 'shared', 'audio', 'speech', 'jfk.wav');
const RATE = 24000;
/** Samples per Pocket TTS frame (12.5 frames per second of audio). */
const FRAME = 1920;
/** Frames per request (`max_tokens`): 8 s of audio. */
const FRAMES = 100;
const SEED = 1;
const RUNS = 3;
/** Rounds of the built-in / custom / ref_audio comparison, whose difference is smaller than one run's noise. */
const VOICE_ROUNDS = 7;
/** One sentence under the helper's 50-token chunk, long enough that its frame budget exceeds FRAMES. */
const TEXT = 'The quick brown fox jumps over the lazy dog while the children sing a song.';
/** The engine's thread count (native/src/engine/tts/ggml/tts-model.cpp), given to llama-tts as well. */
const THREADS = Math.min(8, Math.max(1, os.availableParallelism()));

interface ModelPaths {
  dir: string;
  model: string;
  mmproj: string;
}

interface Timing {
  ms: number;
  frames: number;
}

function mib(kib: number): string {
  return `${(kib / 1024).toFixed(0)} MiB`;
}

/** llama.cpp's warnings (experimental audio input, embeddings override) every request would otherwise print. */
function quietEngine(): void {
  loadNative().setLogLevel(NativeLogLevel.error);
}

/** Peak resident set of this process so far. */
function peakRss(): string {
  return mib(process.resourceUsage().maxRSS);
}

/** Median time of RUNS runs after a warm-up; the frame count must be the same every run. */
async function measure(run: () => Promise<number>): Promise<Timing> {
  return (await interleaved([run]))[0] as Timing;
}

/**
 * Median times of several requests measured in turns (a warm-up of each, then `rounds` rounds of one run each), so
 * that the machine's drift falls on all of them alike; each one's frame count must be the same every run.
 */
async function interleaved(runs: (() => Promise<number>)[], rounds = RUNS): Promise<Timing[]> {
  const frames: number[] = [];
  for (const run of runs) frames.push(await run());
  const times: number[][] = runs.map(() => []);
  for (let round = 0; round < rounds; round++) {
    for (const [i, run] of runs.entries()) {
      const start = performance.now();
      const got = await run();
      times[i]?.push(performance.now() - start);
      if (got !== frames[i]) throw new Error(`frame count changed between runs: ${frames[i]} then ${got}`);
    }
  }
  return times.map((t, i) => ({ ms: median(t), frames: frames[i] as number }));
}

function describe(label: string, { ms, frames }: Timing): string {
  const audio = (frames * FRAME) / RATE;
  const note = frames === FRAMES ? '' : ` (expected ${FRAMES} frames)`;
  return `  ${label.padEnd(40)} ${frames} frames (${audio.toFixed(1)} s) in ${(ms / 1000).toFixed(2)} s: ${((frames * 1000) / ms).toFixed(1)} frames/s, real-time factor ${(ms / 1000 / audio).toFixed(3)} (${((audio * 1000) / ms).toFixed(2)}x real time)${note}`;
}

async function realisticModel(): Promise<ModelPaths> {
  const generator = (await import(pathToFileURL(path.join(root, 'scripts', 'make-tts-test-model.mjs')).href)) as {
    makeTtsTestModel(options: { size: 'realistic' }): Promise<ModelPaths>;
  };
  const start = performance.now();
  const paths = await generator.makeTtsTestModel({ size: 'realistic' });
  const mb = (file: string): number => fs.statSync(file).size / 1e6;
  console.log(
    `model ${paths.dir} (${mb(paths.model).toFixed(0)} MB + ${mb(paths.mmproj).toFixed(0)} MB, ready in ${((performance.now() - start) / 1000).toFixed(1)} s)`,
  );
  return paths;
}

// ---- 1. one request in-process ----

async function benchEngine(paths: ModelPaths, reference: Float32Array): Promise<void> {
  quietEngine();
  const start = performance.now();
  const model: TtsModel = await ggmlTtsEngine.load({ id: paths.dir, path: paths.dir, projector: null });
  console.log(`in-process (engine loaded in ${((performance.now() - start) / 1000).toFixed(2)} s, ${THREADS} threads):`);
  try {
    const request: SynthesisRequest = { text: TEXT, voice: 'default', speed: 1, seed: SEED, maxTokens: FRAMES };
    const synth = async (r: SynthesisRequest): Promise<number> => (await model.synthesize(r)).length / FRAME;
    console.log(describe('no reference', await measure(() => synth(request))));
    console.log(describe('jfk.wav reference', await measure(() => synth({ ...request, reference: { samples: reference } }))));
  } finally {
    await model.dispose();
  }
  console.log(`  peak RSS so far ${peakRss()}`);
}

// ---- 2. the same over HTTP ----

type Speech = (body: Record<string, unknown>) => Promise<Buffer>;

/**
 * Runs `fn` against a server on a loopback port; `speech` posts one request for the model and returns its PCM.
 * `voicesDir` is offered as the server's `--voices-dir`.
 */
async function withServer(paths: ModelPaths, fn: (speech: Speech, base: string) => Promise<void>, voicesDir: string | null = null): Promise<void> {
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'voxd-bench-tts-ggml-'));
  const config = resolveConfig(
    { host: '127.0.0.1', port: 0, logDir: path.join(scratch, 'logs'), voicesDir, customVoicesDir: path.join(scratch, 'voices'), requireVoiceConsent: 'off' },
    {},
  );
  const server = await startServer(config, pino({ level: 'silent' }), { HF_ENDPOINT: 'http://127.0.0.1:9', HF_HUB_CACHE: path.join(scratch, 'hub') });
  quietEngine(); // the server set its own level
  const speech: Speech = async (body) => {
    const response = await fetch(`http://127.0.0.1:${server.port}/v1/audio/speech`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: paths.dir, input: TEXT, response_format: 'pcm', seed: SEED, max_tokens: FRAMES, ...body }),
    });
    if (response.status !== 200) throw new Error(`HTTP ${response.status}: ${await response.text()}`);
    return Buffer.from(await response.arrayBuffer());
  };
  try {
    await fn(speech, `http://127.0.0.1:${server.port}`);
  } finally {
    await server.close();
    fs.rmSync(scratch, { recursive: true, force: true });
  }
  console.log(`  peak RSS so far ${peakRss()}`);
}

/** 16-bit mono PCM bytes as frames. */
function framesOf(pcm: Buffer): number {
  return pcm.length / 2 / FRAME;
}

/** Uploads jfk.wav as a custom voice (consent off on this server); its ID. */
async function createCustomVoice(base: string): Promise<string> {
  const form = new FormData();
  form.append('name', 'jfk-custom');
  form.append('audio_sample', new Blob([fs.readFileSync(JFK_WAV)], { type: 'audio/wav' }), 'jfk.wav');
  const response = await fetch(`${base}/v1/audio/voices`, { method: 'POST', body: form });
  if (response.status !== 200) throw new Error(`creating the custom voice: HTTP ${response.status}: ${await response.text()}`);
  return ((await response.json()) as { id: string }).id;
}

async function benchHttp(paths: ModelPaths): Promise<void> {
  // jfk.wav as a built-in voice: the model's preset clips come from --voices-dir
  const presets = fs.mkdtempSync(path.join(os.tmpdir(), 'voxd-bench-presets-'));
  fs.copyFileSync(JFK_WAV, path.join(presets, 'jfk.wav'));
  try {
    await withServer(
      paths,
      async (speech, base) => {
        console.log('over HTTP (POST /v1/audio/speech, pcm; the first request loads the model):');
        console.log(describe('no reference', await measure(async () => framesOf(await speech({})))));
        const id = await createCustomVoice(base);
        const refAudio = `data:audio/wav;base64,${fs.readFileSync(JFK_WAV).toString('base64')}`;
        const [builtIn, custom, ref] = (await interleaved(
          [{ voice: 'jfk' }, { voice: { id } }, { ref_audio: refAudio }].map((body) => async () => framesOf(await speech(body))),
          VOICE_ROUNDS,
        )) as [Timing, Timing, Timing];
        console.log(`  jfk.wav three ways, in turns (median of ${VOICE_ROUNDS} rounds):`);
        console.log(describe('as a built-in voice', builtIn));
        console.log(describe('as a custom voice', custom));
        console.log(describe('as ref_audio', ref));
        console.log(`  custom voice / built-in voice ${(custom.ms / builtIn.ms).toFixed(3)} (target <= 1.05)`);
      },
      presets,
    );
  } finally {
    fs.rmSync(presets, { recursive: true, force: true });
  }
}

// ---- 3. llama.cpp's llama-tts for reference ----

interface CliRun {
  wallMs: number;
  /** llama-tts's own `timings:` total (prompt eval + generation + vocoder; not load or speaker encoding). */
  ownMs: number;
  frames: number;
  rssKib: number | null;
}

function runLlamaTts(cli: string, paths: ModelPaths, frames: number, speaker: boolean, out: string): CliRun {
  const args = ['-m', paths.model, '-mm', paths.mmproj, '-p', TEXT, '-n', String(frames), '-s', String(SEED), '-t', String(THREADS), '-o', out];
  if (speaker) args.push('--tts-speaker-file', JFK_WAV);
  const timeBin = fs.existsSync('/usr/bin/time') ? '/usr/bin/time' : null;
  const [cmd, argv] = timeBin ? [timeBin, ['-f', 'voxd-maxrss %M', cli, ...args]] : [cli, args];
  const start = performance.now();
  const result = spawnSync(cmd, argv, { encoding: 'utf8', maxBuffer: 64 << 20 });
  const wallMs = performance.now() - start;
  const log = `${result.stdout}\n${result.stderr}`;
  if (result.status !== 0) throw new Error(`llama-tts exited with ${result.status}:\n${log.slice(-2000)}`);
  const generated = /generated (\d+) frames/.exec(log);
  const timings = /timings:.*= total ([\d.]+)s/.exec(log);
  const rss = /voxd-maxrss (\d+)/.exec(log);
  return {
    wallMs,
    ownMs: timings ? Number(timings[1]) * 1000 : NaN,
    frames: generated ? Number(generated[1]) : NaN,
    rssKib: rss ? Number(rss[1]) : null,
  };
}

function benchLlamaTts(paths: ModelPaths): void {
  const cli = buildTreeTool('llama-tts');
  console.log(`llama.cpp llama-tts (${THREADS} threads; each run loads the model; median of ${RUNS}, no warm-up):`);
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'voxd-bench-llama-tts-'));
  let rssKib = 0;
  try {
    for (const speaker of [false, true]) {
      const out = path.join(scratch, 'out.wav');
      const full: CliRun[] = [];
      const one: CliRun[] = [];
      for (let i = 0; i < RUNS; i++) {
        full.push(runLlamaTts(cli, paths, FRAMES, speaker, out));
        one.push(runLlamaTts(cli, paths, 1, speaker, out));
      }
      for (const run of [...full, ...one]) rssKib = Math.max(rssKib, run.rssKib ?? 0);
      const frames = (full[0] as CliRun).frames;
      const wall = median(full.map((r) => r.wallMs));
      const own = median(full.map((r) => r.ownMs));
      const wallOne = median(one.map((r) => r.wallMs));
      const label = speaker ? 'jfk.wav reference' : 'no reference';
      console.log(describe(`${label}, whole process`, { ms: wall, frames }));
      console.log(describe(`${label}, its own timings`, { ms: own, frames }));
      // the 1-frame run pays the same load, speaker encoding and prompt: the difference is frames 2..N
      console.log(
        `  ${`${label}, ${frames} minus 1 frame`.padEnd(40)} ${((wall - wallOne) / 1000).toFixed(2)} s for ${frames - 1} frames: ${(((frames - 1) * 1000) / (wall - wallOne)).toFixed(1)} frames/s (1-frame run ${(wallOne / 1000).toFixed(2)} s)`,
      );
    }
  } finally {
    fs.rmSync(scratch, { recursive: true, force: true });
  }
  console.log(`  peak RSS of llama-tts ${rssKib > 0 ? mib(rssKib) : 'unknown (no /usr/bin/time)'}`);
}

// ---- 4. continuous batching vs serial ----

const CONCURRENT = 8;

interface Completion {
  ms: number;
  pcm: Buffer;
}

interface Round {
  wallMs: number;
  done: Completion[];
}

/** Starts every request at once; each one's completion time from the common start. */
async function together(speech: Speech, bodies: Record<string, unknown>[]): Promise<Round> {
  const start = performance.now();
  const done = await Promise.all(bodies.map(async (body) => ({ pcm: await speech(body), ms: performance.now() - start })));
  return { wallMs: performance.now() - start, done };
}

async function benchBatching(paths: ModelPaths): Promise<void> {
  await withServer(paths, async (speech) => {
    const bodies = Array.from({ length: CONCURRENT }, (_, i) => ({ seed: i + 1 }));
    await speech({}); // loads the model
    const alone: number[] = [];
    for (const body of bodies) {
      const start = performance.now();
      await speech({ ...body, stream: true });
      alone.push(performance.now() - start);
    }
    const serialRuns: Round[] = [];
    const batchedRuns: Round[] = [];
    for (let i = 0; i < RUNS; i++) {
      serialRuns.push(
        await together(
          speech,
          bodies.map((body) => ({ ...body, stream: true })),
        ),
      );
      batchedRuns.push(await together(speech, bodies));
    }
    const medianRound = (runs: Round[]): Round => [...runs].sort((a, b) => a.wallMs - b.wallMs)[Math.floor(runs.length / 2)] as Round;
    const serial = medianRound(serialRuns);
    const batched = medianRound(batchedRuns);
    const frames = bodies.length * FRAMES;
    const line = (label: string, wallMs: number): string =>
      `  ${label.padEnd(40)} ${frames} frames in ${(wallMs / 1000).toFixed(2)} s: ${((frames * 1000) / wallMs).toFixed(1)} frames/s, real-time factor ${(wallMs / 1000 / ((frames * FRAME) / RATE)).toFixed(3)}`;
    console.log(
      `continuous batching: ${CONCURRENT} concurrent requests of ${FRAMES} frames over HTTP, median of ${RUNS} (alone: median ${(median(alone) / 1000).toFixed(2)} s each)`,
    );
    console.log(line('serial (streaming requests)', serial.wallMs));
    console.log(line('continuous batch', batched.wallMs));
    console.log(`  throughput ratio ${(serial.wallMs / batched.wallMs).toFixed(2)}x (target >= 1.3x, stretch 2x)`);
    const share = batched.done.map((c, i) => c.ms / (CONCURRENT * (alone[i] as number)));
    console.log(
      `  completion / fair share (${CONCURRENT} x alone): worst ${Math.max(...share).toFixed(2)} (target <= 1.5), each ${share.map((r) => r.toFixed(2)).join(' ')}`,
    );
    const same = [...serialRuns, ...batchedRuns].every((run) => run.done.every((c, i) => c.pcm.equals((serial.done[i] as Completion).pcm)));
    console.log(`  every request's audio the same in every run, batched and serial: ${same ? 'yes' : 'NO'}`);
  });
}

// ---- 5. where a frame's time goes ----

async function benchStages(paths: ModelPaths): Promise<void> {
  quietEngine();
  const model = await loadNative().TtsGgmlModel.load({ model: paths.model, mmproj: paths.mmproj, sequences: CONCURRENT + 1 });
  try {
    const request = (seed: number): { text: string; seed: number; maxFrames: number } => ({ text: TEXT, seed, maxFrames: FRAMES });
    await model.synthesize(request(1)); // warm-up
    const profile = async (label: string, run: () => Promise<void>): Promise<void> => {
      const before = model.timings();
      const start = performance.now();
      await run();
      const wallMs = performance.now() - start;
      const after = model.timings();
      const delta = (key: keyof NativeTtsGgmlTimings): number => after[key] - before[key];
      const frames = delta('frames');
      const perFrame = (ms: number): string => `${(ms / frames).toFixed(2)}`;
      const stages = delta('backboneMs') + delta('generatorMs') + delta('decoderMs') + delta('promptMs') + delta('encoderMs');
      console.log(
        `  ${label.padEnd(22)} ${perFrame(wallMs)} ms per frame: backbone ${perFrame(delta('backboneMs'))} (${(delta('backboneMs') / delta('backboneCalls')).toFixed(1)} ms per decode of ${(delta('backboneRows') / delta('backboneCalls')).toFixed(1)} rows), generator ${perFrame(delta('generatorMs'))} (${(delta('generatorRows') / delta('generatorCalls')).toFixed(1)} frames per call), audio decoder ${perFrame(delta('decoderMs'))} (${(delta('decoderWindows') / delta('decoderCalls')).toFixed(1)} windows per call), prompt ${perFrame(delta('promptMs'))}, the rest ${perFrame(wallMs - stages)}`,
      );
    };
    console.log(`where a frame's time goes (in-process, ${FRAMES} frames per request):`);
    await profile('1 request alone', async () => {
      await model.synthesize(request(1));
    });
    await profile(`batch of ${CONCURRENT}`, async () => {
      const batch = model.createBatch();
      for (let i = 0; i < CONCURRENT; i++) batch.add(request(i + 1));
      while (batch.active > 0) await batch.step();
      batch.close();
    });
  } finally {
    model.release();
  }
}

console.log(`voxd GGML TTS benchmark on ${os.availableParallelism()} cores (${os.cpus()[0]?.model ?? 'unknown CPU'})`);
const paths = await realisticModel();
const { samples: reference } = await decodeAudio(fs.readFileSync(JFK_WAV), { sampleRate: RATE });
console.log(
  `text "${TEXT}", max_tokens ${FRAMES} (${((FRAMES * FRAME) / RATE).toFixed(1)} s), seed ${SEED}; reference jfk.wav ${(reference.length / RATE).toFixed(1)} s`,
);
const parts: Record<string, () => Promise<void> | void> = {
  engine: () => benchEngine(paths, reference),
  http: () => benchHttp(paths),
  'llama-tts': () => benchLlamaTts(paths),
  batching: () => benchBatching(paths),
  stages: () => benchStages(paths),
};
const only = parseArgs({ options: { only: { type: 'string' } } }).values.only?.split(',');
const unknown = only?.filter((name) => !(name in parts)) ?? [];
if (unknown.length > 0) throw new Error(`--only: no part ${unknown.join(', ')}; parts: ${Object.keys(parts).join(', ')}`);
for (const [name, run] of Object.entries(parts)) if (!only || only.includes(name)) await run();
