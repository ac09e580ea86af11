#!/usr/bin/env node
// Writes random-weight GGML text-to-speech models for tests and benchmarks: a backbone GGUF (libllama) and its
// mmproj GGUF (libmtmd), in the formats llama.cpp's converter writes, with every metadata key, tensor name, shape
// and type that the loaders (src/models/<arch>.cpp, tools/mtmd/clip.cpp) and graphs (tools/mtmd/models/*) use.
// The speech they produce is noise; the plumbing, timing and memory behave like the real models'.
//
//   node scripts/make-tts-test-model.mjs [--arch pockettts|qwen3tts] [--size tiny|realistic] [--seed N] [--out DIR]
//
// Without --out the pair goes to the cache (build/test-models, or $VOXD_TEST_MODELS_DIR) in a directory named by
// the options and the format version, and an existing one there is reused. Output is deterministic for given
// options (byte for byte). The directory holds `<name>.gguf` (backbone) and `mmproj-<name>.gguf`, the layout of
// llama.cpp's hub repositories.
//
// The pieces: tts-test-model/pockettts.mjs and tts-test-model/qwen3tts.mjs describe each architecture (what the files
// hold, the sizes and why, how they were checked against llama.cpp), tts-test-model/vocab.mjs the vocabularies,
// tts-test-model/gguf-parts.mjs the general keys and convolutions, test-model-common.mjs the deterministic weights,
// gguf/writer.mjs the GGUF format.
import fs from 'node:fs';
import path from 'node:path';
import { cachedBuild, checkChoice, checkSeed, parseArgs, runAsCli, tensorData, testModelsDir, writeAtomically } from './test-model-common.mjs';
import { writeGguf } from './gguf/writer.mjs';
import { pocketTts } from './tts-test-model/pockettts.mjs';
import { qwen3Tts } from './tts-test-model/qwen3tts.mjs';

// bumped whenever the output for given options changes, so stale cache entries are not reused
const FORMAT_VERSION = 1;

const ARCHS = { pockettts: pocketTts, qwen3tts: qwen3Tts };

// ---- options, cache, CLI ----

/** @typedef {{ arch?: string, size?: string, seed?: number }} TtsOptions */

/** @param {TtsOptions} [options] */
function normaliseOptions({ arch = 'pockettts', size = 'tiny', seed = 1 } = {}) {
  checkChoice('arch', arch, ARCHS);
  checkChoice('size', size, ARCHS[arch].sizes);
  checkSeed(seed);
  return { arch, size, seed };
}

/**
 * The dimensions a size stands for (for tests and benchmarks that need them).
 * @param {TtsOptions} [options]
 */
export function ttsTestModelDims(options = {}) {
  const { arch, size } = normaliseOptions(options);
  return { ...ARCHS[arch].sizes[size] };
}

/**
 * The file names of a pair written with these options: { model, mmproj }.
 * @param {TtsOptions} [options]
 */
export function ttsTestModelFiles(options = {}) {
  const { arch, size } = normaliseOptions(options);
  const base = ARCHS[arch].fileName(size);
  return { model: `${base}.gguf`, mmproj: `mmproj-${base}.gguf` };
}

/**
 * The cache directory of a pair with these options.
 * @param {TtsOptions} [options]
 */
export function ttsTestModelDir(options = {}) {
  const { arch, size, seed } = normaliseOptions(options);
  return path.join(testModelsDir(), `${arch}-${size}-random-s${seed}-v${FORMAT_VERSION}`);
}

/**
 * Writes a pair into `outDir` (created if missing; the two files are written under temporary names and renamed
 * into place). Resolves to { dir, model, mmproj } (absolute paths).
 * @param {string} outDir
 * @param {TtsOptions} [options]
 */
export async function writeTtsTestModel(outDir, options = {}) {
  const { arch, size, seed } = normaliseOptions(options);
  const dims = ARCHS[arch].sizes[size];
  const files = ttsTestModelFiles(options);
  const dir = path.resolve(outDir);
  await fs.promises.mkdir(dir, { recursive: true });
  // dims are this arch's own sizes: a link between ARCHS[arch].sizes and .build that TypeScript cannot follow
  const { backbone, mmproj } = ARCHS[arch].build(
    /** @type {import('./tts-test-model/pockettts.mjs').PocketDims & import('./tts-test-model/qwen3tts.mjs').QwenDims} */ (dims),
    ARCHS[arch].fileName(size),
  );
  for (const [part, file] of /** @type {[import('./tts-test-model/gguf-parts.mjs').GgufFile, string][]} */ ([
    [backbone, files.model],
    [mmproj, files.mmproj],
  ])) {
    await writeAtomically(path.join(dir, file), (tmp) => writeGguf(tmp, part.metadata, part.tensors, (t) => tensorData(t, seed)));
  }
  return { dir, model: path.join(dir, files.model), mmproj: path.join(dir, files.mmproj) };
}

/**
 * A cached random-weight pair for these options (generated on first use); resolves to { dir, model, mmproj }.
 * @param {TtsOptions} [options]
 */
export async function makeTtsTestModel(options = {}) {
  const dir = ttsTestModelDir(options);
  const files = ttsTestModelFiles(options);
  const result = { dir, model: path.join(dir, files.model), mmproj: path.join(dir, files.mmproj) };
  // the whole directory is built and renamed in, so a reader never sees half a pair
  await cachedBuild(
    dir,
    () => fs.existsSync(result.model) && fs.existsSync(result.mmproj),
    (tmp) => writeTtsTestModel(tmp, options),
  );
  return result;
}

await runAsCli(import.meta.url, 'make-tts-test-model', async (args) => {
  const { options, out } = parseArgs(args, { '--arch': ['arch', 'string'], '--size': ['size', 'string'], '--seed': ['seed', 'number'] });
  const result = out ? await writeTtsTestModel(out, options) : await makeTtsTestModel(options);
  console.log(result.model);
  console.log(result.mmproj);
});
