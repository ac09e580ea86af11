/**
 * Memory of concurrent large uploads (`npm run bench:uploads`): starts a real server (`node dist/src/cli.js serve`)
 * and sends it `--count` (12) uploads of a `--mb` (95) MB WAV at once, LibriVox speech concatenated to that size
 * (16 kHz mono PCM16), to `--route` (`transcriptions` or `separations`). It prints each answer's status, the
 * server's peak RSS (VmHWM) and its RSS `--settle-s` (5) seconds after the burst.
 *
 * A transcription of that much audio by the built-in `sphinx` takes many minutes, so by default the server runs
 * with `--max-audio-seconds` one second short of the upload: the whole file is received and decoded (the memory
 * this bench is about), then refused with `400 invalid_audio`. `--transcribe` lets the transcriptions run.
 * Everything after `--` goes to `voxd serve` as flags (`-- --max-inflight-upload-mb 1024`); `--env NAME=VALUE`
 * (repeatable) sets a variable of the server (`--env MALLOC_ARENA_MAX=2`).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { readWavMono, wavBytes } from '../test/helpers/wav.js';
import { SHARED } from '../test/helpers/paths.js';
import { startCliServer, stopCliServer } from './cli-server.js';

const { values: options, positionals: serverFlags } = parseArgs({
  options: {
    count: { type: 'string', default: '12' },
    mb: { type: 'string', default: '95' },
    route: { type: 'string', default: 'transcriptions' },
    transcribe: { type: 'boolean', default: false },
    'settle-s': { type: 'string', default: '5' },
    env: { type: 'string', multiple: true, default: [] },
  },
  allowPositionals: true,
});
const count = Number(options.count);
const route = options.route;
if (route !== 'transcriptions' && route !== 'separations') throw new Error('--route is transcriptions or separations');

const RATE = 16000;
const clips = ['librivox-0870.wav', 'librivox-0890.wav', 'librivox-0920.wav'].map((name) => readWavMono(path.join(SHARED, 'audio', 'speech', name)).samples);
const totalSamples = Math.floor((Number(options.mb) * 1e6 - 44) / 2);
const speech = new Float32Array(totalSamples);
for (let at = 0, i = 0; at < totalSamples; i++) {
  const clip = clips[i % clips.length] as Float32Array;
  speech.set(clip.subarray(0, Math.min(clip.length, totalSamples - at)), at);
  at += clip.length;
}
const wav = wavBytes(speech, RATE);
const seconds = totalSamples / RATE;

function procStatus(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  return Math.round(Number(new RegExp(`${field}:\\s+(\\d+)`).exec(status)?.[1] ?? 0) / 1024);
}

const env = Object.fromEntries(options.env.map((pair) => pair.split('=', 2) as [string, string]));
const flags = [...serverFlags];
if (route === 'transcriptions' && !options.transcribe) flags.push('--max-audio-seconds', String(Math.floor(seconds) - 1));
if (route === 'separations') flags.push('--max-separation-seconds', String(Math.ceil(seconds) + 1));
const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'voxd-uploads-'));
const server = await startCliServer(scratch, ['--log-level', 'warn', ...flags], env);
try {
  console.log(
    `voxd (pid ${server.pid}) ${flags.join(' ')}${options.env.length ? ` with ${options.env.join(' ')}` : ''}: ` +
      `${count} x ${(wav.length / 1e6).toFixed(1)} MB WAV (${Math.round(seconds)} s of 16 kHz mono) to /v1/audio/${route}`,
  );
  const idle = procStatus(server.pid, 'VmRSS');
  const blob = new Blob([new Uint8Array(wav)], { type: 'audio/wav' });
  const started = performance.now();
  const answers = await Promise.all(
    Array.from({ length: count }, async () => {
      const form = new FormData();
      form.append('model', route === 'transcriptions' ? 'sphinx' : 'spectral');
      if (route === 'separations') form.append('description', 'vocals');
      form.append('file', blob, 'long.wav');
      const response = await fetch(`${server.base}/v1/audio/${route}`, { method: 'POST', body: form }).catch((error: Error) => error);
      if (response instanceof Error) return `failed: ${String((response.cause as Error | undefined)?.message ?? response.message)}`;
      // the answer read and dropped: a separation's is two WAVs as base64
      let code = '';
      if (response.headers.get('content-type')?.startsWith('application/json') && response.status !== 200) {
        code = ((await response.json()) as { error: { code: string } }).error.code;
      } else {
        for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) void chunk;
      }
      return `${response.status}${code ? ` ${code}` : ''}${response.headers.get('retry-after') ? ` (Retry-After ${response.headers.get('retry-after')})` : ''}`;
    }),
  );
  const ms = performance.now() - started;
  if (server.child.exitCode !== null) throw new Error(`the server exited (${server.child.exitCode}): ${server.stderr()}`);
  const peak = procStatus(server.pid, 'VmHWM');
  await sleep(Number(options['settle-s']) * 1000);
  const after = procStatus(server.pid, 'VmRSS');
  const tally = new Map<string, number>();
  for (const answer of answers) tally.set(answer, (tally.get(answer) ?? 0) + 1);
  console.log(`answers: ${[...tally].map(([answer, n]) => `${n} x ${answer}`).join(', ')} in ${(ms / 1000).toFixed(1)} s`);
  const admitted = answers.filter((answer) => !answer.startsWith('503')).length;
  console.log(
    `server RSS: ${idle} MiB idle, peak ${peak} MiB (${Math.round((peak - idle) / admitted)} MiB above idle per upload admitted), ` +
      `${after} MiB ${options['settle-s']} s after the burst`,
  );
} finally {
  await stopCliServer(server);
  fs.rmSync(scratch, { recursive: true, force: true });
}
