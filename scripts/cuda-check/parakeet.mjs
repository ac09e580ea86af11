#!/usr/bin/env node
// Parakeet TDT on the GPU with a CUDA build of the addon (scripts/cuda-check/run.sh with PARAKEET=1), through the
// addon's ParakeetModel directly (no HTTP; its batcher takes up to 32 clips at once): 32 different 5 s clips
// (windows of CLIP) at concurrency 1, 8 and 32 after
// a warm-up (requests per second, seconds of audio per second), CLIP repeated to 60 s and decoded whole, whether every
// job run concurrently gets the tokens of its run alone (the exit status), and the GPU's tokens against the CPU's on
// a few clips, naming the fields that differ. On a build without CUDA, useGpu is ignored and all of it runs on the CPU.
// Usage: node parakeet.mjs ADDON.node PARAKEET_MODEL.bin CLIP.wav; exits 1 when a concurrent job's tokens differ.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';

const CONCURRENCY = [1, 8, 32];
const CLIPS = 32;
const CLIP_SECONDS = 5;
const LONG_SECONDS = 60;
const CPU_COMPARED = 4;
const SAMPLE_RATE = 16000;
const MAX_CONCURRENCY = Math.max(...CONCURRENCY);

// engine calls run on libuv's thread pool (4 threads unless told), which Node sizes before this script's first line
if (Number(process.env.UV_THREADPOOL_SIZE ?? 0) < MAX_CONCURRENCY) {
  const child = spawnSync(process.execPath, process.argv.slice(1), {
    stdio: 'inherit',
    env: { ...process.env, UV_THREADPOOL_SIZE: String(MAX_CONCURRENCY) },
  });
  process.exit(child.status ?? 1);
}

const [addonPath, modelPath, clipPath] = process.argv.slice(2);
if (!addonPath || !modelPath || !clipPath) {
  console.error('usage: node parakeet.mjs ADDON.node PARAKEET_MODEL.bin CLIP.wav');
  process.exit(2);
}
/** @type {import('../../src/native/addon.js').NativeAddon} */
const addon = createRequire(import.meta.url)(path.resolve(addonPath));
/** @typedef {import('../../src/native/addon.js').NativeParakeetToken} Token */
/** @typedef {import('../../src/native/addon.js').NativeParakeetModel} Model */

const { samples } = await addon.decodeAudio(fs.readFileSync(clipPath), { sampleRate: SAMPLE_RATE });
const clipLength = CLIP_SECONDS * SAMPLE_RATE;
if (samples.length < clipLength) throw new Error(`${clipPath} is shorter than ${CLIP_SECONDS} s`);
// windows at evenly spread offsets, so every job has audio (and tokens) of its own
const step = Math.floor((samples.length - clipLength) / (CLIPS - 1));
const clips = Array.from({ length: CLIPS }, (_, i) => samples.slice(i * step, i * step + clipLength));
const long = new Float32Array(LONG_SECONDS * SAMPLE_RATE);
for (let i = 0; i < long.length; i += samples.length) long.set(samples.subarray(0, Math.min(samples.length, long.length - i)), i);

const cores = os.availableParallelism();

/**
 * Every clip transcribed, `concurrency` at a time.
 * @param {Model} model
 * @param {Float32Array[]} inputs
 * @param {number} concurrency
 * @returns {Promise<{ seconds: number, tokens: Token[][] }>}
 */
async function transcribeAll(model, inputs, concurrency) {
  /** @type {Token[][]} */
  const tokens = [];
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      for (let i = next++; i < inputs.length; i = next++) tokens[i] = await model.transcribe(/** @type {Float32Array} */ (inputs[i]));
    }),
  );
  return { seconds: (performance.now() - started) / 1000, tokens };
}

/**
 * What differs between two token lists: '' when nothing does, else the fields that differ.
 * @param {Token[]} a
 * @param {Token[]} b
 */
function difference(a, b) {
  const ids = (/** @type {Token[]} */ t) => t.map((token) => token.id).join(',');
  if (a.length !== b.length || ids(a) !== ids(b)) {
    const first = a.findIndex((token, i) => token.id !== b[i]?.id);
    return `tokens part at ${first < 0 ? Math.min(a.length, b.length) : first} (${a.length} vs ${b.length} tokens)`;
  }
  /** @type {string[]} */
  const fields = [];
  for (const field of /** @type {const} */ (['frame', 'duration', 'start', 'end', 'wordStart'])) {
    if (a.some((token, i) => token[field] !== b[i]?.[field])) fields.push(`${field}s`);
  }
  for (const field of /** @type {const} */ (['p', 'logprob'])) {
    const most = Math.max(0, ...a.map((token, i) => Math.abs(token[field] - /** @type {Token} */ (b[i])[field])));
    if (most > 0) fields.push(`${field} (by up to ${most.toExponential(1)})`);
  }
  return fields.length ? `same ids, different ${fields.join(', ')}` : '';
}

console.log(
  `devices: ${addon
    .systemInfo()
    .devices.map((d) => d.name)
    .join(', ')}; ${cores} cores`,
);
const loadStarted = performance.now();
const gpu = await addon.ParakeetModel.load(modelPath, { useGpu: true, maxBatch: MAX_CONCURRENCY });
const info = gpu.info();
console.log(
  `parakeet model: ${info.nAudioLayer} layers x ${info.nAudioState}, ${info.nVocab} pieces, ftype ${info.ftype}; loaded in ` +
    `${((performance.now() - loadStarted) / 1000).toFixed(1)} s, ${info.gpu ? 'on the GPU' : 'NOT on a GPU (no CUDA device): the figures below are the CPU'}'s`,
);
await transcribeAll(gpu, clips, MAX_CONCURRENCY); // warm-up: grows the compute buffers the runs below reuse
/** @type {Token[][]} */
let alone = [];
/** @type {string[]} */
const failures = [];
for (const concurrency of CONCURRENCY) {
  const { seconds, tokens } = await transcribeAll(gpu, clips, concurrency);
  if (concurrency === 1) alone = tokens;
  const differing = tokens.map((t, i) => [i, difference(/** @type {Token[]} */ (alone[i]), t)]).filter(([, d]) => d);
  for (const [i, d] of differing) failures.push(`concurrency ${concurrency}, clip ${i}: ${d}`);
  console.log(
    `${CLIPS} clips of ${CLIP_SECONDS} s at concurrency ${concurrency}: ${(CLIPS / seconds).toFixed(1)} requests/s, ` +
      `${((CLIPS * CLIP_SECONDS) / seconds).toFixed(0)} s of audio per second` +
      (concurrency === 1 ? '' : `; tokens as alone: ${differing.length ? `${CLIPS - differing.length} of ${CLIPS}` : 'all'}`),
  );
}
/** @type {number[]} */
const longSeconds = [];
for (let run = 0; run < 3; run++) longSeconds.push((await transcribeAll(gpu, [long], 1)).seconds);
const longMedian = /** @type {number} */ (longSeconds.sort((x, y) => x - y)[1]);
console.log(`${LONG_SECONDS} s clip, whole (one encoder pass): ${(LONG_SECONDS / longMedian).toFixed(0)} s of audio per second (median of 3)`);
gpu.release();

const cpu = await addon.ParakeetModel.load(modelPath, { useGpu: false });
const onCpu = await transcribeAll(cpu, clips.slice(0, CPU_COMPARED), 1);
cpu.release();
const cpuVsGpu = onCpu.tokens.map((t, i) => `clip ${i}: ${difference(/** @type {Token[]} */ (alone[i]), t) || 'identical'}`);
console.log(`GPU vs CPU (${Math.min(8, cores)} threads) tokens, ${CPU_COMPARED} clips: ${cpuVsGpu.join('; ')}`);
for (const failure of failures) console.log(`differs from its run alone: ${failure}`);
console.log(
  failures.length ? `FAILED: ${failures.length} concurrent jobs differ from their runs alone` : 'ok: every concurrent job got the tokens of its run alone',
);
process.exitCode = failures.length ? 1 : 0;
