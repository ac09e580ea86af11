#!/usr/bin/env node
// Writes random-weight Whisper models in whisper.cpp's ggml format, for tests: real hparams, mel filters and
// vocabulary (copied from the tensor-less base files in ../shared/models/whisper-format), then every tensor
// whisper.cpp's loader (whisper_model_load) expects, with small random f16 weights so decoding runs without
// NaNs. The text they produce is garbage; their timing and memory behave like the real sizes.
//
//   node scripts/make-whisper-test-model.mjs [--size tiny|base] [--en] [--seed N] [--out PATH]
//
// Without --out the file goes to the cache (build/test-models, or $VOXD_TEST_MODELS_DIR) under a name keyed
// by the options, and an existing file there is reused. Output is deterministic for given options.
import { Buffer } from 'node:buffer';
import fs from 'node:fs';
import path from 'node:path';
import { ROOT, checkChoice, checkSeed, halfBits, runGeneratorCli, singleFileGenerator, testModelsDir, weylStream } from './test-model-common.mjs';
import { GGML_FILE_MAGIC, GGML_TYPE_F16, GGML_TYPE_F32, nElements, writeGgmlFile } from './gguf/ggml.mjs';

const BASE_DIR = path.join(ROOT, '..', 'shared', 'models', 'whisper-format');
const WEIGHT_STD = 0.02;
// bumped whenever the output for given options changes, so stale cache entries are not reused
const FORMAT_VERSION = 1;

// hparams overridden per size; n_text_* mirror n_audio_* as in the released models
const SIZES = {
  tiny: { state: 384, head: 6, layer: 4 },
  base: { state: 512, head: 8, layer: 6 },
};

/**
 * The hparams of whisper.cpp's header, in file order.
 * @typedef {{ nVocab: number, nAudioCtx: number, nAudioState: number, nAudioHead: number, nAudioLayer: number, nTextCtx: number,
 *   nTextState: number, nTextHead: number, nTextLayer: number, nMels: number, ftype: number }} Hparams
 */
/** @typedef {[name: string, ne: number[], type: number]} TensorSpec a tensor: name, ggml ne (innermost first), type */
/** @typedef {{ size?: string, en?: boolean, seed?: number }} WhisperOptions */

/**
 * Parses a base file: hparams, then the raw bytes of the mel filters and vocabulary, which are copied as is.
 * @param {string} file
 */
function readBase(file) {
  const buf = fs.readFileSync(file);
  if (buf.readUInt32LE(0) !== GGML_FILE_MAGIC) throw new Error(`${file}: not a ggml file`);
  const names = ['nVocab', 'nAudioCtx', 'nAudioState', 'nAudioHead', 'nAudioLayer', 'nTextCtx', 'nTextState', 'nTextHead', 'nTextLayer', 'nMels', 'ftype'];
  const hparams = /** @type {Hparams} */ (Object.fromEntries(names.map((name, i) => [name, buf.readInt32LE(4 + 4 * i)])));
  let offset = 4 + 4 * names.length;
  const start = offset;
  const nMel = buf.readInt32LE(offset);
  const nFft = buf.readInt32LE(offset + 4);
  offset += 8 + nMel * nFft * 4;
  const nWords = buf.readInt32LE(offset);
  offset += 4;
  for (let i = 0; i < nWords; i++) offset += 4 + buf.readUInt32LE(offset);
  if (offset > buf.length) throw new Error(`${file}: truncated vocabulary`);
  return { hparams, filtersAndVocab: buf.subarray(start, offset) };
}

/**
 * Every tensor whisper_model_load creates, in its order: [name, ggml ne (innermost first), type].
 * @param {Hparams} h
 */
function tensorList(h) {
  const s = h.nAudioState;
  /** @type {TensorSpec[]} */
  const list = [
    ['encoder.positional_embedding', [s, h.nAudioCtx], GGML_TYPE_F32],
    ['encoder.conv1.weight', [3, h.nMels, s], GGML_TYPE_F16],
    ['encoder.conv1.bias', [1, s], GGML_TYPE_F32],
    ['encoder.conv2.weight', [3, s, s], GGML_TYPE_F16],
    ['encoder.conv2.bias', [1, s], GGML_TYPE_F32],
    ['encoder.ln_post.weight', [s], GGML_TYPE_F32],
    ['encoder.ln_post.bias', [s], GGML_TYPE_F32],
  ];
  /** @type {(attn: string, ln: string, state: number) => TensorSpec[]} */
  const attention = (attn, ln, state) => [
    [`${ln}.weight`, [state], GGML_TYPE_F32],
    [`${ln}.bias`, [state], GGML_TYPE_F32],
    [`${attn}.query.weight`, [state, state], GGML_TYPE_F16],
    [`${attn}.query.bias`, [state], GGML_TYPE_F32],
    [`${attn}.key.weight`, [state, state], GGML_TYPE_F16],
    [`${attn}.value.weight`, [state, state], GGML_TYPE_F16],
    [`${attn}.value.bias`, [state], GGML_TYPE_F32],
    [`${attn}.out.weight`, [state, state], GGML_TYPE_F16],
    [`${attn}.out.bias`, [state], GGML_TYPE_F32],
  ];
  /** @type {(prefix: string, state: number) => TensorSpec[]} */
  const block = (prefix, state) => [
    [`${prefix}.mlp_ln.weight`, [state], GGML_TYPE_F32],
    [`${prefix}.mlp_ln.bias`, [state], GGML_TYPE_F32],
    [`${prefix}.mlp.0.weight`, [state, 4 * state], GGML_TYPE_F16],
    [`${prefix}.mlp.0.bias`, [4 * state], GGML_TYPE_F32],
    [`${prefix}.mlp.2.weight`, [4 * state, state], GGML_TYPE_F16],
    [`${prefix}.mlp.2.bias`, [state], GGML_TYPE_F32],
    ...attention(`${prefix}.attn`, `${prefix}.attn_ln`, state),
  ];
  for (let i = 0; i < h.nAudioLayer; i++) list.push(...block(`encoder.blocks.${i}`, s));
  const t = h.nTextState;
  list.push(
    ['decoder.positional_embedding', [t, h.nTextCtx], GGML_TYPE_F32],
    ['decoder.token_embedding.weight', [t, h.nVocab], GGML_TYPE_F16],
    ['decoder.ln.weight', [t], GGML_TYPE_F32],
    ['decoder.ln.bias', [t], GGML_TYPE_F32],
  );
  for (let i = 0; i < h.nTextLayer; i++) {
    list.push(...block(`decoder.blocks.${i}`, t), ...attention(`decoder.blocks.${i}.cross_attn`, `decoder.blocks.${i}.cross_attn_ln`, t));
  }
  return list;
}

// ---- deterministic random numbers ----

/** @param {string} text */
function fnv1a(text) {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) hash = Math.imul(hash ^ text.charCodeAt(i), 0x01000193) >>> 0;
  return hash;
}

/**
 * mulberry32's output function (its state is a Weyl sequence stepping by 0x6d2b79f5).
 * @param {number} t
 */
function mulberry32Mix(t) {
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return (t ^ (t >>> 14)) >>> 0;
}

/**
 * mulberry32: small, fast, good enough for weights; one stream per tensor so the order does not matter.
 * @param {number} seed
 */
function rng(seed) {
  return weylStream(seed, 0x6d2b79f5, mulberry32Mix);
}

/**
 * Inverse of the standard normal CDF (Acklam's rational approximation, relative error < 1.2e-9).
 * @param {number} p
 */
function normalQuantile(p) {
  const a = [-39.69683028665376, 220.9460984245205, -275.9285104469687, 138.357751867269, -30.66479806614716, 2.506628277459239];
  const b = [-54.47609879822406, 161.5858368580409, -155.6989798598866, 66.80131188771972, -13.28068155288572];
  const c = [-0.007784894002430293, -0.3223964580411365, -2.400758277161838, -2.549732539343734, 4.374664141464968, 2.938163982698783];
  const d = [0.007784695709041462, 0.3224671290700398, 2.445134137142996, 3.754408661907416];
  const tail = (/** @type {number} */ q) =>
    (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) / ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  if (p < 0.02425) return tail(Math.sqrt(-2 * Math.log(p)));
  if (p > 1 - 0.02425) return -tail(Math.sqrt(-2 * Math.log(1 - p)));
  const q = p - 0.5;
  const r = q * q;
  return ((((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q) / (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
}

// N(0, std) drawn by table lookup: 4096 quantiles, so one random number and one load per weight
const NORMAL_BITS = 12;
/** @type {Map<string, Uint16Array | Float32Array>} */
const tables = new Map();
/**
 * @param {number} std
 * @param {boolean} half f16 bits rather than f32 values
 */
function normalTable(std, half) {
  const key = `${std}/${half}`;
  if (!tables.has(key)) {
    const values = Array.from({ length: 1 << NORMAL_BITS }, (_, i) => std * normalQuantile((i + 0.5) / (1 << NORMAL_BITS)));
    tables.set(key, half ? Uint16Array.from(values, halfBits) : Float32Array.from(values));
  }
  return /** @type {Uint16Array | Float32Array} */ (tables.get(key));
}

// Untrained weights of one small scale make every token about equally likely: the decoder then repeats the
// token it just read (its own embedding dominates the residual stream), and <|endoftext|> never wins, so every
// 30 s window decodes to the 220-token limit and falls back through all temperatures (a 33 s clip takes a
// minute on two cores). Instead the decoder's positions dominate its input (so each step's logits differ), and
// the tied token embedding is scaled by kind: timestamps slightly wider than text, so segments end after a
// few tokens, and <|endoftext|> widest, so windows end after a few dozen. Decoding then costs about what a real
// model's does and gives several segments on multi-window clips.
const POS_STD = 1.0;
const TEXT_STD = 0.09;
const TS_STD = 0.11;
const EOT_STD = 0.2;

/**
 * Scale of each row of the token embedding (also the output projection: Whisper ties them).
 * @param {Hparams} h
 */
function tokenRowStd(h) {
  const multilingual = h.nVocab >= 51865;
  const eot = multilingual ? 50257 : 50256;
  const languages = h.nVocab - 51765 - (multilingual ? 1 : 0);
  const beg = 50363 + (multilingual ? languages - 98 : 0); // <|0.00|>, as whisper.cpp computes it
  return (/** @type {number} */ v) => (v < eot ? TEXT_STD : v === eot ? EOT_STD : v >= beg ? TS_STD : WEIGHT_STD);
}

/**
 * Tensor data: layer-norm gains 1, biases 0, the encoder's sinusoidal positions, the decoder's positions
 * N(0, POS_STD), token embeddings scaled by kind (above), the rest N(0, WEIGHT_STD).
 * @param {string} name
 * @param {number[]} ne
 * @param {number} type
 * @param {number} seed
 * @param {Hparams} h
 */
function tensorData(name, ne, type, seed, h) {
  const n = nElements(ne);
  const next = rng(fnv1a(name) ^ Math.imul(seed, 0x9e3779b9));
  if (name === 'decoder.token_embedding.weight') {
    const rowStd = tokenRowStd(h);
    const [width, rows] = ne;
    const out = new Uint16Array(n);
    for (let v = 0; v < rows; v++) {
      const table = normalTable(rowStd(v), true);
      for (let i = v * width; i < (v + 1) * width; i++) out[i] = table[next() >>> (32 - NORMAL_BITS)];
    }
    return out;
  }
  if (type === GGML_TYPE_F16) {
    const table = normalTable(WEIGHT_STD, true);
    const out = new Uint16Array(n);
    for (let i = 0; i < n; i++) out[i] = table[next() >>> (32 - NORMAL_BITS)];
    return out;
  }
  const out = new Float32Array(n);
  if (name === 'encoder.positional_embedding') {
    // as in Whisper: sin for the first half of the channels, cos for the second
    const [channels, length] = ne;
    const half = channels / 2;
    const increment = Math.log(10000) / (half - 1);
    for (let t = 0; t < length; t++) {
      for (let c = 0; c < half; c++) {
        const angle = t * Math.exp(-increment * c);
        out[t * channels + c] = Math.sin(angle);
        out[t * channels + half + c] = Math.cos(angle);
      }
    }
  } else if (/ln(_post)?\.weight$/.test(name)) {
    out.fill(1);
  } else if (!name.endsWith('.bias')) {
    const table = normalTable(name === 'decoder.positional_embedding' ? POS_STD : WEIGHT_STD, false);
    for (let i = 0; i < n; i++) out[i] = table[next() >>> (32 - NORMAL_BITS)];
  }
  return out;
}

/** @param {WhisperOptions} [options] */
function normaliseOptions({ size = 'tiny', en = false, seed = 1 } = {}) {
  checkChoice('size', size, SIZES);
  checkSeed(seed);
  return { size, en: Boolean(en), seed };
}

/**
 * The cache path of a model with these options.
 * @param {WhisperOptions} [options]
 */
export function whisperTestModelPath(options = {}) {
  const { size, en, seed } = normaliseOptions(options);
  return path.join(testModelsDir(), `ggml-${size}${en ? '.en' : ''}-random-s${seed}-v${FORMAT_VERSION}.bin`);
}

/**
 * Writes a model with normalised options to `file` (not atomically: the callers rename it into place).
 * @param {string} file
 * @param {ReturnType<typeof normaliseOptions>} options
 */
async function writeModel(file, { size, en, seed }) {
  const base = readBase(path.join(BASE_DIR, en ? 'for-tests-ggml-tiny.en.bin' : 'for-tests-ggml-tiny.bin'));
  const dims = SIZES[size];
  const h = {
    ...base.hparams,
    nAudioState: dims.state,
    nAudioHead: dims.head,
    nAudioLayer: dims.layer,
    nTextState: dims.state,
    nTextHead: dims.head,
    nTextLayer: dims.layer,
    ftype: 1, // mostly f16
  };
  const header = Buffer.alloc(4 + 11 * 4);
  header.writeUInt32LE(GGML_FILE_MAGIC, 0);
  [h.nVocab, h.nAudioCtx, h.nAudioState, h.nAudioHead, h.nAudioLayer, h.nTextCtx, h.nTextState, h.nTextHead, h.nTextLayer, h.nMels, h.ftype].forEach((v, i) =>
    header.writeInt32LE(v, 4 + 4 * i),
  );
  await writeGgmlFile(
    file,
    Buffer.concat([header, base.filtersAndVocab]),
    tensorList(h).map(([name, ne, type]) => ({ name, ne, type })),
    ({ name, ne, type }) => tensorData(name, ne, type, seed, h),
  );
}

const generator = singleFileGenerator(normaliseOptions, whisperTestModelPath, writeModel);

/**
 * Writes a model to `out` (atomically: a temporary file renamed into place); resolves to `out`.
 * @type {(out: string, options?: WhisperOptions) => Promise<string>}
 */
export const writeWhisperTestModel = generator.write;

/**
 * A cached random-weight model for these options (generated on first use); resolves to its path.
 * @type {(options?: WhisperOptions) => Promise<string>}
 */
export const makeWhisperTestModel = generator.make;

await runGeneratorCli(
  import.meta.url,
  'make-whisper-test-model',
  { '--size': ['size', 'string'], '--en': ['en', 'flag'], '--seed': ['seed', 'number'] },
  generator,
);
