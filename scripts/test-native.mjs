#!/usr/bin/env node
// `npm run test:native` (and the first step of `npm test`): builds the engine library's C++ tests (native/test)
// against the build directory `npm install` configured, and runs them with ctest, without Node's headers or a
// server. `--sanitize` builds the engine library and the tests with AddressSanitizer and UndefinedBehaviorSanitizer
// in a directory of their own (build-sanitize; the first build compiles the engine libraries again, ccache helps).
// `--arch arm64` builds them for another architecture in the build directory of its prebuild (`npm run prebuild --
// --arch arm64` first: scripts/cross.mjs) and runs them there under qemu.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { InstallError, buildAddon, root } from './build-native.mjs';
import { crossTarget, emulationEnv } from './cross.mjs';
import { fetchSources } from './fetch-sources.mjs';
import { ensureSystemDeps } from './system-deps.mjs';
import { VAD_MODEL_FILE, buildVadModel } from './build-vad-model.mjs';

const sanitize = process.argv.includes('--sanitize');
const archAt = process.argv.indexOf('--arch');
const cross = crossTarget(archAt > 0 ? process.argv[archAt + 1] : undefined);
const junitAt = process.argv.indexOf('--junit'); // where ctest writes its results (scripts/test.mjs counts them)
const junit = junitAt > 0 ? process.argv[junitAt + 1] : undefined;
const step = (/** @type {string} */ message) => console.log(`[voxd test:native] ${message}`);
const started = Date.now();

// the inputs the tests read, named by environment variables (native/test/harness.h): the shared clips, the shipped
// VAD model and random-weight Whisper, Parakeet and Pocket TTS models (built once and cached, as the other suites build them)
await buildVadModel();
const importScript = async (/** @type {string} */ name) => import(pathToFileURL(path.join(root, 'scripts', name)).href);
const whisperModel = await (await importScript('make-whisper-test-model.mjs')).makeWhisperTestModel({ size: 'tiny', en: true });
const tts = await (await importScript('make-tts-test-model.mjs')).makeTtsTestModel({ arch: 'pockettts', size: 'tiny' });
const parakeetModel = await (await importScript('make-parakeet-test-model.mjs')).makeParakeetTestModel({ size: 'tiny', seed: 2 });
const audioDir = path.resolve(root, '..', 'shared', 'audio');
if (!fs.existsSync(audioDir)) {
  console.error(`[voxd test:native] the shared clips are missing: ${audioDir} (the tests read ../shared/audio beside the clone)`);
  process.exit(1);
}

// the build directory `npm install` configured; an install that took the addon from the build cache or a platform
// package left none, so the tests then configure it (and the sanitizer build its own) with the engine sources
const buildDir = cross ? path.join(root, 'build', `prebuild-${process.argv[archAt + 1]}`, 'build') : path.join(root, sanitize ? 'build-sanitize' : 'build');
if (cross && !fs.existsSync(path.join(buildDir, 'CMakeCache.txt'))) {
  console.error(`[voxd test:native] ${path.relative(root, buildDir)} is not configured: run \`npm run prebuild -- --arch ${process.argv[archAt + 1]}\` first`);
  process.exit(1);
}
if (!cross && (sanitize || !fs.existsSync(path.join(buildDir, 'CMakeCache.txt')))) {
  step(`building the engine library and its tests${sanitize ? ' with AddressSanitizer and UndefinedBehaviorSanitizer' : ''} (${path.basename(buildDir)})`);
  try {
    ensureSystemDeps();
    fetchSources();
    await buildAddon({ outDir: path.basename(buildDir), flags: { cuda: false, portable: false }, target: 'voxd_engine_tests', sanitize });
  } catch (error) {
    if (!(error instanceof InstallError)) throw error;
    console.error(`[voxd test:native] ${error.message}`);
    process.exit(1);
  }
} else {
  step('building the engine library tests');
  const jobs = Number(process.env.VOXD_BUILD_JOBS) || os.availableParallelism();
  const build = spawnSync('cmake', ['--build', buildDir, '--target', 'voxd_engine_tests', '--parallel', String(jobs)], { stdio: 'inherit' });
  if (build.status !== 0) process.exit(1);
}

step('running them');
const env = {
  ...process.env,
  VOXD_TEST_AUDIO_DIR: audioDir,
  VOXD_TEST_VAD_MODEL: VAD_MODEL_FILE,
  VOXD_TEST_WHISPER_MODEL: whisperModel,
  VOXD_TEST_PARAKEET_MODEL: parakeetModel,
  VOXD_TEST_TTS_MODEL: tts.model,
  VOXD_TEST_TTS_MMPROJ: tts.mmproj,
  // small checkpoints torch itself wrote (native/test/data/torch/make-fixtures.py)
  VOXD_TEST_TORCH_DIR: path.join(root, 'native', 'test', 'data', 'torch'),
  // the engine libraries keep process-wide state (backend registries, flite's voices) for the process's life
  ...(sanitize ? { ASAN_OPTIONS: 'detect_leaks=0', UBSAN_OPTIONS: 'print_stacktrace=1' } : {}),
  // another architecture's tests run through qemu (the toolchain file's CMAKE_CROSSCOMPILING_EMULATOR)
  ...(cross ? emulationEnv(cross) : {}),
};
// under emulation each file's tests take many times longer
const ctest = spawnSync(
  'ctest',
  ['--test-dir', buildDir, '--output-on-failure', '--timeout', cross ? '3600' : '300', ...(junit ? ['--output-junit', junit] : [])],
  {
    stdio: 'inherit',
    env,
  },
);
step(`done in ${Math.round((Date.now() - started) / 1000)} s`);
process.exit(ctest.status ?? 1);
