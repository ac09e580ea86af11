#!/usr/bin/env node
// Writes random-weight audio language models for tests and benchmarks: speech recognizers that llama.cpp serves
// through libmtmd, a language model GGUF (libllama) and its audio encoder and projector, the mmproj GGUF (libmtmd),
// in the formats llama.cpp's converter writes, with every metadata key, tensor name, shape and type that the
// loaders (src/models/<arch>.cpp, tools/mtmd/clip.cpp) and graphs (tools/mtmd/models/*) use. The transcripts they
// produce are word salad; the plumbing, timing and memory behave like the real models'. Greedy decoding is made
// decisive (each step's winner leads by several units) and never ends early, so that two implementations with
// slightly different float rounding agree token for token up to the caller's limit.
//
//   node scripts/make-asr-test-model.mjs [--arch qwen3asr|voxtral] [--size tiny|realistic] [--seed N] [--out DIR]
//
// Without --out the pair goes to the cache (build/test-models, or $VOXD_TEST_MODELS_DIR) in a directory named by
// the options and the format version, and an existing one there is reused. Output is deterministic for given
// options (byte for byte). The directory holds `<name>.gguf` (language model) and `mmproj-<name>.gguf`, the layout
// of llama.cpp's hub repositories.
//
// The pieces: asr-test-model/qwen3asr.mjs and asr-test-model/voxtral.mjs describe each architecture (what the files
// hold, the sizes and why, how they were checked against llama.cpp), asr-test-model/parts.mjs the audio encoder's
// transformer and the output rows both share, test-model-vocab.mjs the vocabularies, test-model-gguf.mjs the Qwen3
// decoder, test-model-common.mjs the pair generator, the general keys and the deterministic weights.
import { pairGenerator } from './test-model-common.mjs';
import { qwen3Asr } from './asr-test-model/qwen3asr.mjs';
import { voxtral } from './asr-test-model/voxtral.mjs';

// bumped whenever the output for given options changes, so stale cache entries are not reused
const FORMAT_VERSION = 1;

const generator = pairGenerator({ script: 'make-asr-test-model.mjs', archs: { qwen3asr: qwen3Asr, voxtral }, formatVersion: FORMAT_VERSION });

/** @typedef {import('./test-model-common.mjs').PairOptions} AsrOptions { arch: qwen3asr (default) or voxtral, size: tiny (default) or realistic, seed (default 1) } */

/** The dimensions a size stands for (for tests and benchmarks that need them). */
export const asrTestModelDims = generator.dims;

/** The file names of a pair written with these options: { model, mmproj }. */
export const asrTestModelFiles = generator.files;

/** The cache directory of a pair with these options. */
export const asrTestModelDir = generator.dir;

/**
 * Writes a pair into `outDir` (created if missing; the two files are written under temporary names and renamed
 * into place). Resolves to { dir, model, mmproj } (absolute paths).
 */
export const writeAsrTestModel = generator.write;

/** A cached random-weight pair for these options (generated on first use); resolves to { dir, model, mmproj }. */
export const makeAsrTestModel = generator.make;

await generator.runCli(import.meta.url);
