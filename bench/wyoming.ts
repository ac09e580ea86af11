/**
 * Wyoming next to HTTP (`npm run bench:wyoming`), on the built-in models (`sphinx`, `flite`) of one in-process server:
 *  1. speech-to-text: jfk.wav (16 kHz, 16-bit mono, as Home Assistant sends it) over Wyoming, the time from
 *     `audio-stop` to `transcript` (the audio went out before), next to POST /v1/audio/transcriptions of the same
 *     audio as a WAV, the time from the request's last byte to the answer;
 *  2. text-to-speech: a two-sentence text, the time from `synthesize` to the first `audio-chunk`, next to POST
 *     /v1/audio/speech (streamed pcm) to the first body byte, and to the whole answer both ways.
 * Each pair is measured in turns (a warm-up of each, then RUNS rounds), medians printed with their ratio.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { pino } from 'pino';
import { resolveConfig } from '../src/config.js';
import { decodeAudio } from '../src/services/audio/decode.js';
import { startServer } from '../src/server.js';
import { wavBytes } from '../test/helpers/wav.js';
import { connectWyoming } from '../test/helpers/wyoming.js';
import { median } from './stats.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const JFK_WAV = path.join(root, '..', 'shared', 'audio', 'speech', 'jfk.wav');
const RUNS = 7;
const TEXT = 'Turning on the kitchen lights. The temperature outside is twelve degrees.';
const FORMAT = { rate: 16000, width: 2, channels: 1 };

const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'voxd-bench-wyoming-'));
const config = resolveConfig({ host: '127.0.0.1', port: 0, logDir: path.join(scratch, 'logs'), wyomingPort: 0, sttModel: 'sphinx', ttsModel: 'flite' }, {});
const server = await startServer(config, pino({ level: 'silent' }), { HF_ENDPOINT: 'http://127.0.0.1:9', HF_HUB_CACHE: path.join(scratch, 'hub') });
const base = `http://127.0.0.1:${server.port}`;
const wyomingPort = server.wyomingPort as number;
const wav = wavBytes((await decodeAudio(fs.readFileSync(JFK_WAV), { sampleRate: 16000 })).samples, 16000);
const pcm = wav.subarray(44);

/** Wyoming: the audio sent, then the time from audio-stop to the transcript. */
async function wyomingTranscript(): Promise<number> {
  const client = await connectWyoming(wyomingPort);
  client.send('transcribe', { language: 'en' });
  client.send('audio-start', FORMAT);
  for (let at = 0; at < pcm.length; at += 2048) client.send('audio-chunk', FORMAT, pcm.subarray(at, at + 2048));
  const start = performance.now();
  client.send('audio-stop');
  await client.until('transcript', 120_000);
  const ms = performance.now() - start;
  client.close();
  return ms;
}

/** HTTP: the whole request, less nothing (its upload is local and small), to the answer. */
async function httpTranscript(): Promise<number> {
  const form = new FormData();
  form.append('model', 'sphinx');
  form.append('file', new Blob([new Uint8Array(wav)]), 'jfk.wav');
  const start = performance.now();
  const response = await fetch(`${base}/v1/audio/transcriptions`, { method: 'POST', body: form });
  await response.json();
  return performance.now() - start;
}

/** Wyoming: synthesize → first audio-chunk, and → audio-stop. */
async function wyomingSpeech(): Promise<[number, number]> {
  const client = await connectWyoming(wyomingPort);
  const start = performance.now();
  client.send('synthesize', { text: TEXT });
  await client.until('audio-chunk');
  const first = performance.now() - start;
  await client.until('audio-stop');
  const whole = performance.now() - start;
  client.close();
  return [first, whole];
}

/** HTTP: POST /v1/audio/speech streamed pcm → first body byte, and → the end. */
async function httpSpeech(): Promise<[number, number]> {
  const start = performance.now();
  const response = await fetch(`${base}/v1/audio/speech`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'flite', input: TEXT, response_format: 'pcm', stream: true }),
  });
  const reader = response.body!.getReader();
  await reader.read();
  const first = performance.now() - start;
  while (!(await reader.read()).done);
  return [first, performance.now() - start];
}

function line(label: string, ms: number[]): string {
  return `  ${label.padEnd(44)} median ${median(ms).toFixed(1)} ms (${ms.map((m) => m.toFixed(0)).join(' ')})`;
}

try {
  console.log(
    `voxd Wyoming benchmark on ${os.availableParallelism()} cores (${os.cpus()[0]?.model ?? 'unknown CPU'}); sphinx and flite, ${RUNS} rounds in turns`,
  );
  await wyomingTranscript();
  await httpTranscript();
  const wyomingStt: number[] = [];
  const httpStt: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    wyomingStt.push(await wyomingTranscript());
    httpStt.push(await httpTranscript());
  }
  console.log('speech-to-text, jfk.wav (11 s, 16 kHz 16-bit mono):');
  console.log(line('Wyoming: audio-stop → transcript', wyomingStt));
  console.log(line('HTTP: POST /v1/audio/transcriptions', httpStt));
  console.log(`  Wyoming / HTTP ${(median(wyomingStt) / median(httpStt)).toFixed(2)}`);

  await wyomingSpeech();
  await httpSpeech();
  const wyomingTts: [number, number][] = [];
  const httpTts: [number, number][] = [];
  for (let i = 0; i < RUNS; i++) {
    wyomingTts.push(await wyomingSpeech());
    httpTts.push(await httpSpeech());
  }
  console.log(`text-to-speech, "${TEXT}":`);
  console.log(
    line(
      'Wyoming: synthesize → first audio-chunk',
      wyomingTts.map(([first]) => first),
    ),
  );
  console.log(
    line(
      'HTTP: POST /v1/audio/speech → first byte',
      httpTts.map(([first]) => first),
    ),
  );
  console.log(
    line(
      'Wyoming: synthesize → audio-stop',
      wyomingTts.map(([, whole]) => whole),
    ),
  );
  console.log(
    line(
      'HTTP: POST /v1/audio/speech → the end',
      httpTts.map(([, whole]) => whole),
    ),
  );
} finally {
  await server.close();
  fs.rmSync(scratch, { recursive: true, force: true });
}
