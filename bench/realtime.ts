/**
 * Realtime transcription benchmark (`npm run bench:realtime`): N sessions of WS /v1/realtime stream a speech clip at
 * real-time pace with the built-in recognizer (`sphinx`, manual commits), for N = 1, 4 and 8 at once.
 *
 * The clip is the three shared LibriVox recordings back to back (18.4 s; pocketsphinx's VAD
 * hears two utterances, the last 11 s long). Every session sends
 * session.update (16 kHz PCM16, model sphinx, no turn detection), then one 100 ms append every 100 ms of wall clock
 * (drift-free: append k is due at start + k * 100 ms; the sessions' starts are spread over one append period, as
 * independent clients' would be), then input_audio_buffer.commit right after the last append, and waits for
 * `conversation.item.input_audio_transcription.completed`.
 *
 * The engine's own time, the baseline the delays are compared with: the same clip replayed in this process straight
 * into a `sphinx` streaming session (no server, no scheduler, no WebSocket, nothing else running), in the same 100 ms
 * chunks. pocketsphinx decodes incrementally, so by the time the last chunk arrives most of the last utterance is
 * decoded; what is left is the last chunk's feed and `finish` (the end of the utterance and its fwdflat and bestpath
 * passes over the whole last segment). The time of that last feed plus `finish` is "the engine's own decode time of
 * the last segment": what a server with no overhead of its own would need from the last chunk to the transcript.
 * The offline decode of the last utterance alone (`transcribe`, much longer, since it does all the work at once) is
 * printed for comparison. The replay also says which chunk's feed ends each earlier utterance and how long that feed
 * took, which is how a live session's mid-stream deltas are checked. Then the engine's capacity on this machine:
 * eight streams through the engine alone, as fast as it goes, as many running at once as the server's scheduler lets.
 *
 * A session kept up with real time when
 *  - its sender was never held back by the server: the socket never had unsent bytes queued when the next append was
 *    due (no backpressure). How late the client's own timers fired is printed too but not judged: the clients share
 *    the process and the cores with the server, the pacing does not drift (append k is due at start + k * 100 ms
 *    whenever append k - 1 went out), and delays are counted from when an append really went out;
 *  - the server never fell behind: each utterance's words (the delta that the decoder's VAD releases mid-stream, and
 *    `completed` after the commit) arrived at most 500 ms later than the engine alone needs after the chunk that ends
 *    the utterance (the replay's time for that chunk; for the last one, its last feed plus `finish`). A server that
 *    had fallen behind the audio by more than that would be late by at least as much;
 *  - the server's own lag metric agrees: `voxd_realtime_fell_behind_total` (a message waited over 2 s) did not grow.
 * Each N runs twice. "Together": the sessions start (and commit) within one append period of each other, so their
 * utterance ends and last `finish`es meet in the model's queue: with C jobs at once (--model-concurrency, the core
 * count by default) the engine alone needs ceil(N / C) of them in a row for the last session, and that is the
 * engine's time the delays are compared with.
 * "Staggered": the starts are spread evenly over the clip, as independent clients' would be, so N sessions stream at
 * once in the steady state and their commits do not meet.
 * The target (issue 5): 8 sessions keep up, and the last chunk → completed delay stays within 500 ms of the engine's
 * own decode time of the last segment.
 *
 * First, the resampler a live session runs on every append whose rate is not the model's: 20 s of a tone at each
 * common client rate through a `StreamResampler` to 16 kHz in 100 ms chunks, as seconds of audio per second.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { pino } from 'pino';
import WebSocket from 'ws';
import { resolveConfig } from '../src/config.js';
import { loadSphinxModel } from '../src/engines/sphinx.js';
import { StreamResampler } from '../src/services/audio/resample.js';
import { concatSamples } from '../src/engines/samples.js';
import { startServer } from '../src/server.js';
import { readWavMono } from '../test/helpers/wav.js';
import { median } from './stats.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const speech = path.join(root, '..', 'shared', 'audio', 'speech');
const CLIPS = ['librivox-0870.wav', 'librivox-0890.wav', 'librivox-0920.wav'];
const RATE = 16000;
const CHUNK_MS = 100;
const CHUNK = (RATE * CHUNK_MS) / 1000;
const SLACK_MS = 500;
const SESSIONS = [1, 4, 8];
/** Jobs a model runs at once on the server below (its --model-concurrency default). */
const cores = os.availableParallelism();
/** Streams of the engine-alone capacity check: as many as the most sessions. */
const CAPACITY_STREAMS = Math.max(...SESSIONS);

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));

/** The clips at 16 kHz mono, back to back (resampled with the server's own resampler if a clip is not 16 kHz). */
function loadClip(): Float32Array {
  const parts = CLIPS.map((file) => {
    const { sampleRate, samples } = readWavMono(path.join(speech, file));
    if (sampleRate === RATE) return samples;
    const resampler = new StreamResampler(sampleRate, RATE);
    return Float32Array.from([...resampler.process(samples), ...resampler.flush()]);
  });
  return concatSamples(parts);
}

function chunksOf(clip: Float32Array): Float32Array[] {
  const chunks: Float32Array[] = [];
  for (let at = 0; at < clip.length; at += CHUNK) chunks.push(clip.subarray(at, at + CHUNK));
  return chunks;
}

function pcm16Base64(samples: Float32Array): string {
  const out = Buffer.alloc(samples.length * 2);
  samples.forEach((v, i) => out.writeInt16LE(Math.max(-32768, Math.min(32767, Math.round(v * 32768))), i * 2));
  return out.toString('base64');
}

interface Replay {
  /** Chunks whose feed released an utterance's words: chunk index, the words, the feed's time (ms). */
  utterances: { chunk: number; text: string; ms: number }[];
  /** The last chunk's feed plus finish, ms: the engine's own time from the last audio to the transcript. */
  lastMs: number;
  transcript: string;
  /** Offline transcription of the last utterance's audio alone (from the chunk after the previous one ended). */
  offlineLastMs: number;
  offlineLastSeconds: number;
  /** `CAPACITY_STREAMS` whole-clip streams at once through the engine alone, as fast as it goes: wall ms. */
  capacityMs: number;
  /** Share of the cores other processes took meanwhile (null where unknown). */
  capacityOthers: number | null;
}

/** The clip through a sphinx streaming session in this process, `runs` times; medians of the timings. */
async function replay(chunks: Float32Array[], runs: number): Promise<Replay> {
  const model = await loadSphinxModel();
  try {
    const results: Replay[] = [];
    for (let run = 0; run < runs + 1; run++) {
      const session = await model.createStreamingSession!();
      const utterances: Replay['utterances'] = [];
      let transcript = '';
      let lastFeedMs = 0;
      for (let i = 0; i < chunks.length; i++) {
        const start = performance.now();
        const text = await session.feed(chunks[i] as Float32Array);
        const ms = performance.now() - start;
        transcript += text;
        if (text) utterances.push({ chunk: i, text, ms });
        if (i === chunks.length - 1) lastFeedMs = ms;
      }
      const start = performance.now();
      const end = await session.finish();
      const finishMs = performance.now() - start;
      await session.close();
      transcript += end.delta;
      const from = ((utterances.at(-1)?.chunk ?? -1) + 1) * CHUNK;
      const last = Float32Array.from(chunks.flatMap((c) => [...c])).subarray(from);
      const offlineStart = performance.now();
      await model.transcribe(last);
      const offlineLastMs = performance.now() - offlineStart;
      // run 0 warms up
      if (run > 0)
        results.push({
          utterances,
          lastMs: lastFeedMs + finishMs,
          transcript,
          offlineLastMs,
          offlineLastSeconds: last.length / RATE,
          capacityMs: 0,
          capacityOthers: null,
        });
    }
    // capacity: many streams at once, as many running as the server's scheduler lets run (--model-concurrency, the
    // core count by default), each fed its chunks back to back
    const slots = { free: cores, waiting: [] as (() => void)[] };
    const slot = async <T>(job: () => Promise<T>): Promise<T> => {
      if (slots.free > 0) slots.free--;
      else await new Promise<void>((resolve) => slots.waiting.push(resolve));
      try {
        return await job();
      } finally {
        const next = slots.waiting.shift();
        if (next) next();
        else slots.free++;
      }
    };
    const capacityStart = performance.now();
    const machineStart = machineBusySeconds();
    const ownStart = process.cpuUsage();
    await Promise.all(
      Array.from({ length: CAPACITY_STREAMS }, async () => {
        const session = await model.createStreamingSession!();
        for (const chunk of chunks) await slot(() => session.feed(chunk));
        await slot(() => session.finish());
        await session.close();
      }),
    );
    const capacityMs = performance.now() - capacityStart;
    const machineEnd = machineBusySeconds();
    const ownCpu = process.cpuUsage(ownStart);
    const capacityOthers =
      machineEnd === null || machineStart === null ? null : (machineEnd - machineStart - (ownCpu.user + ownCpu.system) / 1e6) / (capacityMs / 1000) / cores;
    const first = results[0] as Replay;
    return {
      capacityMs,
      capacityOthers,
      utterances: first.utterances.map((u, k) => ({ ...u, ms: median(results.map((r) => r.utterances[k]?.ms ?? NaN)) })),
      lastMs: median(results.map((r) => r.lastMs)),
      transcript: first.transcript,
      offlineLastMs: median(results.map((r) => r.offlineLastMs)),
      offlineLastSeconds: first.offlineLastSeconds,
    };
  } finally {
    await model.dispose();
  }
}

interface SessionResult {
  /** Last chunk sent → completed, ms. */
  delay: number;
  /** Most an append went out after its due time, ms. */
  lateMs: number;
  /** Most bytes the socket still held unsent when an append was due. */
  buffered: number;
  /** Mid-stream utterances: how much later than the engine alone needs their words arrived, ms (worst). */
  deltaOverMs: number;
  /** The mid-stream deltas matched the replay's (same words, same utterances). */
  deltasMatch: boolean;
  transcript: string;
}

/** One session: configure, stream the chunks paced by the wall clock from `t0`, commit, wait for completed. */
async function streamSession(url: string, chunks: Float32Array[], audio: string[], reference: Replay, t0: number, rounds: number): Promise<SessionResult> {
  const socket = new WebSocket(url);
  const arrivals: { type: string; at: number; event: Record<string, unknown> }[] = [];
  let waiting: { type: string; resolve: (event: Record<string, unknown>) => void } | null = null;
  socket.on('message', (data) => {
    const event = JSON.parse(String(data)) as Record<string, unknown>;
    arrivals.push({ type: event.type as string, at: performance.now(), event });
    if (event.type === 'error') console.error(`error event: ${JSON.stringify(event.error)}`);
    if (waiting && event.type === waiting.type) waiting.resolve(event);
  });
  const next = (type: string): Promise<Record<string, unknown>> => {
    const seen = arrivals.find((a) => a.type === type);
    if (seen) return Promise.resolve(seen.event);
    return new Promise((resolve) => (waiting = { type, resolve }));
  };
  const closed = new Promise((resolve) => socket.once('close', resolve));
  try {
    await next('session.created');
    socket.send(
      JSON.stringify({
        type: 'session.update',
        session: {
          type: 'transcription',
          audio: { input: { format: { type: 'audio/pcm', rate: RATE }, transcription: { model: 'sphinx' }, turn_detection: null } },
        },
      }),
    );
    await next('session.updated');
    const sentAt: number[] = [];
    let lateMs = 0;
    let buffered = 0;
    for (let i = 0; i < chunks.length; i++) {
      const due = t0 + i * CHUNK_MS;
      await sleep(due - performance.now());
      const now = performance.now();
      lateMs = Math.max(lateMs, now - due);
      buffered = Math.max(buffered, socket.bufferedAmount);
      socket.send(JSON.stringify({ type: 'input_audio_buffer.append', audio: audio[i] }));
      sentAt.push(now);
    }
    socket.send(JSON.stringify({ type: 'input_audio_buffer.commit' }));
    const completed = await next('conversation.item.input_audio_transcription.completed');
    const completedAt = (arrivals.find((a) => a.type === 'conversation.item.input_audio_transcription.completed') as { at: number }).at;
    const deltas = arrivals.filter((a) => a.type === 'conversation.item.input_audio_transcription.delta' && a.at < completedAt);
    // the deltas the decoder's VAD released before the commit, matched to the replay's utterances in order
    const midStream = deltas.slice(0, reference.utterances.length);
    const deltasMatch =
      midStream.length === reference.utterances.length && midStream.every((d, k) => d.event.delta === (reference.utterances[k] as { text: string }).text);
    let deltaOverMs = -Infinity;
    midStream.forEach((d, k) => {
      const utterance = reference.utterances[k] as Replay['utterances'][number];
      deltaOverMs = Math.max(deltaOverMs, d.at - (sentAt[utterance.chunk] as number) - rounds * utterance.ms);
    });
    return { delay: completedAt - (sentAt.at(-1) as number), lateMs, buffered, deltaOverMs, deltasMatch, transcript: completed.transcript as string };
  } finally {
    socket.close();
    await closed;
  }
}

/** CPU seconds the whole machine spent busy (Linux /proc/stat; null elsewhere), to tell what other processes took. */
function machineBusySeconds(): number | null {
  try {
    const fields = (fs.readFileSync('/proc/stat', 'utf8').split('\n')[0] as string).trim().split(/\s+/).slice(1).map(Number);
    const idle = (fields[3] ?? 0) + (fields[4] ?? 0); // idle + iowait
    return (fields.reduce((a, b) => a + b, 0) - idle) / 100; // USER_HZ
  } catch {
    return null;
  }
}

/** The server's own view of its live sessions (GET /metrics): times a session fell behind, messages that waited. */
async function lagMetrics(base: string): Promise<{ fellBehind: number; messages: number; over500ms: number }> {
  const text = await (await fetch(`${base}/metrics`)).text();
  const value = (pattern: RegExp): number => [...text.matchAll(pattern)].reduce((sum, m) => sum + Number(m[1]), 0);
  const messages = value(/^voxd_realtime_lag_seconds_count\{[^}]*endpoint="\/v1\/realtime"[^}]*\} (\S+)$/gm);
  return {
    fellBehind: value(/^voxd_realtime_fell_behind_total\{[^}]*endpoint="\/v1\/realtime"[^}]*\} (\S+)$/gm),
    messages,
    over500ms: messages - value(/^voxd_realtime_lag_seconds_bucket\{[^}]*endpoint="\/v1\/realtime"[^}]*le="0\.5"[^}]*\} (\S+)$/gm),
  };
}

/**
 * N sessions whose starts are spread evenly over `spreadMs`: one append period (they commit together, the worst
 * case for the last `finish`es) or the clip's length (staggered, the steady state of independent clients).
 */
async function benchSessions(base: string, n: number, spreadMs: number, chunks: Float32Array[], audio: string[], reference: Replay): Promise<void> {
  const url = `${base.replace('http', 'ws')}/v1/realtime?intent=transcription`;
  const together = spreadMs <= CHUNK_MS;
  // sessions that end an utterance together need the engine that many times in a row, C at once
  const rounds = together ? Math.ceil(n / cores) : 1;
  const t0 = performance.now() + 500; // time to open the sockets and configure the sessions
  const before = await lagMetrics(base);
  const loop = performance.eventLoopUtilization();
  const cpuBefore = { machine: machineBusySeconds(), own: process.cpuUsage(), at: performance.now() };
  const results = await Promise.all(Array.from({ length: n }, (_, s) => streamSession(url, chunks, audio, reference, t0 + (s * spreadMs) / n, rounds)));
  const busy = performance.eventLoopUtilization(loop).utilization;
  const machineAfter = machineBusySeconds();
  const own = process.cpuUsage(cpuBefore.own);
  const others =
    machineAfter === null || cpuBefore.machine === null
      ? null
      : (machineAfter - cpuBefore.machine - (own.user + own.system) / 1e6) / ((performance.now() - cpuBefore.at) / 1000) / cores;
  const after = await lagMetrics(base);
  const fellBehind = after.fellBehind - before.fellBehind;
  const delays = results.map((r) => r.delay);
  const worst = Math.max(...delays);
  const engineMs = rounds * reference.lastMs;
  const over = worst - engineMs;
  const senderOk = results.every((r) => r.buffered === 0);
  const serverOk = results.every((r) => r.deltaOverMs <= SLACK_MS) && over <= SLACK_MS && fellBehind === 0;
  const same = results.every((r) => r.transcript === reference.transcript && r.deltasMatch);
  console.log(
    `N=${n}${n > 1 ? (together ? ' together' : ' staggered') : ''}: last chunk -> completed median ${median(delays).toFixed(0)} ms, worst ${worst.toFixed(0)} ms ` +
      `(engine decode of last segment ${reference.lastMs.toFixed(0)} ms${rounds > 1 ? `, ${rounds} in a row for simultaneous commits ${engineMs.toFixed(0)} ms` : ''}; worst ${over >= 0 ? '+' : ''}${over.toFixed(0)} ms ${over <= SLACK_MS ? '<=' : '>'} ${SLACK_MS} ms ${over <= SLACK_MS ? 'ok' : 'FAIL'}), ` +
      `all kept up: ${senderOk && serverOk ? 'yes' : 'NO'} ` +
      `(client timers late by at most ${Math.max(...results.map((r) => r.lateMs)).toFixed(0)} ms, ${Math.max(...results.map((r) => r.buffered))} bytes held back; ` +
      `mid-stream words at most ${Math.max(...results.map((r) => r.deltaOverMs)).toFixed(0)} ms over the engine's time${rounds > 1 ? ` (${rounds} in a row)` : ''}; server: ${fellBehind} fell behind, ` +
      `${after.over500ms - before.over500ms} of ${after.messages - before.messages} messages waited > 0.5 s), ` +
      `transcripts ${same ? 'identical to the replay' : 'DIFFER from the replay'}; event loop (server and clients) busy ${(busy * 100).toFixed(0)}%` +
      (others === null ? '' : `, other processes took ${Math.max(0, others * 100).toFixed(0)}% of the cores`),
  );
}

/** Seconds of audio per second through the live sessions' resampler to 16 kHz, in 100 ms chunks, per client rate. */
function resamplerThroughput(): string[] {
  const seconds = 20;
  return [24000, 44100, 48000].map((rate) => {
    const tone = Float32Array.from({ length: rate * seconds }, (_, i) => 0.5 * Math.sin((2 * Math.PI * 440 * i) / rate));
    const chunk = (rate * CHUNK_MS) / 1000;
    const resampler = new StreamResampler(rate, RATE);
    const start = performance.now();
    for (let at = 0; at < tone.length; at += chunk) resampler.process(tone.subarray(at, at + chunk));
    resampler.flush();
    const elapsed = (performance.now() - start) / 1000;
    return `${rate} -> ${RATE} Hz ${Math.round(seconds / elapsed)}x (${((elapsed / (tone.length / chunk)) * 1e6).toFixed(1)} µs a chunk)`;
  });
}

console.log(`voxd realtime benchmark on ${os.availableParallelism()} cores (${os.cpus()[0]?.model ?? 'unknown CPU'})`);
console.log(`resampler, ${CHUNK_MS} ms chunks, seconds of audio per second: ${resamplerThroughput().join(', ')}`);
const clip = loadClip();
const chunks = chunksOf(clip);
const audio = chunks.map(pcm16Base64);
const reference = await replay(chunks, 3);
console.log(
  `clip: ${CLIPS.join(' + ')}, ${(clip.length / RATE).toFixed(1)} s, ${reference.utterances.length + 1} utterances, ${chunks.length} appends of ${CHUNK_MS} ms`,
);
console.log(
  `engine alone (in-process replay, idle): last chunk's feed + finish ${reference.lastMs.toFixed(0)} ms; ` +
    `offline decode of the last utterance (${reference.offlineLastSeconds.toFixed(1)} s) ${reference.offlineLastMs.toFixed(0)} ms; ` +
    `mid-stream utterance ends ${reference.utterances.map((u) => `${u.ms.toFixed(0)} ms at ${((u.chunk + 1) * CHUNK_MS) / 1000} s`).join(', ')}`,
);
const audioSeconds = clip.length / RATE;
const capacity = (CAPACITY_STREAMS * audioSeconds) / (reference.capacityMs / 1000);
console.log(
  `engine alone, ${CAPACITY_STREAMS} streams at once (${cores} running, as the scheduler allows), as fast as it goes: ` +
    `${(reference.capacityMs / 1000).toFixed(1)} s for ${audioSeconds.toFixed(1)} s of audio each -> ${capacity.toFixed(1)}x real time in all, ` +
    `enough for at most ${Math.floor(capacity)} sessions at real-time pace on this machine` +
    (reference.capacityOthers === null ? '' : ` (other processes took ${Math.max(0, reference.capacityOthers * 100).toFixed(0)}% of the cores)`),
);

const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'voxd-bench-realtime-'));
const config = resolveConfig({ host: '127.0.0.1', port: 0, logDir: path.join(scratch, 'logs') }, {});
const server = await startServer(config, pino({ level: 'silent' }), { HF_ENDPOINT: 'http://127.0.0.1:9', HF_HUB_CACHE: path.join(scratch, 'hub') });
const base = `http://127.0.0.1:${server.port}`;
try {
  const load = await fetch(`${base}/v1/models?model_name=sphinx`, { method: 'POST' });
  if (load.status !== 200) throw new Error(`loading sphinx: HTTP ${load.status} ${await load.text()}`);
  for (const n of SESSIONS) {
    await benchSessions(base, n, CHUNK_MS, chunks, audio, reference);
    if (n > 1) await benchSessions(base, n, (chunks.length * CHUNK_MS * (n - 1)) / n, chunks, audio, reference);
  }
} finally {
  await server.close();
  fs.rmSync(scratch, { recursive: true, force: true });
}
