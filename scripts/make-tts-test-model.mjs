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
// hold, the sizes and why, how they were checked against llama.cpp), test-model-vocab.mjs the vocabularies,
// test-model-gguf.mjs the convolutions and the Qwen3 decoder, test-model-common.mjs the pair generator, the general
// keys and the deterministic weights, gguf/writer.mjs the GGUF format.
import { pairGenerator } from './test-model-common.mjs';
import { pocketTts } from './tts-test-model/pockettts.mjs';
import { qwen3Tts } from './tts-test-model/qwen3tts.mjs';

// bumped whenever the output for given options changes, so stale cache entries are not reused
const FORMAT_VERSION = 1;

const generator = pairGenerator({ script: 'make-tts-test-model.mjs', archs: { pockettts: pocketTts, qwen3tts: qwen3Tts }, formatVersion: FORMAT_VERSION });

/** @typedef {import('./test-model-common.mjs').PairOptions} TtsOptions { arch: pockettts (default) or qwen3tts, size: tiny (default) or realistic, seed (default 1) } */

/** The dimensions a size stands for (for tests and benchmarks that need them). */
export const ttsTestModelDims = generator.dims;

/** The file names of a pair written with these options: { model, mmproj }. */
export const ttsTestModelFiles = generator.files;

/** The cache directory of a pair with these options. */
export const ttsTestModelDir = generator.dir;

/**
 * Writes a pair into `outDir` (created if missing; the two files are written under temporary names and renamed
 * into place). Resolves to { dir, model, mmproj } (absolute paths).
 */
export const writeTtsTestModel = generator.write;

/** A cached random-weight pair for these options (generated on first use); resolves to { dir, model, mmproj }. */
export const makeTtsTestModel = generator.make;

await generator.runCli(import.meta.url);
