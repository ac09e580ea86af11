#!/usr/bin/env node
// The smoke test of a CUDA build of the addon (scripts/cuda-check/run.sh): its devices, a decode by the bundled
// FFmpeg, a random tiny Whisper model on the GPU and on the CPU (the same greedy text expected), flite's voices.
// Usage: node smoke.mjs ADDON.node WHISPER_MODEL.bin CLIP.wav; exits 1 when a check fails.
import fs from 'node:fs';
import { createRequire } from 'node:module';
import { performance } from 'node:perf_hooks';

const [addonPath, modelPath, clipPath] = process.argv.slice(2);
/** @type {import('../../src/native/addon.js').NativeAddon} */
const addon = createRequire(import.meta.url)(addonPath);
const devices = addon.systemInfo().devices;
console.log(`devices: ${devices.map((d) => `${d.name} (${d.description})`).join(', ')}`);
const audio = await addon.decodeAudio(fs.readFileSync(clipPath), { sampleRate: 16000 });
console.log(`decoded ${audio.duration.toFixed(2)} s`);
const params = { language: 'en', temperature: 0, temperatureInc: 0 };
/** @type {Record<'gpu' | 'cpu', string>} */
const texts = { gpu: '', cpu: '' };
for (const useGpu of [true, false]) {
  const model = await addon.WhisperModel.load(modelPath, { useGpu });
  await model.transcribe(audio.samples, params); // warm-up
  const started = performance.now();
  const result = await model.transcribe(audio.samples, params);
  const ms = performance.now() - started;
  const text = result.segments.map((s) => s.text).join('');
  texts[useGpu ? 'gpu' : 'cpu'] = text;
  console.log(`whisper (random tiny.en) on the ${useGpu ? 'GPU' : 'CPU'}: ${ms.toFixed(0)} ms, ${JSON.stringify(text.slice(0, 60))}`);
  model.release();
}
const flite = await addon.FliteModel.load();
console.log(`flite: ${flite.voices.map((v) => v.id).join(', ')}, deterministic ${flite.deterministic}`);
const failures = [
  !devices.some((d) => /^CUDA/.test(d.name)) && 'no CUDA device',
  texts.gpu !== texts.cpu && 'GPU and CPU transcripts differ',
  flite.voices.length === 0 && 'no flite voice',
].filter(Boolean);
console.log(failures.length ? `FAILED: ${failures.join(', ')}` : 'ok: CUDA device, identical GPU and CPU transcripts, flite');
process.exitCode = failures.length ? 1 : 0;
