/**
 * Speech-to-text benchmark (`npm run bench:stt`): ratios measured side by side in one run on this machine.
 *  1. decoding: the in-process FFmpeg decoder vs spawning the ffmpeg CLI per file (target ≥ 5x faster);
 *  2. one transcription through POST /v1/audio/transcriptions vs whisper.cpp's own CLI (built from the same ggml
 *     libraries), same random base-size model, clip, threads and greedy decoding with fallback, A/B interleaved
 *     (target: voxd's time ≤ 1.05x the CLI's, the CLI's model load not counted). voxd decodes with its own batched
 *     graphs (docs/architecture.md "Batched Whisper"), so the garbage texts of a random model differ;
 *  3. throughput of 4 concurrent requests vs the same 4 in series on the built-in recognizer (target ≥ 1.7x);
 *  4. batched Whisper (random base-size model): 4 and 8 concurrent transcriptions vs the same in series, for
 *     jfk.wav (11 s) and a 60 s clip (target ≥ 1.6x for 4 on 2 cores); the latency of short requests arriving
 *     while a long one runs (p95, against the short request alone); 8 realtime sessions streaming at real-time
 *     pace, the lag from the commit to the transcript (against one session alone); the batcher's stage sums;
 *  5. Parakeet TDT on the realistic-size random model (the 0.6B shapes): one transcription over HTTP vs whisper.cpp's
 *     `parakeet-cli` (target ≤ 1.05x, texts equal), 4 and 8 concurrent vs in series, seconds of audio per second on a
 *     60 s clip beside the random base Whisper model, and 8 live sessions at real-time pace with each one's lag after
 *     its commit (target: lag p95 ≤ 1 s on 2 cores) at three --realtime-transcription-delay-ms settings. Each figure
 *     comes with the machine's load meanwhile: the cores are shared, and ggml's spinning threads slow down many times
 *     over when other processes hold a core.
 *  6. An audio language model, Qwen3-ASR on the realistic-size random model (the 0.6B shapes): one transcription over
 *     HTTP vs llama.cpp's `llama-server` on the same model and clip (its /v1/audio/transcriptions; target <= 1.05x),
 *     then 8 concurrent vs 8 in series (target >= 3x on 2 cores) and vs `llama-server -np 8` given the same 8 at once
 *     (target: voxd's throughput >= 1.0x llama-server's). Every request asks for 32 tokens (the random model never ends
 *     its answer itself), and each clip differs from the others by its gain, so llama-server's prompt cache reuses none.
 * `--parakeet-only` runs part 5 alone, `--audio-lm-only` part 6.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { pino } from 'pino';
import WebSocket from 'ws';
import { type Config, resolveConfig } from '../src/config.js';
import { decodeAudio } from '../src/services/audio/decode.js';
import { startServer } from '../src/server.js';
import { loadNative } from '../src/native/load.js';
import { pcm16, readWavMono, wavBytes } from '../test/helpers/wav.js';
import { buildTreeTool } from '../test/helpers/build-tree.js';
import { startLlamaServer, type AudioLmTestModel, type LlamaServer } from '../test/helpers/audio-lm.js';
import { median, timed } from './stats.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const speech = path.join(root, '..', 'shared', 'audio', 'speech');
const JFK_MP3 = path.join(speech, 'jfk.mp3');
const JFK_WAV = path.join(speech, 'jfk.wav');
// long Parakeet uploads are cut at the VAD's pauses; the servers here fetch nothing
const VAD_MODEL = path.join(root, '..', 'shared', 'models', 'silero', 'ggml-silero-v6.2.0.bin');

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

type Transcribe = (file?: Buffer) => Promise<string>;

/**
 * A voxd server on a loopback port whose default STT model is `sttModel` (and `settings` besides); `transcribe` posts
 * a file (jfk.wav by default).
 */
async function withServer(
  label: string,
  sttModel: string,
  run: (transcribe: Transcribe, port: number) => Promise<void>,
  settings: Partial<Record<keyof Config, unknown>> = {},
  warmUp: (transcribe: Transcribe, port: number) => Promise<unknown> = (transcribe) => transcribe(),
): Promise<void> {
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'voxd-bench-'));
  const config = resolveConfig(
    { host: '127.0.0.1', port: 0, logDir: path.join(scratch, 'logs'), sttModel, maxQueue: 64, vadModel: VAD_MODEL, ...settings },
    {},
  );
  const server = await startServer(config, pino({ level: 'silent' }), { HF_ENDPOINT: 'http://127.0.0.1:9', HF_HUB_CACHE: path.join(scratch, 'hub') });
  const jfk = fs.readFileSync(JFK_WAV);
  const transcribe = async (file: Buffer = jfk): Promise<string> => {
    const body = new FormData();
    body.append('file', new Blob([new Uint8Array(file)]), 'clip.wav');
    body.append('model', 'whisper-1');
    body.append('language', 'en');
    body.append('response_format', 'text');
    const response = await fetch(`http://127.0.0.1:${server.port}/v1/audio/transcriptions`, { method: 'POST', body });
    if (response.status !== 200) throw new Error(`${label}: HTTP ${response.status} ${await response.text()}`);
    return await response.text();
  };
  try {
    await warmUp(transcribe, server.port); // load and warm up
    await run(transcribe, server.port);
  } finally {
    await server.close();
    fs.rmSync(scratch, { recursive: true, force: true });
  }
}

interface CliComparison {
  /** Medians, ms: voxd over HTTP, the CLI's whole run, and that run less the model load it prints. */
  voxd: number;
  cliTotal: number;
  cliWithoutLoad: number;
  voxdText: string;
  cliText: string;
}

/**
 * One transcription of jfk.wav through POST /v1/audio/transcriptions vs `tool` of the build tree (`args`), A/B
 * interleaved `runs` times so drift of the machine hits both sides alike; `cliTextOf` takes the text out of its stdout.
 */
async function againstCli(
  label: string,
  model: string,
  tool: string,
  args: string[],
  cliTextOf: (stdout: string) => string,
  runs: number,
): Promise<CliComparison> {
  const cli = buildTreeTool(tool);
  const voxd: number[] = [];
  const cliTotal: number[] = [];
  const cliWithoutLoad: number[] = [];
  let voxdText = '';
  let cliText = '';
  await withServer(label, model, async (transcribe) => {
    for (let i = 0; i < runs; i++) {
      voxd.push(await timed(async () => (voxdText = await transcribe())));
      const started = performance.now();
      const run = spawnSync(cli, args, { encoding: 'utf8' });
      const elapsed = performance.now() - started;
      if (run.status !== 0) throw new Error(`${tool} failed: ${run.stderr}`);
      cliText = cliTextOf(run.stdout);
      const load = Number(/load time =\s*([\d.]+) ms/.exec(run.stderr)?.[1] ?? 0);
      cliTotal.push(elapsed);
      cliWithoutLoad.push(elapsed - load);
    }
  });
  return { voxd: median(voxd), cliTotal: median(cliTotal), cliWithoutLoad: median(cliWithoutLoad), voxdText, cliText };
}

/** The addon's choice for one job on an idle server (src/engines/whisper.ts, src/engines/core-share.ts): every core, at most 8. */
const soloThreads = Math.min(8, os.availableParallelism());

async function benchAgainstWhisperCli(model: string, runs: number): Promise<void> {
  // greedy with whisper.cpp's fallback schedule, timestamps on, English: what the server does for this request
  const args = ['-m', model, '-f', JFK_WAV, '-t', String(soloThreads), '-bs', '1', '-l', 'en'];
  const textOf = (stdout: string): string => stdout.replace(/^\[[^\]]*\]/gm, ''); // the segments' time ranges
  const { voxd, cliTotal, cliWithoutLoad, voxdText, cliText } = await againstCli(
    'Whisper random base model vs whisper-cli',
    model,
    'whisper-cli',
    args,
    textOf,
    runs,
  );
  console.log(
    `Whisper random base model, jfk.wav, ${soloThreads} threads: voxd over HTTP ${voxd.toFixed(0)} ms, whisper-cli ${cliTotal.toFixed(0)} ms ` +
      `(${cliWithoutLoad.toFixed(0)} ms without its model load) -> ${(voxd / cliWithoutLoad).toFixed(3)}x the CLI's time (target <= 1.05); ` +
      `texts: voxd ${JSON.stringify(voxdText.trim().slice(0, 40))}, CLI ${JSON.stringify(cliText.trim().slice(0, 40))} (two decoders of a random model)`,
  );
}

/** `n` transcriptions of `file` one after another, then the same `n` at once: the two wall times, ms. */
async function seriesThenConcurrent(transcribe: Transcribe, n: number, file?: Buffer): Promise<{ serial: number; concurrent: number }> {
  const serial = await timed(async () => {
    for (let i = 0; i < n; i++) await transcribe(file);
  });
  const concurrent = await timed(() => Promise.all(Array.from({ length: n }, () => transcribe(file))));
  return { serial, concurrent };
}

async function benchConcurrency(label: string, sttModel: string, requests: number, target: string): Promise<void> {
  await withServer(label, sttModel, async (transcribe) => {
    const { serial, concurrent } = await seriesThenConcurrent(transcribe, requests);
    console.log(
      `${label}: ${requests} in series ${(serial / 1000).toFixed(2)} s, ${requests} concurrent ${(concurrent / 1000).toFixed(2)} s -> ${(serial / concurrent).toFixed(2)}x (target ${target})`,
    );
  });
}

/** jfk.wav's samples repeated up to `seconds`. */
async function jfkFor(seconds: number): Promise<Float32Array> {
  const { samples } = await decodeAudio(fs.readFileSync(JFK_WAV), { sampleRate: 16000 });
  const out = new Float32Array(seconds * 16000);
  for (let i = 0; i < out.length; i += samples.length) out.set(samples.subarray(0, Math.min(samples.length, out.length - i)), i);
  return out;
}

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] as number;
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));

/** One realtime session streaming `samples` at real-time pace in 100 ms appends, then a commit; resolves with the commit -> transcript lag. */
async function realtimeSession(port: number, samples: Float32Array, model: string): Promise<number> {
  const socket = new WebSocket(`ws://127.0.0.1:${port}/v1/realtime?intent=transcription`);
  const events: { type: string; at: number }[] = [];
  const waiters = new Map<string, () => void>();
  socket.on('message', (data) => {
    const event = JSON.parse(String(data)) as { type: string; error?: unknown };
    if (event.type === 'error') console.error(`realtime error: ${JSON.stringify(event.error)}`);
    events.push({ type: event.type, at: performance.now() });
    waiters.get(event.type)?.();
  });
  const next = (type: string): Promise<void> =>
    events.some((e) => e.type === type) ? Promise.resolve() : new Promise((resolve) => waiters.set(type, () => resolve()));
  const closed = new Promise((resolve) => socket.once('close', resolve));
  try {
    await next('session.created');
    socket.send(
      JSON.stringify({
        type: 'session.update',
        session: { type: 'transcription', audio: { input: { format: { type: 'audio/pcm', rate: 16000 }, transcription: { model }, turn_detection: null } } },
      }),
    );
    await next('session.updated');
    const chunk = 1600; // 100 ms
    const start = performance.now();
    for (let i = 0, k = 0; i < samples.length; i += chunk, k++) {
      await sleep(start + k * 100 - performance.now());
      socket.send(JSON.stringify({ type: 'input_audio_buffer.append', audio: pcm16(samples.subarray(i, i + chunk)).toString('base64') }));
    }
    const committed = performance.now();
    socket.send(JSON.stringify({ type: 'input_audio_buffer.commit' }));
    await next('conversation.item.input_audio_transcription.completed');
    return (events.find((e) => e.type === 'conversation.item.input_audio_transcription.completed')?.at ?? NaN) - committed;
  } finally {
    socket.close();
    await closed;
  }
}

async function benchBatchedWhisper(model: string): Promise<void> {
  const clips = [
    { name: 'jfk.wav (11 s)', file: fs.readFileSync(JFK_WAV) },
    { name: '60 s clip', file: wavBytes(await jfkFor(60), 16000) },
  ];
  await withServer('batched Whisper', model, async (transcribe, port) => {
    for (const clip of clips) {
      for (const n of [4, 8]) {
        const { serial, concurrent: batched } = await seriesThenConcurrent(transcribe, n, clip.file);
        const target = n === 4 ? ` (target >= 1.6x on ${os.availableParallelism()} cores)` : '';
        console.log(
          `Whisper random base model, ${clip.name}: ${n} in series ${(serial / 1000).toFixed(2)} s, ${n} concurrent (batched) ${(batched / 1000).toFixed(2)} s -> ${(serial / batched).toFixed(2)}x${target}`,
        );
      }
    }

    // short requests arriving while a long one runs: each joins the running batch at its next step
    const shortAlone: number[] = [];
    for (let i = 0; i < 3; i++) shortAlone.push(await timed(() => transcribe()));
    const long = transcribe(clips[1]?.file);
    const during: number[] = [];
    await Promise.all(
      Array.from({ length: 8 }, async (_, i) => {
        await sleep(i * 500);
        during.push(await timed(() => transcribe()));
      }),
    );
    await long;
    console.log(
      `short request (jfk.wav) alone: median ${median(shortAlone).toFixed(0)} ms; 8 arriving every 0.5 s during a 60 s transcription: ` +
        `p50 ${percentile(during, 50).toFixed(0)} ms, p95 ${percentile(during, 95).toFixed(0)} ms (${(percentile(during, 95) / median(shortAlone)).toFixed(2)}x alone)`,
    );

    // realtime sessions at real-time pace, one turn of jfk.wav each (the model re-decodes the open turn every second)
    const { samples } = await decodeAudio(clips[0]?.file as Buffer, { sampleRate: 16000 });
    const one = await realtimeSession(port, samples, 'whisper-1');
    const eight = await Promise.all(Array.from({ length: 8 }, async (_, i) => (await sleep(i * 12), realtimeSession(port, samples, 'whisper-1'))));
    console.log(
      `realtime sessions, jfk.wav at real-time pace, commit -> transcript: 1 session ${one.toFixed(0)} ms; 8 sessions median ${median(eight).toFixed(0)} ms, ` +
        `worst ${Math.max(...eight).toFixed(0)} ms`,
    );
  });

  // the batcher's own stage sums, straight on the native model: one job alone, then 8 together
  const native = await loadNative().WhisperModel.load(model, { maxBatch: 8 });
  try {
    const { samples } = await decodeAudio(clips[0]?.file as Buffer, { sampleRate: 16000 });
    const params = { language: 'en' };
    await native.transcribe(samples, params);
    const stage = async (n: number): Promise<string> => {
      const before = native.timings();
      const wall = await timed(() => Promise.all(Array.from({ length: n }, () => native.transcribe(samples, params))));
      const t = native.timings();
      const calls = t.decodeCalls - before.decodeCalls;
      const rows = t.decodeRows - before.decodeRows;
      const windows = t.encodeWindows - before.encodeWindows;
      return (
        `${n} job${n > 1 ? 's' : ''}: ${(wall / n).toFixed(0)} ms per job; encoder ${((t.encodeMs - before.encodeMs) / windows).toFixed(0)} ms per window ` +
        `(${windows} in ${t.encodeCalls - before.encodeCalls} passes), decoder ${((t.decodeMs - before.decodeMs) / calls).toFixed(1)} ms per pass ` +
        `(${(rows / calls).toFixed(1)} rows), ${((t.decodeMs - before.decodeMs) / rows).toFixed(2)} ms per row`
      );
    };
    console.log(`batcher stages, jfk.wav, language given: ${await stage(1)}`);
    console.log(`batcher stages, jfk.wav, language given: ${await stage(8)}`);
  } finally {
    native.release();
  }
}

/** Linux's USER_HZ, the unit of /proc's CPU times. */
const TICKS_PER_SECOND = 100;

/** CPU time in clock ticks: all cores busy, and this process (its threads, and its children once reaped: the CLIs); null off Linux. */
function cpuTicks(): { busy: number; own: number } | null {
  const sum = (values: number[]): number => values.reduce((total, value) => total + value, 0);
  try {
    // cpu user nice system idle iowait irq softirq ...: busy is all but idle and iowait; guest time is inside user
    const cpu = (fs.readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '').trim().split(/\s+/).slice(1, 8).map(Number);
    const stat = fs.readFileSync('/proc/self/stat', 'utf8');
    // the fields after the command's name start with the third, the state; utime, stime, cutime, cstime are 14-17
    const own = stat
      .slice(stat.lastIndexOf(')') + 2)
      .split(' ')
      .slice(11, 15)
      .map(Number);
    return { busy: sum(cpu) - sum(cpu.slice(3, 5)), own: sum(own) };
  } catch {
    return null;
  }
}

/**
 * Starts watching the machine; `describe()` says how busy it was since: the 1-minute load average (this benchmark's
 * own threads included) and the cores that other processes used meanwhile.
 */
function watchLoad(): { describe(): string } {
  const before = cpuTicks();
  const started = performance.now();
  return {
    describe(): string {
      const after = cpuTicks();
      const load = `load average ${os.loadavg()[0]?.toFixed(2)}`;
      if (!before || !after) return `[${load}]`;
      const others = (after.busy - before.busy - (after.own - before.own)) / TICKS_PER_SECOND / ((performance.now() - started) / 1000);
      return `[${load}, other processes ${Math.max(0, others).toFixed(2)} cores]`;
    },
  };
}

/** Seconds of audio transcribed per second of wall time, the median of `runs` requests of `file` (`seconds` long). */
async function audioSecondsPerSecond(transcribe: Transcribe, file: Buffer, seconds: number, runs: number): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < runs; i++) times.push(await timed(() => transcribe(file)));
  return seconds / (median(times) / 1000);
}

/** Live sessions at real-time pace, one turn of `samples` each, started `staggerMs` apart: each one's commit -> transcript lag, ms. */
async function liveLags(port: number, samples: Float32Array, sessions: number, staggerMs: number): Promise<number[]> {
  return await Promise.all(Array.from({ length: sessions }, async (_, i) => (await sleep(i * staggerMs), realtimeSession(port, samples, 'whisper-1'))));
}

const LIVE_SESSIONS = 8;
/** The lag a session that keeps up has after its commit (the issue's target for the 95th percentile). */
const KEPT_UP_MS = 1000;

function describeLags(lags: number[]): string {
  const kept = lags.filter((lag) => lag <= KEPT_UP_MS).length;
  return (
    `p50 ${(percentile(lags, 50) / 1000).toFixed(2)} s, p95 ${(percentile(lags, 95) / 1000).toFixed(2)} s, worst ${(Math.max(...lags) / 1000).toFixed(2)} s; ` +
    `${kept} of ${lags.length} within ${KEPT_UP_MS / 1000} s`
  );
}

/** One live session, then 8 starting together, then 8 spread over the clip, at --realtime-transcription-delay-ms `delayMs` (null: the default). */
async function benchParakeetLive(model: string, samples: Float32Array, delayMs: number | null, note: string): Promise<void> {
  await withServer(
    'Parakeet live',
    model,
    async (_, port) => {
      const label = `Parakeet live, jfk.wav at real-time pace, manual commit, --realtime-transcription-delay-ms ${delayMs ?? 'unset'}${note}`;
      let watch = watchLoad();
      const [alone] = await liveLags(port, samples, 1, 0);
      console.log(`${label}: 1 session, commit -> transcript ${((alone as number) / 1000).toFixed(2)} s ${watch.describe()}`);
      watch = watchLoad();
      const together = await liveLags(port, samples, LIVE_SESSIONS, 12);
      console.log(`${label}: ${LIVE_SESSIONS} sessions starting together: ${describeLags(together)} (target: all, p95 <= 1 s) ${watch.describe()}`);
      // independent speakers: the commits spread over the clip, not all at once
      const spread = (samples.length / 16000 / LIVE_SESSIONS) * 1000;
      watch = watchLoad();
      const staggered = await liveLags(port, samples, LIVE_SESSIONS, spread);
      console.log(`${label}: ${LIVE_SESSIONS} sessions starting ${(spread / 1000).toFixed(2)} s apart: ${describeLags(staggered)} ${watch.describe()}`);
    },
    delayMs === null ? {} : { realtimeTranscriptionDelayMs: delayMs },
  );
}

/** Part 5 of the header: Parakeet on the realistic-size random model, beside the random base Whisper model. */
async function benchParakeet(model: string, whisperBase: string): Promise<void> {
  console.log('Parakeet TDT, realistic-size random model (0.6B shapes, f16)');
  // on the CPU, as the server here; its stdout is the transcript
  const args = ['-m', model, '-f', JFK_WAV, '-t', String(soloThreads), '-ng'];
  let watch = watchLoad();
  const cli = await againstCli('Parakeet vs parakeet-cli', model, 'parakeet-cli', args, (stdout) => stdout, 5);
  const same = cli.voxdText.trim() === cli.cliText.trim();
  console.log(
    `Parakeet, jfk.wav, ${soloThreads} threads: voxd over HTTP ${cli.voxd.toFixed(0)} ms, parakeet-cli ${cli.cliTotal.toFixed(0)} ms ` +
      `(${cli.cliWithoutLoad.toFixed(0)} ms without its model load) -> ${(cli.voxd / cli.cliWithoutLoad).toFixed(3)}x the CLI's time (target <= 1.05); ` +
      `texts ${same ? 'equal' : `differ: voxd ${JSON.stringify(cli.voxdText.trim().slice(0, 60))}, CLI ${JSON.stringify(cli.cliText.trim().slice(0, 60))}`} ${watch.describe()}`,
  );

  const minute = wavBytes(await jfkFor(60), 16000);
  let whisperRate = 0;
  await withServer('Whisper 60 s', whisperBase, async (transcribe) => {
    watch = watchLoad();
    whisperRate = await audioSecondsPerSecond(transcribe, minute, 60, 3);
    console.log(`Whisper random base model, 60 s clip: ${whisperRate.toFixed(1)} s of audio per second (median of 3 requests) ${watch.describe()}`);
  });
  await withServer('Parakeet', model, async (transcribe) => {
    watch = watchLoad();
    const rate = await audioSecondsPerSecond(transcribe, minute, 60, 3);
    console.log(
      `Parakeet, 60 s clip (cut at pauses into chunks of <= 50 s): ${rate.toFixed(1)} s of audio per second (median of 3 requests), ` +
        `${(rate / whisperRate).toFixed(2)}x the base Whisper model's ${watch.describe()}`,
    );
    for (const n of [4, 8]) {
      watch = watchLoad();
      const { serial, concurrent } = await seriesThenConcurrent(transcribe, n);
      console.log(
        `Parakeet, jfk.wav: ${n} in series ${(serial / 1000).toFixed(2)} s, ${n} concurrent ${(concurrent / 1000).toFixed(2)} s -> ${(serial / concurrent).toFixed(2)}x ${watch.describe()}`,
      );
    }
  });

  const { samples } = await decodeAudio(fs.readFileSync(JFK_WAV), { sampleRate: 16000 });
  await benchParakeetLive(model, samples, null, ' (1000 ms)');
  await benchParakeetLive(model, samples, 3000, '');
  await benchParakeetLive(model, samples, 12000, ' (longer than the turn: no interim pass)');
}

/** Tokens every audio-LM request asks for: the random model's answers never end by themselves. */
const AUDIO_LM_TOKENS = 32;

/** jfk.wav at `gain`: the same speech, a different clip to a prompt cache. */
function jfkAtGain(gain: number): Buffer {
  const { samples } = readWavMono(JFK_WAV);
  return wavBytes(
    samples.map((x) => x * gain),
    16000,
  );
}

/** POSTs `file` to voxd's /v1/audio/transcriptions for AUDIO_LM_TOKENS greedy tokens; the text. */
async function transcribeAt(base: string, file: Buffer): Promise<string> {
  const body = new FormData();
  body.append('file', new Blob([new Uint8Array(file)]), 'clip.wav');
  body.append('model', 'whisper-1');
  body.append('temperature', '0');
  body.append('max_tokens', String(AUDIO_LM_TOKENS));
  const response = await fetch(`${base}/v1/audio/transcriptions`, { method: 'POST', body });
  if (response.status !== 200) throw new Error(`${base}: HTTP ${response.status} ${await response.text()}`);
  return ((await response.json()) as { text: string }).text;
}

/** llama.cpp's llama-server of the build tree on `files` with `slots` sequences, until `run` ends. */
async function withLlamaServer(files: AudioLmTestModel, slots: number, run: (server: LlamaServer) => Promise<void>): Promise<void> {
  const server = await startLlamaServer(files, { slots, threads: soloThreads });
  try {
    await run(server);
  } finally {
    await server.close();
  }
}

/** Where the time of 1 and of 8 transcriptions goes, from the native batcher's sums: prefill (audio encoder and prompt) and decode steps. */
async function audioLmStages(files: AudioLmTestModel, clips: Buffer[]): Promise<void> {
  const native = await loadNative().AudioLmModel.load(files.model, files.mmproj, { maxBatch: 8 });
  try {
    const samples = await Promise.all(clips.map(async (clip) => (await decodeAudio(clip, { sampleRate: 16000 })).samples));
    await native.transcribe(samples[0] as Float32Array, { maxTokens: 2 });
    for (const n of [1, 8]) {
      const before = native.timings();
      const wall = await timed(() => Promise.all(samples.slice(0, n).map((s) => native.transcribe(s, { maxTokens: AUDIO_LM_TOKENS }))));
      const t = native.timings();
      const steps = t.decodeSteps - before.decodeSteps;
      const rows = t.decodeRows - before.decodeRows;
      const decodeMs = t.decodeMs - before.decodeMs;
      console.log(
        `Qwen3-ASR batcher stages, ${n} job${n > 1 ? 's' : ''} at once: ${(wall / 1000).toFixed(2)} s; prefill ${((t.prefillMs - before.prefillMs) / n).toFixed(0)} ms per job ` +
          `(audio encoder and prompt, one job at a time), decode ${(decodeMs / steps).toFixed(1)} ms per step of ${(rows / steps).toFixed(1)} rows, ${(decodeMs / rows).toFixed(1)} ms per token`,
      );
    }
  } finally {
    native.release();
  }
}

/** Part 6 of the header: Qwen3-ASR on the realistic-size random model, beside llama-server on the same files. */
async function benchAudioLm(files: AudioLmTestModel): Promise<void> {
  console.log(`Audio language model: Qwen3-ASR, realistic-size random model (0.6B shapes, f16), ${AUDIO_LM_TOKENS} tokens per request`);
  const clips = Array.from({ length: 8 }, (_, i) => jfkAtGain(1 - i / 64));
  const runs = 5;
  const voxdOne: number[] = [];
  const serverOne: number[] = [];
  let voxdText = '';
  let serverText = '';
  let voxdSerial = 0;
  let voxdConcurrent = 0;
  const warmUp = (_: Transcribe, port: number): Promise<string> => transcribeAt(`http://127.0.0.1:${port}`, jfkAtGain(0.5));
  await withServer(
    'Qwen3-ASR',
    files.dir,
    async (_, port) => {
      const base = `http://127.0.0.1:${port}`;
      await withLlamaServer(files, 1, async (server) => {
        await server.transcribe(jfkAtGain(0.5), AUDIO_LM_TOKENS); // warm up
        const watch = watchLoad();
        for (let i = 0; i < runs; i++) {
          // A/B interleaved, a clip neither has seen
          voxdOne.push(await timed(async () => (voxdText = await transcribeAt(base, jfkAtGain(0.9 - i / 100)))));
          serverOne.push(await timed(async () => (serverText = await server.transcribe(jfkAtGain(0.8 - i / 100), AUDIO_LM_TOKENS))));
        }
        console.log(
          `Qwen3-ASR, jfk.wav, ${soloThreads} threads: voxd over HTTP ${median(voxdOne).toFixed(0)} ms, llama-server ${median(serverOne).toFixed(0)} ms ` +
            `-> ${(median(voxdOne) / median(serverOne)).toFixed(3)}x llama-server's time (target <= 1.05); texts ${JSON.stringify(voxdText.slice(0, 40))}, ` +
            `${JSON.stringify(serverText.slice(0, 40))} (prompts differ: Qwen3-ASR's own and llama.cpp's instruction) ${watch.describe()}`,
        );
      });
      const watch = watchLoad();
      voxdSerial = await timed(async () => {
        for (const clip of clips) await transcribeAt(base, clip);
      });
      voxdConcurrent = await timed(() => Promise.all(clips.map((clip) => transcribeAt(base, clip))));
      console.log(
        `Qwen3-ASR, 8 jfk.wav clips: voxd 8 in series ${(voxdSerial / 1000).toFixed(2)} s, 8 concurrent ${(voxdConcurrent / 1000).toFixed(2)} s ` +
          `-> ${(voxdSerial / voxdConcurrent).toFixed(2)}x (target >= 3x on 2 cores) ${watch.describe()}`,
      );
    },
    {},
    warmUp,
  );
  await audioLmStages(files, clips);
  await withLlamaServer(files, 8, async (server) => {
    await server.transcribe(jfkAtGain(0.5), AUDIO_LM_TOKENS);
    const watch = watchLoad();
    const concurrent = await timed(() => Promise.all(clips.map((clip) => server.transcribe(clip, AUDIO_LM_TOKENS))));
    console.log(
      `Qwen3-ASR, the same 8 at once on llama-server -np 8: ${(concurrent / 1000).toFixed(2)} s -> voxd's throughput ` +
        `${(concurrent / voxdConcurrent).toFixed(2)}x llama-server's (target >= 1.0) ${watch.describe()}`,
    );
  });
}

const generator = (await import(pathToFileURL(path.join(root, 'scripts', 'make-whisper-test-model.mjs')).href)) as {
  makeWhisperTestModel(options: { size: 'tiny' | 'base' }): Promise<string>;
};
const parakeetGenerator = (await import(pathToFileURL(path.join(root, 'scripts', 'make-parakeet-test-model.mjs')).href)) as {
  makeParakeetTestModel(options: { size: 'tiny' | 'realistic' }): Promise<string>;
};

const asrGenerator = (await import(pathToFileURL(path.join(root, 'scripts', 'make-asr-test-model.mjs')).href)) as {
  makeAsrTestModel(options: { arch: 'qwen3asr'; size: 'realistic' }): Promise<{ dir: string; model: string; mmproj: string }>;
};

console.log(`voxd STT benchmark on ${os.availableParallelism()} cores (${os.cpus()[0]?.model ?? 'unknown CPU'})`);
const only = ['--parakeet-only', '--audio-lm-only'].find((flag) => process.argv.includes(flag));
const baseModel = await generator.makeWhisperTestModel({ size: 'base' });
if (!only) {
  await benchDecoder(10);
  await benchAgainstWhisperCli(baseModel, 7);
  await benchConcurrency('built-in recognizer (sphinx), jfk.wav', 'sphinx', 4, '>= 1.7x');
  await benchBatchedWhisper(baseModel);
}
if (!only || only === '--parakeet-only') await benchParakeet(await parakeetGenerator.makeParakeetTestModel({ size: 'realistic' }), baseModel);
if (!only || only === '--audio-lm-only') await benchAudioLm(await asrGenerator.makeAsrTestModel({ arch: 'qwen3asr', size: 'realistic' }));
