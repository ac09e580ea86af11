#!/usr/bin/env node
// Writes random-weight Kokoro-82M models for tests, laid out as the hub repository hexgrad/Kokoro-82M is:
//
//   config.json        the released configuration (values and the 114-phoneme vocabulary); --size tiny shrinks
//                      ALBERT in it
//   kokoro-v1_0.pth    a torch.save zip checkpoint (torch/writer.mjs): a dict {bert, bert_encoder, predictor,
//                      text_encoder, decoder} of state dicts (OrderedDicts with _metadata) whose keys carry
//                      DataParallel's "module." prefix, weight norm old-style (weight_g, weight_v), float32; the
//                      key set, order and shapes of upstream's modules (hexgrad/kokoro, checked against them by
//                      test/engines/kokoro-checkpoint.test.ts) less the InstanceNorm affine weights, which the
//                      release lacks (upstream added them to the code after it)
//   voices/<name>.pt   the 54 released voice packs, real ones: the npm package kokoro-js@1.2.1 ships them as raw
//                      float32 [510 * 256]; each is written as the release stores it, one bare tensor [510, 1, 256]
//
//   node scripts/make-kokoro-test-model.mjs [--size tiny|full] [--seed N] [--out DIR]
//
// Without --out the model goes to the cache (build/test-models, or $VOXD_TEST_MODELS_DIR) in a directory named by the
// options and the format version, and an existing one there is reused; the directory is printed. Output is
// deterministic for given options (byte for byte). The voice packs' tarball is fetched once with `npm pack` into the
// pack cache fetch-sources.mjs keeps (~/.cache/voxd/packs).
//
// Sizes: full is the released shapes throughout (81.8 M parameters, 327 MB); tiny shrinks ALBERT, which only feeds
// the predictor through bert_encoder, to 64 wide (2 heads, feed-forward 128, applied twice: ALBERT shares one
// layer's weights across its layers, so the layer count is only the config's). Everything else keeps the released
// shapes, which upstream's code fixes (the decoder's 1024/1090 channels, the generator's upsampling). The speech is
// noise; timing, memory and every code path are the real model's.
//
// Weights: PyTorch's default initialisation (uniform in ±1/sqrt(fan_in) for linear, convolution and LSTM weights
// and biases; N(0, 1) embeddings; LayerNorm 1 and 0; Snake alphas 1), each weight-normed convolution's gain the norm
// of its direction as torch.nn.utils.weight_norm sets it, from a seeded stream per tensor (test-model-common.mjs).
// Three values are chosen so the tests run on short, finite, voiced audio:
//   - decoder.module.generator.conv_post.weight_g is scaled by 0.05 (as oracle.py's --post-scale does): the
//     generator takes exp() of that convolution's output, which random weights otherwise overflow;
//   - predictor.module.duration_proj (durationWeights): its bias is DURATION_BIAS, so that a token lasts about
//     50 * sigmoid(bias) = 3.5 frames (the released model's range) rather than the ~25 random biases give, and its
//     rows share a direction, so that durations still differ from token to token (1.4 to 7 frames);
//   - predictor.module.F0_proj.bias is F0_BIAS (150 Hz), so that the predicted pitch is a voice's and the generator's
//     harmonic source is voiced (sines), as in speech, rather than a few Hz, which the source treats as unvoiced.
import fs from 'node:fs';
import path from 'node:path';
import { tarball, unpack } from './fetch-sources.mjs';
import { GGML_TYPE_F32 } from './gguf/ggml.mjs';
import {
  cachedBuild,
  checkChoice,
  checkSeed,
  gain,
  parseArgs,
  randomSigns,
  runAsCli,
  tensor,
  tensorData,
  testModelsDir,
  torchDefault,
  writeAtomically,
  zeros,
} from './test-model-common.mjs';
import { OrderedDict, TorchTensor, writeTorchFile } from './torch/writer.mjs';

// bumped whenever the output for given options changes, so stale cache entries are not reused
const FORMAT_VERSION = 2;

export const KOKORO_CHECKPOINT = 'kokoro-v1_0.pth';
const VOICES_PACKAGE = { pkg: 'kokoro-js', version: '1.2.1' };
const VOICE_SHAPE = [510, 1, 256]; // rows by phoneme count, then the style vector (decoder half, predictor half)
const DURATION_BIAS = -2.6;
const DURATION_SHARED_DIRECTION = 1.5; // its weight in each row of duration_proj, against the row's own direction's (1)
const POST_GAIN_SCALE = 0.05;
const F0_BIAS = 150; // Hz: a speaking voice's pitch

// The released vocabulary as runs of consecutive ids: [first id, its phonemes in order].
const VOCAB_RUNS = /** @type {[number, string][]} */ ([
  [1, ';:,.!?'],
  [9, '—…"()“” \u0303ʣʥʦʨᵝꭧAI'],
  [31, 'O'],
  [33, 'Q'],
  [35, 'ST'],
  [39, 'W'],
  [41, 'Yᵊabcdef'],
  [50, 'hijklmnopqrstuvwxyzɑɐɒæ'],
  [75, 'βɔɕç'],
  [80, 'ɖðʤə'],
  [85, 'ɚɛɜ'],
  [90, 'ɟ'],
  [92, 'ɡ'],
  [99, 'ɥ'],
  [101, 'ɨɪʝ'],
  [110, 'ɯɰŋɳɲɴø'],
  [118, 'ɸθœ'],
  [123, 'ɹ'],
  [125, 'ɾɻ'],
  [128, 'ʁɽʂʃʈʧ'],
  [135, 'ʊʋ'],
  [138, 'ʌɣɤ'],
  [142, 'χʎ'],
  [147, 'ʒʔ'],
  [156, 'ˈˌː'],
  [162, 'ʰ'],
  [164, 'ʲ'],
  [169, '↓'],
  [171, '→↗↘'],
  [177, 'ᵻ'],
]);

/** config.json of hexgrad/Kokoro-82M, in its key order (JSON.stringify(config, null, 2) is the released file). */
const RELEASED_CONFIG = {
  istftnet: {
    upsample_kernel_sizes: [20, 12],
    upsample_rates: [10, 6],
    gen_istft_hop_size: 5,
    gen_istft_n_fft: 20,
    resblock_dilation_sizes: [
      [1, 3, 5],
      [1, 3, 5],
      [1, 3, 5],
    ],
    resblock_kernel_sizes: [3, 7, 11],
    upsample_initial_channel: 512,
  },
  dim_in: 64,
  dropout: 0.2,
  hidden_dim: 512,
  max_conv_dim: 512,
  max_dur: 50,
  multispeaker: true,
  n_layer: 3,
  n_mels: 80,
  n_token: 178,
  style_dim: 128,
  text_encoder_kernel_size: 5,
  plbert: { hidden_size: 768, num_attention_heads: 12, intermediate_size: 2048, max_position_embeddings: 512, num_hidden_layers: 12, dropout: 0.1 },
  vocab: Object.fromEntries(VOCAB_RUNS.flatMap(([first, phonemes]) => [...phonemes].map((p, i) => [p, first + i]))),
};

/** What each size changes in the config's plbert (ALBERT). */
const SIZES = {
  tiny: { hidden_size: 64, num_attention_heads: 2, intermediate_size: 128, num_hidden_layers: 2 },
  full: {},
};

/** @typedef {{ size?: string, seed?: number }} KokoroOptions */
/** @typedef {typeof RELEASED_CONFIG} KokoroConfig */

/** @param {KokoroOptions} [options] */
function normalise({ size = 'tiny', seed = 1 } = {}) {
  checkChoice('size', size, SIZES);
  checkSeed(seed);
  return { size, seed };
}

/**
 * The config.json a model of these options has.
 * @param {KokoroOptions} [options]
 * @returns {KokoroConfig}
 */
export function kokoroTestModelConfig(options) {
  const { size } = normalise(options);
  return { ...RELEASED_CONFIG, plbert: { ...RELEASED_CONFIG.plbert, ...SIZES[size] } };
}

const product = (/** @type {number[]} */ dims) => dims.reduce((a, b) => a * b, 1);

/**
 * One component's state dict as upstream's modules order it: each module's own parameters, then its children's
 * in the order they were assigned. Tensor data is made when the writer asks for it.
 */
class StateDict {
  /**
   * @param {string} component its key in the checkpoint, part of each tensor's random stream
   * @param {number} seed
   */
  constructor(component, seed) {
    this.component = component;
    this.seed = seed;
    /** @type {[string, TorchTensor][]} */
    this.entries = [];
  }
  /**
   * @param {string} name
   * @param {number[]} shape
   * @param {() => Float32Array} data
   */
  push(name, shape, data) {
    this.entries.push([`module.${name}`, new TorchTensor(shape, data)]);
  }
  /**
   * @param {string} name
   * @param {number[]} shape
   * @param {import('./test-model-common.mjs').TensorInit} init
   */
  add(name, shape, init) {
    const t = tensor(`${this.component}.module.${name}`, [...shape].reverse(), init, GGML_TYPE_F32);
    this.push(name, shape, () => /** @type {Float32Array} */ (tensorData(t, this.seed)));
  }
  /**
   * nn.Linear(inputs, outputs); `name` '' for a bare one (bert_encoder).
   * @param {string} name
   * @param {number} inputs
   * @param {number} outputs
   * @param {import('./test-model-common.mjs').TensorInit} [weight]
   * @param {import('./test-model-common.mjs').TensorInit} [bias]
   */
  linear(name, inputs, outputs, weight = torchDefault(inputs), bias = torchDefault(inputs)) {
    const dot = name ? `${name}.` : '';
    this.add(`${dot}weight`, [outputs, inputs], weight);
    this.add(`${dot}bias`, [outputs], bias);
  }
  /** @param {string} name @param {number} n */
  layerNorm(name, n) {
    this.add(`${name}.weight`, [n], gain());
    this.add(`${name}.bias`, [n], zeros());
  }
  /** @param {string} name @param {number} n @param {number} dim */
  embedding(name, n, dim) {
    this.add(`${name}.weight`, [n, dim], { std: 1 });
  }
  /**
   * A one-layer bidirectional nn.LSTM (gates i, f, g, o stacked in each matrix).
   * @param {string} name
   * @param {number} inputs
   * @param {number} hidden
   */
  lstm(name, inputs, hidden) {
    for (const direction of ['', '_reverse']) {
      this.add(`${name}.weight_ih_l0${direction}`, [4 * hidden, inputs], torchDefault(hidden));
      this.add(`${name}.weight_hh_l0${direction}`, [4 * hidden, hidden], torchDefault(hidden));
      this.add(`${name}.bias_ih_l0${direction}`, [4 * hidden], torchDefault(hidden));
      this.add(`${name}.bias_hh_l0${direction}`, [4 * hidden], torchDefault(hidden));
    }
  }
  /**
   * A plain nn.Conv1d: weight [outputs, inputs, kernel], bias.
   * @param {string} name
   * @param {number} inputs
   * @param {number} outputs
   * @param {number} kernel
   * @param {import('./test-model-common.mjs').TensorInit} [bias] the bias's values (default: PyTorch's initialisation)
   */
  conv(name, inputs, outputs, kernel, bias = torchDefault(inputs * kernel)) {
    this.add(`${name}.weight`, [outputs, inputs, kernel], torchDefault(inputs * kernel));
    this.add(`${name}.bias`, [outputs], bias);
  }
  /**
   * A convolution under old-style weight_norm: its bias (if any), then weight_g [shape[0], 1, 1], then weight_v
   * `shape` (Conv1d: [out, in, k]; ConvTranspose1d: [in, out / groups, k], so its gain is per input channel).
   * weight_g is the norm of each weight_v slice, as weight_norm sets it, so the weight is weight_v itself.
   * @param {string} name
   * @param {number[]} shape
   * @param {number} biasSize 0: no bias
   * @param {number} [gainScale]
   */
  weightNorm(name, shape, biasSize, gainScale = 1) {
    const fanIn = product(shape.slice(1));
    if (biasSize > 0) this.add(`${name}.bias`, [biasSize], torchDefault(fanIn));
    const v = tensor(`${this.component}.module.${name}.weight_v`, [...shape].reverse(), torchDefault(fanIn), GGML_TYPE_F32);
    /** @type {Float32Array | null} made for the gain, kept for weight_v, which the writer asks for next */
    let direction = null;
    const directionData = () => (direction ??= /** @type {Float32Array} */ (tensorData(v, this.seed)));
    this.push(`${name}.weight_g`, [shape[0], 1, 1], () => {
      const d = directionData();
      const rows = shape[0];
      const perRow = d.length / rows;
      const g = new Float32Array(rows);
      for (let r = 0; r < rows; r++) {
        let sum = 0;
        for (let i = r * perRow; i < (r + 1) * perRow; i++) sum += d[i] * d[i];
        g[r] = Math.sqrt(sum) * gainScale;
      }
      return g;
    });
    this.push(`${name}.weight_v`, shape, () => {
      const d = directionData();
      direction = null;
      return d;
    });
  }
  /**
   * AdaIN1d / AdaLayerNorm: the style's projection to a gain and bias per channel (no InstanceNorm affine: the
   * release has none).
   * @param {string} name
   * @param {number} style
   * @param {number} channels
   */
  adaNorm(name, style, channels) {
    this.linear(`${name}.fc`, style, 2 * channels);
  }
  /**
   * istftnet's AdainResBlk1d: conv1, conv2, norm1, norm2, the 1x1 shortcut when the width changes, and the
   * depthwise transposed convolution that doubles the length when it upsamples.
   * @param {string} name
   * @param {number} inputs
   * @param {number} outputs
   * @param {number} style
   * @param {boolean} [upsample]
   */
  adainResBlk1d(name, inputs, outputs, style, upsample = false) {
    this.weightNorm(`${name}.conv1`, [outputs, inputs, 3], outputs);
    this.weightNorm(`${name}.conv2`, [outputs, outputs, 3], outputs);
    this.adaNorm(`${name}.norm1`, style, inputs);
    this.adaNorm(`${name}.norm2`, style, outputs);
    if (inputs !== outputs) this.weightNorm(`${name}.conv1x1`, [outputs, inputs, 1], 0);
    if (upsample) this.weightNorm(`${name}.pool`, [inputs, 1, 3], inputs);
  }
  /**
   * istftnet's AdaINResBlock1: three dilated convolutions and three plain ones, their AdaINs and Snake alphas.
   * @param {string} name
   * @param {number} channels
   * @param {number} kernel
   * @param {number} style
   */
  adainResBlock1(name, channels, kernel, style) {
    const three = [0, 1, 2];
    for (const list of ['convs1', 'convs2']) for (const j of three) this.weightNorm(`${name}.${list}.${j}`, [channels, channels, kernel], channels);
    for (const list of ['adain1', 'adain2']) for (const j of three) this.adaNorm(`${name}.${list}.${j}`, style, channels);
    for (const list of ['alpha1', 'alpha2']) for (const j of three) this.add(`${name}.${list}.${j}`, [1, channels, 1], gain());
  }
  /**
   * The OrderedDict, with the _metadata state_dict() attaches: a version per module, here for each module that
   * holds a tensor (and the DataParallel wrapper, '').
   */
  toOrderedDict() {
    /** @type {Map<string, Map<string, number>>} */
    const metadata = new Map([['', new Map([['version', 1]])]]);
    for (const [key] of this.entries) {
      const parts = key.split('.');
      for (let n = 1; n < parts.length; n++) {
        const prefix = parts.slice(0, n).join('.');
        if (!metadata.has(prefix)) metadata.set(prefix, new Map([['version', 1]]));
      }
    }
    return new OrderedDict(this.entries, metadata);
  }
}

/**
 * duration_proj's weight [50, inputs]: every row is the direction all rows share (times 1.5) plus a direction of
 * its own, each of random signs, over sqrt(inputs). A token's 50 logits then move together, so durations differ
 * from token to token (1.4 to 7 frames on short phrases, seeds 1-3, af_heart and am_michael); with independent
 * rows they average out, and every token rounds to the same length.
 * @param {number} inputs
 * @param {number} seed
 */
function durationWeights(inputs, seed) {
  const shared = randomSigns(0, seed);
  const scale = 1 / Math.sqrt(inputs);
  return {
    values: (/** @type {number} */ i) => scale * (DURATION_SHARED_DIRECTION * shared(i % inputs) + randomSigns(1 + Math.floor(i / inputs), seed)(i % inputs)),
  };
}

/**
 * The five components of the checkpoint, as KModel builds them from `config` (hexgrad/kokoro model.py, modules.py,
 * istftnet.py; ALBERT as transformers' AlbertModel).
 * @param {KokoroConfig} config
 * @param {number} seed
 */
function components(config, seed) {
  const { hidden_dim: hidden, style_dim: style, n_token: tokens, n_layer: layers, max_dur: maxDuration, istftnet } = config;
  const albert = config.plbert;
  const embedding = 128; // AlbertConfig's default embedding_size, which Kokoro keeps

  const bert = new StateDict('bert', seed);
  bert.embedding('embeddings.word_embeddings', tokens, embedding);
  bert.embedding('embeddings.position_embeddings', albert.max_position_embeddings, embedding);
  bert.embedding('embeddings.token_type_embeddings', 2, embedding);
  bert.layerNorm('embeddings.LayerNorm', embedding);
  bert.linear('encoder.embedding_hidden_mapping_in', embedding, albert.hidden_size);
  const layer = 'encoder.albert_layer_groups.0.albert_layers.0'; // the one layer all are
  bert.layerNorm(`${layer}.full_layer_layer_norm`, albert.hidden_size);
  for (const projection of ['query', 'key', 'value', 'dense']) bert.linear(`${layer}.attention.${projection}`, albert.hidden_size, albert.hidden_size);
  bert.layerNorm(`${layer}.attention.LayerNorm`, albert.hidden_size);
  bert.linear(`${layer}.ffn`, albert.hidden_size, albert.intermediate_size);
  bert.linear(`${layer}.ffn_output`, albert.intermediate_size, albert.hidden_size);
  bert.linear('pooler', albert.hidden_size, albert.hidden_size);

  const bertEncoder = new StateDict('bert_encoder', seed);
  bertEncoder.linear('', albert.hidden_size, hidden);

  const predictor = new StateDict('predictor', seed);
  for (let i = 0; i < layers; i++) {
    predictor.lstm(`text_encoder.lstms.${2 * i}`, hidden + style, hidden / 2);
    predictor.adaNorm(`text_encoder.lstms.${2 * i + 1}`, style, hidden);
  }
  predictor.lstm('lstm', hidden + style, hidden / 2);
  predictor.linear('duration_proj.linear_layer', hidden, maxDuration, durationWeights(hidden, seed), { fill: DURATION_BIAS });
  predictor.lstm('shared', hidden + style, hidden / 2);
  for (const curve of ['F0', 'N']) {
    predictor.adainResBlk1d(`${curve}.0`, hidden, hidden, style);
    predictor.adainResBlk1d(`${curve}.1`, hidden, hidden / 2, style, true);
    predictor.adainResBlk1d(`${curve}.2`, hidden / 2, hidden / 2, style);
  }
  predictor.conv('F0_proj', hidden / 2, 1, 1, { fill: F0_BIAS });
  predictor.conv('N_proj', hidden / 2, 1, 1);

  const textEncoder = new StateDict('text_encoder', seed);
  textEncoder.embedding('embedding', tokens, hidden);
  for (let i = 0; i < layers; i++) {
    textEncoder.weightNorm(`cnn.${i}.0`, [hidden, hidden, config.text_encoder_kernel_size], hidden);
    textEncoder.add(`cnn.${i}.1.gamma`, [hidden], gain());
    textEncoder.add(`cnn.${i}.1.beta`, [hidden], zeros());
  }
  textEncoder.lstm('lstm', hidden, hidden / 2);

  // the decoder's widths are upstream's constants (istftnet.py Decoder): 1024 wide, 64 for the ASR residual
  const decoder = new StateDict('decoder', seed);
  const curves = 2; // F0 and N, one channel each
  const asrResidual = 64;
  decoder.adainResBlk1d('encode', hidden + curves, 1024, style);
  for (let i = 0; i < 4; i++) decoder.adainResBlk1d(`decode.${i}`, 1024 + curves + asrResidual, i < 3 ? 1024 : 512, style, i === 3);
  decoder.weightNorm('F0_conv', [1, 1, 3], 1);
  decoder.weightNorm('N_conv', [1, 1, 3], 1);
  decoder.weightNorm('asr_res.0', [asrResidual, hidden, 1], asrResidual);
  const { upsample_rates: rates, upsample_kernel_sizes: kernels, upsample_initial_channel: initial, gen_istft_n_fft: nFft } = istftnet;
  const widths = rates.map((_, i) => initial / 2 ** (i + 1));
  const harmonics = 9; // SineGen's fundamental and 8 overtones
  decoder.linear('generator.m_source.l_linear', harmonics, 1);
  rates.forEach((_, i) => {
    const stride = product(rates.slice(i + 1));
    decoder.conv(`generator.noise_convs.${i}`, nFft + 2, widths[i], i + 1 < rates.length ? 2 * stride : 1);
  });
  rates.forEach((_, i) => decoder.adainResBlock1(`generator.noise_res.${i}`, widths[i], i + 1 < rates.length ? 7 : 11, style));
  rates.forEach((_, i) => decoder.weightNorm(`generator.ups.${i}`, [initial / 2 ** i, widths[i], kernels[i]], widths[i]));
  rates.forEach((_, i) =>
    istftnet.resblock_kernel_sizes.forEach((kernel, j) =>
      decoder.adainResBlock1(`generator.resblocks.${i * istftnet.resblock_kernel_sizes.length + j}`, widths[i], kernel, style),
    ),
  );
  decoder.weightNorm('generator.conv_post', [nFft + 2, widths[widths.length - 1], 7], nFft + 2, POST_GAIN_SCALE);

  return new Map([
    ['bert', bert.toOrderedDict()],
    ['bert_encoder', bertEncoder.toOrderedDict()],
    ['predictor', predictor.toOrderedDict()],
    ['text_encoder', textEncoder.toOrderedDict()],
    ['decoder', decoder.toOrderedDict()],
  ]);
}

/**
 * The real voice packs as kokoro-js ships them, `<name>.bin` (raw float32 [510 * 256]), unpacked into `dest`.
 * @param {string} dest
 */
export function unpackVoicePacks(dest) {
  unpack(tarball(VOICES_PACKAGE), 'voices', dest, 2);
}

/**
 * Writes voices/<name>.pt for each voice pack of kokoro-js (its tarball fetched into the pack cache on first use).
 * @param {string} dir the model directory
 */
function writeVoices(dir) {
  const unpacked = path.join(dir, '.voices-bin');
  unpackVoicePacks(unpacked);
  const voices = path.join(dir, 'voices');
  fs.mkdirSync(voices);
  const names = fs.readdirSync(unpacked).filter((f) => f.endsWith('.bin'));
  if (names.length === 0) throw new Error(`${VOICES_PACKAGE.pkg}@${VOICES_PACKAGE.version} has no voices`);
  for (const file of names.sort()) {
    const bytes = fs.readFileSync(path.join(unpacked, file));
    if (bytes.length !== product(VOICE_SHAPE) * 4) throw new Error(`${file}: ${bytes.length} bytes, not float32 [${VOICE_SHAPE}]`);
    const name = file.slice(0, -'.bin'.length);
    const values = new Float32Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.length)); // little-endian hosts only
    writeTorchFile(path.join(voices, `${name}.pt`), name, new TorchTensor(VOICE_SHAPE, () => values));
  }
  fs.rmSync(unpacked, { recursive: true });
}

/** @typedef {{ dir: string, checkpoint: string, config: string, voices: string }} KokoroPaths */

/**
 * @param {string} dir
 * @returns {KokoroPaths}
 */
function pathsIn(dir) {
  return { dir, checkpoint: path.join(dir, KOKORO_CHECKPOINT), config: path.join(dir, 'config.json'), voices: path.join(dir, 'voices') };
}

/**
 * Writes a model's directory at `dir` (not atomically).
 * @param {string} dir
 * @param {KokoroOptions} [options]
 */
function writeModel(dir, options) {
  const { seed } = normalise(options);
  const config = kokoroTestModelConfig(options);
  fs.mkdirSync(dir);
  fs.writeFileSync(path.join(dir, 'config.json'), JSON.stringify(config, null, 2));
  writeTorchFile(path.join(dir, KOKORO_CHECKPOINT), 'kokoro-v1_0', components(config, seed));
  writeVoices(dir);
}

/**
 * Writes a model into `outDir` (built under a temporary name beside it and renamed into place).
 * @param {string} outDir
 * @param {KokoroOptions} [options]
 * @returns {Promise<KokoroPaths>}
 */
export async function writeKokoroTestModel(outDir, options) {
  normalise(options);
  const dir = path.resolve(outDir);
  await writeAtomically(dir, (tmp) => writeModel(tmp, options));
  return pathsIn(dir);
}

/**
 * The cache directory of a model with these options.
 * @param {KokoroOptions} [options]
 */
export function kokoroTestModelDir(options) {
  const { size, seed } = normalise(options);
  return path.join(testModelsDir(), `kokoro-${size}-random-s${seed}-v${FORMAT_VERSION}`);
}

/**
 * A cached random-weight model for these options (written on first use).
 * @param {KokoroOptions} [options]
 * @returns {Promise<KokoroPaths>}
 */
export async function makeKokoroTestModel(options) {
  const paths = pathsIn(kokoroTestModelDir(options));
  normalise(options);
  await cachedBuild(
    paths.dir,
    () => fs.existsSync(paths.checkpoint),
    (tmp) => writeModel(tmp, options),
  );
  return paths;
}

await runAsCli(import.meta.url, 'make-kokoro-test-model', async (args) => {
  const { options, out } = parseArgs(args, { '--size': ['size', 'string'], '--seed': ['seed', 'number'] });
  console.log((out ? await writeKokoroTestModel(out, options) : await makeKokoroTestModel(options)).dir);
});
