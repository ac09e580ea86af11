/**
 * Separation benchmark (`npm run bench:separation`): the real-time factor of each method of the built-in
 * separator on a 30 s stereo 44.1 kHz mixture (LibriVox speech over the drum and piano loops), in-process on a
 * worker thread (median of 3 runs), and the same for one whole request over HTTP (upload, decode, separate,
 * two base64 float WAVs back) so the HTTP overhead shows beside the engine's time.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { pino } from 'pino';
import { resolveConfig } from '../src/config.js';
import { loadSeparatorModel } from '../src/engines/separator.js';
import { decodeAudioChannels } from '../src/services/audio/decode.js';
import { StreamResampler } from '../src/services/audio/resample.js';
import { concatSamples } from '../src/engines/samples.js';
import { encodeFloatWav } from '../src/services/audio/wav.js';
import { startServer } from '../src/server.js';
import { median } from './stats.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const AUDIO = path.join(root, '..', 'shared', 'audio');
const RATE = 44100;
const SECONDS = 30;
const RUNS = 3;

/** `source` repeated to `length` samples. */
function looped(source: Float32Array, length: number): Float32Array {
  return Float32Array.from({ length }, (_, i) => source[i % source.length] as number);
}

async function stereoLoop(name: string, length: number): Promise<Float32Array[]> {
  const loop = await decodeAudioChannels(fs.readFileSync(path.join(AUDIO, 'music', name)), {});
  if (loop.sampleRate !== RATE) throw new Error(`${name}: expected ${RATE} Hz`);
  return loop.channels.map((channel) => looped(channel, length));
}

async function mixture(): Promise<Float32Array[]> {
  const length = RATE * SECONDS;
  const clips: Float32Array[] = [];
  for (const clip of ['librivox-0870.wav', 'librivox-0890.wav', 'librivox-0920.wav']) {
    const decoded = await decodeAudioChannels(fs.readFileSync(path.join(AUDIO, 'speech', clip)), {});
    const resampler = new StreamResampler(decoded.sampleRate, RATE);
    clips.push(resampler.process(decoded.channels[0] as Float32Array), resampler.flush());
  }
  const voice = looped(concatSamples(clips), length);
  const [drums, piano] = [await stereoLoop('loop_amen.flac', length), await stereoLoop('ambi_piano.flac', length)];
  return [0, 1].map((c) => voice.map((x, i) => 0.5 * x + 0.25 * ((drums[c] as Float32Array)[i] as number) + 0.25 * ((piano[c] as Float32Array)[i] as number)));
}

const channels = await mixture();
const model = await loadSeparatorModel();
console.log(`Separation of ${SECONDS} s of stereo ${RATE / 1000} kHz audio, built-in model ${model.id} (${os.cpus().length} cores):`);
for (const target of model.targets) {
  const times: number[] = [];
  for (let run = 0; run < RUNS; run++) {
    const start = performance.now();
    await model.separate({ channels, sampleRate: RATE }, target);
    times.push(performance.now() - start);
  }
  const ms = median(times);
  console.log(
    `  ${target.name.padEnd(14)} ${(ms / 1000).toFixed(2)} s: real-time factor ${(ms / 1000 / SECONDS).toFixed(3)} (${((SECONDS * 1000) / ms).toFixed(1)}x real time)`,
  );
}
await model.dispose();

const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'voxd-bench-separation-'));
const config = resolveConfig({ host: '127.0.0.1', port: 0, logDir: path.join(scratch, 'logs') }, {});
const server = await startServer(config, pino({ level: 'silent' }), { HF_ENDPOINT: 'http://127.0.0.1:9', HF_HUB_CACHE: path.join(scratch, 'hub') });
const upload = encodeFloatWav(channels, RATE);
const times: number[] = [];
for (let run = 0; run < RUNS + 1; run++) {
  const body = new FormData();
  body.append('file', new Blob([new Uint8Array(upload)]), 'mixture.wav');
  body.append('description', 'vocals');
  const start = performance.now();
  const response = await fetch(`http://127.0.0.1:${server.port}/v1/audio/separations`, { method: 'POST', body });
  await response.json();
  if (run > 0) times.push(performance.now() - start); // the first run loads the model
}
const ms = median(times);
console.log(
  `  over HTTP, voice (${(upload.length / 1048576).toFixed(1)} MiB float WAV up, two back as base64): ${(ms / 1000).toFixed(2)} s: real-time factor ${(ms / 1000 / SECONDS).toFixed(3)}`,
);
await server.close();
fs.rmSync(scratch, { recursive: true, force: true });
