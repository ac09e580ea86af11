/**
 * Live-session memory soak (`npm run bench:soak`, issue 14): does a server give back the memory of live sessions
 * once they are closed?
 *
 * Starts a real server (`node dist/src/cli.js serve`) as a child process, then runs rounds until `--rounds` or
 * `--minutes` is reached (10 minutes by default). A round is `--sessions` concurrent `WS /v1/realtime?model=sphinx`
 * sessions, each appending 3 s of LibriVox speech as 24 kHz PCM16 (100 ms base64 appends, the session's default
 * format, manual turns), committing, waiting for `conversation.item.input_audio_transcription.completed` and closing,
 * while `--http` transcriptions (sphinx) and as many speeches (tts-1, the built-in flite voice) run beside them.
 * Once every socket and request of the round is done, the server counts no open session (`voxd_realtime_sessions`)
 * and `--settle-ms` more have passed (the engines free their streams on worker threads), the server's RSS (VmRSS of
 * /proc/<pid>/status) is printed with its ratio to the first round's, beside the highest RSS sampled (every 200 ms)
 * while the round ran.
 *
 * The target: RSS after every round within 10 % of the first round's. The exit status is 1 when it was missed or
 * a session or request failed. `--env NAME=VALUE` (repeatable) sets the server's environment, e.g.
 * `--env MALLOC_ARENA_MAX=2`.
 */
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import WebSocket from 'ws';
import { StreamResampler } from '../src/services/audio/resample.js';
import { rssMiB, startCliServer, stopCliServer } from './cli-server.js';
import { pcm16, readWavMono, wavBytes } from '../test/helpers/wav.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const speechDir = path.join(root, '..', 'shared', 'audio', 'speech');
const CLIPS = ['librivox-0870.wav', 'librivox-0890.wav', 'librivox-0920.wav'];
const SESSION_RATE = 24000; // the realtime protocol's default input rate
const TURN_SECONDS = 3;
const APPEND_MS = 100;
const TARGET_RATIO = 1.1;
const SESSION_TIMEOUT_MS = 120_000;
const SPEECH_TEXT = 'The quick brown fox jumps over the lazy dog while the server keeps every session apart.';

const { values: flags } = parseArgs({
  options: {
    rounds: { type: 'string' },
    sessions: { type: 'string', default: '40' },
    minutes: { type: 'string' },
    http: { type: 'string', default: '4' },
    'settle-ms': { type: 'string', default: '2000' },
    env: { type: 'string', multiple: true, default: [] },
  },
});

function nonNegative(name: string, value: string | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isFinite(n) || n < 0) throw new Error(`--${name} must be a number >= 0, not ${value}`);
  return n;
}

const rounds = nonNegative('rounds', flags.rounds, Infinity);
const sessions = Math.floor(nonNegative('sessions', flags.sessions, 40));
// with --rounds alone the rounds decide; --minutes caps them when given too
const minutes = nonNegative('minutes', flags.minutes, flags.rounds === undefined ? 10 : Infinity);
const httpPerRound = Math.floor(nonNegative('http', flags.http, 4));
const settleMs = nonNegative('settle-ms', flags['settle-ms'], 2000);
const serverEnv = Object.fromEntries(
  (flags.env as string[]).map((pair) => {
    const at = pair.indexOf('=');
    if (at <= 0) throw new Error(`--env takes NAME=VALUE, not ${pair}`);
    return [pair.slice(0, at), pair.slice(at + 1)];
  }),
);

/** 3 s windows of the clips at 24 kHz, as the base64 appends of one turn each; sessions take them in turn. */
function turnsOfSpeech(): string[][] {
  const turns: string[][] = [];
  for (const file of CLIPS) {
    const { sampleRate, samples } = readWavMono(path.join(speechDir, file));
    const resampler = new StreamResampler(sampleRate, SESSION_RATE);
    const resampled = Float32Array.from([...resampler.process(samples), ...resampler.flush()]);
    const window = SESSION_RATE * TURN_SECONDS;
    for (let start = 0; start + window <= resampled.length; start += window) {
      const bytes = pcm16(resampled.subarray(start, start + window));
      const step = (SESSION_RATE * APPEND_MS * 2) / 1000;
      const appends: string[] = [];
      for (let at = 0; at < bytes.length; at += step) appends.push(bytes.subarray(at, at + step).toString('base64'));
      turns.push(appends);
    }
  }
  return turns;
}

/** One live session: connect, one committed turn, the transcript, close. Resolves the transcript. */
function liveSession(base: string, appends: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(`${base.replace('http', 'ws')}/v1/realtime?model=sphinx&intent=transcription`);
    let transcript: string | null = null;
    const timer = setTimeout(() => fail(new Error(`no transcript within ${SESSION_TIMEOUT_MS} ms`)), SESSION_TIMEOUT_MS);
    const fail = (error: Error): void => {
      clearTimeout(timer);
      socket.terminate();
      reject(error);
    };
    socket.on('error', fail);
    socket.on('message', (data) => {
      const event = JSON.parse(String(data)) as { type: string; transcript?: string; error?: { message: string } };
      if (event.type === 'session.created') {
        for (const audio of appends) socket.send(JSON.stringify({ type: 'input_audio_buffer.append', audio }));
        socket.send(JSON.stringify({ type: 'input_audio_buffer.commit' }));
      } else if (event.type === 'conversation.item.input_audio_transcription.completed') {
        transcript = event.transcript ?? '';
        socket.close();
      } else if (event.type === 'error') {
        fail(new Error(`server error: ${event.error?.message ?? JSON.stringify(event)}`));
      }
    });
    socket.on('close', () => {
      clearTimeout(timer);
      if (transcript === null) reject(new Error('closed before the transcript'));
      else resolve(transcript);
    });
  });
}

/** Live sessions the server counts as open (voxd_realtime_sessions, every endpoint). */
async function openSessions(base: string): Promise<number> {
  const metrics = await (await fetch(`${base}/metrics`)).text();
  return [...metrics.matchAll(/^voxd_realtime_sessions(?:\{[^}]*\})? (\d+)$/gm)].reduce((sum, m) => sum + Number(m[1]), 0);
}

async function transcription(base: string, wav: Buffer): Promise<void> {
  const form = new FormData();
  form.append('file', new Blob([new Uint8Array(wav)], { type: 'audio/wav' }), 'clip.wav');
  form.append('model', 'sphinx');
  const response = await fetch(`${base}/v1/audio/transcriptions`, { method: 'POST', body: form });
  if (!response.ok) throw new Error(`transcription: ${response.status} ${await response.text()}`);
  await response.arrayBuffer();
}

async function speech(base: string): Promise<void> {
  const response = await fetch(`${base}/v1/audio/speech`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'tts-1', voice: 'alloy', input: SPEECH_TEXT, response_format: 'wav' }),
  });
  if (!response.ok) throw new Error(`speech: ${response.status} ${await response.text()}`);
  await response.arrayBuffer();
}

async function main(): Promise<void> {
  const turns = turnsOfSpeech();
  const clip = readWavMono(path.join(speechDir, CLIPS[0] as string));
  const wav = wavBytes(clip.samples, clip.sampleRate);
  const scratch = await fsp.mkdtemp(path.join(os.tmpdir(), 'voxd-soak-'));
  const server = await startCliServer(scratch, ['--max-realtime-sessions', String(Math.max(100, sessions))], serverEnv);
  const pid = server.pid;
  const limit = Number.isFinite(minutes) ? `${minutes} min` : 'no time limit';
  console.log(
    `voxd soak: server pid ${pid}, ${sessions} sessions + ${httpPerRound} transcriptions + ${httpPerRound} speeches a round, ${Number.isFinite(rounds) ? rounds : '∞'} rounds, ${limit}`,
  );
  if (Object.keys(serverEnv).length) console.log(`server environment: ${JSON.stringify(serverEnv)}`);
  console.log(`RSS at start: ${rssMiB(pid).toFixed(0)} MiB`);
  console.log('round  sessions  http  seconds  peak MiB  RSS MiB  vs round 1');

  const started = performance.now();
  const figures: number[] = [];
  let failures = 0;
  let next = 0;
  try {
    for (let round = 1; round <= rounds && performance.now() - started < minutes * 60_000; round++) {
      const roundStart = performance.now();
      let peak = 0;
      const sampler = setInterval(() => (peak = Math.max(peak, rssMiB(pid))), 200);
      const live = Array.from({ length: sessions }, () => liveSession(server.base, turns[next++ % turns.length] as string[]));
      const http = Array.from({ length: httpPerRound }, () => [transcription(server.base, wav), speech(server.base)]).flat();
      const [liveResults, httpResults] = await Promise.all([Promise.allSettled(live), Promise.allSettled(http)]);
      clearInterval(sampler);
      const liveOk = liveResults.filter((r) => r.status === 'fulfilled' && r.value.length > 0).length;
      const httpOk = httpResults.filter((r) => r.status === 'fulfilled').length;
      for (const r of [...liveResults, ...httpResults]) if (r.status === 'rejected') console.log(`  failed: ${(r.reason as Error).message}`);
      failures += sessions - liveOk + http.length - httpOk;
      const seconds = (performance.now() - roundStart) / 1000;
      for (const deadline = performance.now() + 30_000; (await openSessions(server.base)) > 0 && performance.now() < deadline;) await sleep(100);
      await sleep(settleMs);
      const rss = rssMiB(pid);
      figures.push(rss);
      const ratio = rss / (figures[0] as number);
      console.log(
        `${String(round).padStart(5)}  ${`${liveOk}/${sessions}`.padStart(8)}  ${`${httpOk}/${http.length}`.padStart(4)}  ${seconds.toFixed(1).padStart(7)}  ` +
          `${peak.toFixed(0).padStart(8)}  ${rss.toFixed(0).padStart(7)}  ${ratio.toFixed(3).padStart(10)}`,
      );
    }
  } finally {
    await stopCliServer(server);
    await fsp.rm(scratch, { recursive: true, force: true });
  }
  const first = figures[0] ?? 0;
  const worst = Math.max(...figures);
  const within = figures.every((rss) => rss <= first * TARGET_RATIO);
  console.log(
    `${figures.length} rounds in ${((performance.now() - started) / 60_000).toFixed(1)} min; RSS after round 1 ${first.toFixed(0)} MiB, ` +
      `highest ${worst.toFixed(0)} MiB (${(worst / first).toFixed(3)}x), last ${(figures.at(-1) ?? 0).toFixed(0)} MiB; ` +
      `${within ? 'every round within' : 'MISSED:'} 10 % of round 1; ${failures} failed sessions or requests`,
  );
  if (!within || failures > 0) process.exitCode = 1;
}

await main();
