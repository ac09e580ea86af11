#!/usr/bin/env node
// Writes random-weight Parakeet TDT models (NVIDIA's FastConformer encoder, LSTM prediction network and
// token-and-duration joint) in the ggml format of whisper.cpp's libparakeet: what its
// models/convert-parakeet-to-ggml.py writes from a .nemo checkpoint and src/parakeet.cpp's parakeet_model_load reads.
// The text they produce is garbage; their shapes, timing and memory are the real ones'.
//
//   node scripts/make-parakeet-test-model.mjs [--size tiny|realistic] [--en] [--seed N] [--out PATH]
//
// Without --out the file goes to the cache (build/test-models, or $VOXD_TEST_MODELS_DIR) under a name keyed by the
// options, and an existing file there is reused. Output is deterministic for given options (byte for byte).
//
// The file: the magic, 15 int32 hparams (HPARAM_ORDER), the mel filter bank (int32 n_mel, int32 n_fft/2+1, f32
// rows), the STFT window (int32 length, f32 values), the TDT durations (uint32 each), the vocabulary (int32 count,
// then int32 length + UTF-8 bytes per SentencePiece piece; the blank is not stored: it is id n_vocab), then one
// record per tensor, in the order of NeMo's state dict. Types as the converter writes an f16 file (ftype 1):
// matrices f16; vectors, the subsampling convolutions, the depthwise kernels and pos_bias_u/v f32; the batch norms'
// num_batches_tracked a 0-dimensional f32. The converter has folded each LSTM layer's two biases into one
// (bias_h_l<N>) and put its gates in the order i, f, o, g.
//
// Models:
//   multilingual (default)  v3-like: 8192 pieces, among them Latin letters with diacritics, Cyrillic and Greek
//   --en                    v2-like: 1024 pieces, ASCII only (test-model-vocab.mjs's English pieces)
//   --size tiny             2 layers x 64 (2 heads), subsampling channels 16, prediction network 2 x 64
//   --size realistic        the released 0.6B shapes: 24 layers x 1024 (8 heads), subsampling channels 256,
//                           prediction network 2 x 640 (both v2 and v3; their vocabularies differ)
// Both sizes keep the real front end (128 mel bands, 512-point FFT, 400-sample window), convolution kernel (9),
// durations (0-4), at most 10 symbols per frame and n_audio_ctx 5000, so every path of the loader and the graphs
// is taken. The vocabulary is synthetic, not NVIDIA's.
//
// Checked against whisper.cpp 1.9.1 (third_party/whisper.cpp): its parakeet-cli loads every variant and transcribes
// the clips of ../shared/audio/speech, and a layout check accepts these files and the output of upstream's
// models/generate-parakeet-test-model.py alike. Tuned (the joint's constants below) with parakeet-cli -ng -t 2 -ps
// on those clips, 2 cores:
//   tiny       2.9 MB (v3), 1.0 MB (v2), written in well under a second; jfk.wav (11 s, 138 frames): 44 tokens,
//              26 distinct, durations 1-3 (v2: 47 tokens, durations 0-4), 60 ms a clip; seed 2 reaches the limit
//              of 10 symbols in a frame
//   realistic  1256 MB, written in about 30 s; jfk.wav: 37 tokens, encoder 2.6 s, 3.5 s in all
import { Buffer } from 'node:buffer';
import path from 'node:path';
import { checkChoice, checkSeed, fanIn, runGeneratorCli, singleFileGenerator, tensor, tensorData, testModelsDir, zeros } from './test-model-common.mjs';
import { GGML_FILE_MAGIC, GGML_TYPE_F32, writeGgmlFile } from './gguf/ggml.mjs';
import { sentencePieces } from './test-model-vocab.mjs';

// bumped whenever the output for given options changes, so stale cache entries are not reused
const FORMAT_VERSION = 1;

const SAMPLE_RATE = 16000;
const WINDOW_LENGTH = 400; // NeMo's window_size 0.025 s, centred in the 512-point frame
const TDT_DURATIONS = [0, 1, 2, 3, 4];

const SIZES = {
  tiny: { state: 64, head: 2, layer: 2, subsamplingChannels: 16, predDim: 64, predLayers: 2 },
  realistic: { state: 1024, head: 8, layer: 24, subsamplingChannels: 256, predDim: 640, predLayers: 2 },
};

/** The hparams in file order: the names of parakeet_hparams' fields, read one int32 each. */
const HPARAM_ORDER = /** @type {const} */ ([
  'n_vocab',
  'n_audio_ctx',
  'n_audio_state',
  'n_audio_head',
  'n_audio_layer',
  'n_mels',
  'ftype',
  'n_fft',
  'subsampling_factor',
  'n_subsampling_channels',
  'n_conv_kernel',
  'n_pred_dim',
  'n_pred_layers',
  'n_tdt_durations',
  'n_max_tokens',
]);
/** @typedef {Record<typeof HPARAM_ORDER[number], number>} Hparams */
/** @typedef {{ size?: string, en?: boolean, seed?: number }} ParakeetOptions */

/** @param {ParakeetOptions} [options] */
function normaliseOptions({ size = 'tiny', en = false, seed = 1 } = {}) {
  checkChoice('size', size, SIZES);
  checkSeed(seed);
  return { size, en: Boolean(en), seed };
}

/**
 * The hparams a model with these options has.
 * @param {ParakeetOptions} [options]
 * @returns {Hparams}
 */
export function parakeetTestModelHparams(options = {}) {
  const { size, en } = normaliseOptions(options);
  const d = SIZES[size];
  return {
    n_vocab: en ? 1024 : 8192,
    n_audio_ctx: 5000, // the converter's constant: longer audio takes libparakeet's other path (one graph per length)
    n_audio_state: d.state,
    n_audio_head: d.head,
    n_audio_layer: d.layer,
    n_mels: 128,
    ftype: 1, // mostly f16
    n_fft: 512,
    subsampling_factor: 8,
    n_subsampling_channels: d.subsamplingChannels,
    n_conv_kernel: 9,
    n_pred_dim: d.predDim,
    n_pred_layers: d.predLayers,
    n_tdt_durations: TDT_DURATIONS.length,
    n_max_tokens: 10, // NeMo's decoding.greedy.max_symbols
  };
}

// ---- front end and vocabulary ----

/**
 * librosa's mel filter bank as NeMo builds it (Slaney's mel scale from 0 Hz to Nyquist, each triangle scaled to
 * unit area): n_mels rows of n_fft / 2 + 1 weights.
 * @param {number} nMels
 * @param {number} nFft
 */
function melFilters(nMels, nFft) {
  const nFreqs = nFft / 2 + 1;
  const hzPerMel = 200 / 3; // linear below 1 kHz, logarithmic above
  const logStep = Math.log(6.4) / 27;
  const breakMel = 1000 / hzPerMel;
  const toMel = (/** @type {number} */ hz) => (hz < 1000 ? hz / hzPerMel : breakMel + Math.log(hz / 1000) / logStep);
  const toHz = (/** @type {number} */ mel) => (mel < breakMel ? mel * hzPerMel : 1000 * Math.exp(logStep * (mel - breakMel)));
  const top = toMel(SAMPLE_RATE / 2);
  const edges = Array.from({ length: nMels + 2 }, (_, i) => toHz((top * i) / (nMels + 1)));
  const out = new Float32Array(nMels * nFreqs);
  for (let m = 0; m < nMels; m++) {
    const [low, centre, high] = [edges[m], edges[m + 1], edges[m + 2]];
    for (let k = 0; k < nFreqs; k++) {
      const hz = (k * SAMPLE_RATE) / nFft;
      const rise = (hz - low) / (centre - low);
      const fall = (high - hz) / (high - centre);
      out[m * nFreqs + k] = (Math.max(0, Math.min(rise, fall)) * 2) / (high - low);
    }
  }
  return out;
}

/**
 * The symmetric Hann window NeMo stores (torch.hann_window(n, periodic=False)).
 * @param {number} n
 */
function hannWindow(n) {
  return Float32Array.from({ length: n }, (_, i) => 0.5 - 0.5 * Math.cos((2 * Math.PI * i) / (n - 1)));
}

// What v3's 25 European languages add to the English pieces (which are ASCII, so none of these is among them):
// letters with diacritics, Cyrillic and Greek, lower and upper case, alone and starting a word, and short words.
const EXTRA_LETTERS =
  'àáâãäåæçèéêëìíîïñòóôõöøùúûüýÿßœąćęłńśźżčďěňřšťůžőűășțāēīūļķņģėįų' + 'абвгдежзийклмнопрстуфхцчшщъыьэюяєіїґ' + 'αβγδεζηθικλμνξοπρστυφχψωάέήίόύώ';
const EXTRA_WORDS = 'für über où été más está già però när på że się už več még või и в не на что это και το να είναι';
const SPACE = '\u2581'; // SentencePiece's escaped space: a piece that starts a word

/**
 * The vocabulary: test-model-vocab.mjs's English SentencePiece pieces (<unk>, <s>, </s> first, then the bare
 * space piece, characters with punctuation, words, letter pairs and triples), then for v3 the multilingual pieces.
 * @param {number} size
 * @param {boolean} en
 */
function vocabulary(size, en) {
  const letters = [...EXTRA_LETTERS].flatMap((ch) => [ch, ch.toUpperCase()]).filter((ch) => ch.length === 1 && ch.charCodeAt(0) > 0x7f); // 'ß'.toUpperCase() is 'SS'
  const extra = en ? [] : [...new Set([...letters.flatMap((ch) => [ch, SPACE + ch]), ...EXTRA_WORDS.split(' ').map((w) => SPACE + w)])];
  return [...sentencePieces(size - extra.length).map(([piece]) => piece), ...extra];
}

// ---- tensors ----

// Weights are N(0, 1/fan_in), scaled by sqrt(2) where a ReLU or SiLU (which keep about half the power) comes before
// (and across the subsampling convolutions), so activations keep their scale through the random stack. Norm gains,
// the batch norms' statistics and every bias are random too (gains 1 +- 0.1, running variances 1 +- 0.2: positive,
// since the normal numbers are bounded by 3.46 std): an implementation that drops one of them, or pads a sequence
// where the reference does not, gives different numbers.
const RELU_GAIN = Math.SQRT2;
const SHIFT = { std: 0.1 };
const GAIN = { mean: 1, std: 0.1 };

// What makes decoding behave like speech's, tuned with parakeet-cli on ../shared/audio/speech (section "Tuned" in
// the header). The joint's output row is n_vocab token logits, the blank's, then one per duration; greedy decoding
// takes the best token (or blank) and, separately, the best duration. Its weights are centred per row
// (centredRows) and scaled so that a token's logit varies by about 1 from frame to frame; the best of n_vocab such
// logits is near sqrt(2 ln n_vocab), and the blank's bias puts it BLANK_MARGIN from there (blank wins most frames,
// a token every few). The control pieces never win (a trained model never emits <s> or </s>), punctuation wins a
// little more often than a random piece (so its timestamps get collapsed, as the reference does), and advancing
// 1-4 frames is favoured over staying (0), which a token may do up to n_max_tokens times in a row. The attention's
// output is scaled down: random attention averages over the whole clip, the same vector at every frame, which
// would otherwise swamp what differs between frames and let the same few tokens win everywhere. The prediction
// network's weight in the joint makes the last token change the next decision.
const JOINT_GAIN = 2;
const ATTENTION_OUT_GAIN = 0.2; // at 2 layers; divided by sqrt(layers / 2), since every layer adds its average
const PRED_GAIN = 3;
const BLANK_MARGIN = -1;
const CONTROL_BIAS = -10;
const CONTROL_PIECES = ['<unk>', '<s>', '</s>'];
const PUNCTUATION_BIAS = 1.5;
const PUNCTUATION = ['.', ',', '?', '!'];
const DURATION_BIAS = [0, 0.5, 0.5, 0.5, 0.5];

/**
 * N(0, std) weights whose rows (one per output, ne[0] wide) each sum to 0. The joint's input is a ReLU's output,
 * all positive: with plain random rows, each output would get a fixed offset (its row's sum times the inputs'
 * mean) that outweighs what varies from frame to frame, and the same few tokens and durations would win
 * everywhere.
 * @param {string} name
 * @param {number[]} ne
 * @param {{ std: number }} init
 * @param {number} seed
 */
function centredRows(name, ne, init, seed) {
  const values = /** @type {Float32Array} */ (tensorData(tensor(name, ne, init, GGML_TYPE_F32), seed));
  const width = ne[0];
  for (let row = 0; row < values.length; row += width) {
    const mean = values.subarray(row, row + width).reduce((a, b) => a + b, 0) / width;
    for (let i = row; i < row + width; i++) values[i] -= mean;
  }
  return { values: (/** @type {number} */ i) => values[i] };
}

/**
 * The joint's output biases: tokens (by piece), blank, durations.
 * @param {Hparams} h
 * @param {string[]} pieces
 */
function jointBias(h, pieces) {
  const blank = Math.sqrt(2 * Math.log(h.n_vocab)) + BLANK_MARGIN;
  const token = (/** @type {string} */ piece) => (CONTROL_PIECES.includes(piece) ? CONTROL_BIAS : PUNCTUATION.includes(piece) ? PUNCTUATION_BIAS : 0);
  return (/** @type {number} */ i) => (i < h.n_vocab ? token(pieces[i]) : i === h.n_vocab ? blank : DURATION_BIAS[i - h.n_vocab - 1]);
}

/**
 * Every tensor parakeet_model_load creates, in the order of NeMo's state dict (the converter's order):
 * pre_encode (ConvSubsampling "dw_striding": conv 3x3 stride 2, ReLU, then twice depthwise 3x3 stride 2 +
 * pointwise 1x1 + ReLU, then a linear layer), the conformer layers, the prediction network, the joint.
 * @param {Hparams} h
 * @param {string[]} pieces
 * @param {number} seed
 */
function tensorList(h, pieces, seed) {
  const d = h.n_audio_state;
  const c = h.n_subsampling_channels;
  const p = h.n_pred_dim;
  const f32 = GGML_TYPE_F32;
  /** @type {(i: number, ne: number[], fan: number) => import('./test-model-common.mjs').Tensor[]} */
  const conv = (i, ne, fan) => [
    tensor(`encoder.pre_encode.conv.${i}.weight`, ne, fanIn(fan, RELU_GAIN), f32),
    tensor(`encoder.pre_encode.conv.${i}.bias`, [1, 1, c, 1], SHIFT, f32), // the converter's (1, C, 1, 1)
  ];
  const list = [
    ...conv(0, [3, 3, 1, c], 9),
    ...conv(2, [3, 3, 1, c], 9),
    ...conv(3, [1, 1, c, c], c),
    ...conv(5, [3, 3, 1, c], 9),
    ...conv(6, [1, 1, c, c], c),
    tensor('encoder.pre_encode.out.weight', [(h.n_mels / h.subsampling_factor) * c, d], fanIn((h.n_mels / h.subsampling_factor) * c, RELU_GAIN)),
    tensor('encoder.pre_encode.out.bias', [d], SHIFT),
  ];
  for (let l = 0; l < h.n_audio_layer; l++) {
    const at = (/** @type {string} */ name) => `encoder.layers.${l}.${name}`;
    const norm = (/** @type {string} */ name) => [tensor(at(`${name}.weight`), [d], GAIN), tensor(at(`${name}.bias`), [d], SHIFT)];
    const feedForward = (/** @type {string} */ name) => [
      tensor(at(`${name}.linear1.weight`), [d, 4 * d], fanIn(d)),
      tensor(at(`${name}.linear2.weight`), [4 * d, d], fanIn(4 * d, RELU_GAIN)),
    ];
    list.push(
      ...norm('norm_feed_forward1'),
      ...feedForward('feed_forward1'),
      ...norm('norm_conv'),
      tensor(at('conv.pointwise_conv1.weight'), [d, 2 * d], fanIn(d)),
      tensor(at('conv.depthwise_conv.weight'), [h.n_conv_kernel, d], fanIn(h.n_conv_kernel), f32),
      tensor(at('conv.batch_norm.weight'), [d], GAIN),
      tensor(at('conv.batch_norm.bias'), [d], SHIFT),
      tensor(at('conv.batch_norm.running_mean'), [d], SHIFT),
      tensor(at('conv.batch_norm.running_var'), [d], { mean: 1, std: 0.2 }),
      tensor(at('conv.batch_norm.num_batches_tracked'), [], zeros(), f32), // a 0-d tensor; the loader reads it as i32
      tensor(at('conv.pointwise_conv2.weight'), [d, d], fanIn(d, RELU_GAIN)),
      ...norm('norm_self_att'),
      tensor(at('self_attn.pos_bias_u'), [d / h.n_audio_head, h.n_audio_head], SHIFT, f32),
      tensor(at('self_attn.pos_bias_v'), [d / h.n_audio_head, h.n_audio_head], SHIFT, f32),
      ...['linear_q', 'linear_k', 'linear_v', 'linear_pos'].map((name) => tensor(at(`self_attn.${name}.weight`), [d, d], fanIn(d))),
      tensor(at('self_attn.linear_out.weight'), [d, d], fanIn(d, ATTENTION_OUT_GAIN / Math.sqrt(h.n_audio_layer / 2))),
      ...norm('norm_feed_forward2'),
      ...feedForward('feed_forward2'),
      ...norm('norm_out'),
    );
  }
  // the blank (id n_vocab) has the last row; NeMo's embedding is N(0, 1)
  list.push(tensor('decoder.prediction.embed.weight', [p, h.n_vocab + 1], { std: 1 }));
  for (let l = 0; l < h.n_pred_layers; l++) {
    const lstm = 'decoder.prediction.dec_rnn.lstm';
    list.push(
      tensor(`${lstm}.weight_ih_l${l}`, [p, 4 * p], fanIn(p)),
      tensor(`${lstm}.weight_hh_l${l}`, [p, 4 * p], fanIn(p)),
      tensor(`${lstm}.bias_h_l${l}`, [4 * p], SHIFT),
    );
  }
  const nJoint = h.n_vocab + 1 + h.n_tdt_durations;
  list.push(
    tensor('joint.pred.weight', [p, p], fanIn(p, PRED_GAIN)),
    tensor('joint.pred.bias', [p], SHIFT),
    tensor('joint.enc.weight', [d, p], fanIn(d)),
    tensor('joint.enc.bias', [p], SHIFT),
    tensor('joint.joint_net.2.weight', [p, nJoint], centredRows('joint.joint_net.2.weight', [p, nJoint], fanIn(p, JOINT_GAIN), seed)),
    tensor('joint.joint_net.2.bias', [nJoint], { values: jointBias(h, pieces) }),
  );
  return list;
}

// ---- the file ----

/**
 * Everything before the tensors: magic, hparams, mel filters, window, durations, vocabulary.
 * @param {Hparams} h
 * @param {string[]} pieces
 */
function preamble(h, pieces) {
  const int32s = (/** @type {number[]} */ values) => Buffer.from(Int32Array.from(values).buffer);
  const filters = melFilters(h.n_mels, h.n_fft);
  const window = hannWindow(WINDOW_LENGTH);
  const parts = [
    int32s([GGML_FILE_MAGIC, ...HPARAM_ORDER.map((key) => h[key])]),
    int32s([h.n_mels, h.n_fft / 2 + 1]),
    Buffer.from(filters.buffer),
    int32s([window.length]),
    Buffer.from(window.buffer),
    Buffer.from(Uint32Array.from(TDT_DURATIONS).buffer),
    int32s([pieces.length]),
  ];
  for (const piece of pieces) {
    const bytes = Buffer.from(piece, 'utf8');
    parts.push(int32s([bytes.length]), bytes);
  }
  return Buffer.concat(parts); // little-endian hosts only, as the tensors
}

/**
 * The cache path of a model with these options.
 * @param {ParakeetOptions} [options]
 */
export function parakeetTestModelPath(options = {}) {
  const { size, en, seed } = normaliseOptions(options);
  return path.join(testModelsDir(), `ggml-parakeet-tdt-${size}${en ? '.en' : ''}-random-s${seed}-v${FORMAT_VERSION}.bin`);
}

/**
 * Writes a model with normalised options to `file` (not atomically: the callers rename it into place).
 * @param {string} file
 * @param {ReturnType<typeof normaliseOptions>} options
 */
async function writeModel(file, options) {
  const h = parakeetTestModelHparams(options);
  const pieces = vocabulary(h.n_vocab, options.en);
  await writeGgmlFile(file, preamble(h, pieces), tensorList(h, pieces, options.seed), (t) => tensorData(t, options.seed));
}

const generator = singleFileGenerator(normaliseOptions, parakeetTestModelPath, writeModel);

/**
 * Writes a model to `out` (atomically: a temporary file renamed into place); resolves to `out`.
 * @type {(out: string, options?: ParakeetOptions) => Promise<string>}
 */
export const writeParakeetTestModel = generator.write;

/**
 * A cached random-weight model for these options (generated on first use); resolves to its path.
 * @type {(options?: ParakeetOptions) => Promise<string>}
 */
export const makeParakeetTestModel = generator.make;

await runGeneratorCli(
  import.meta.url,
  'make-parakeet-test-model',
  { '--size': ['size', 'string'], '--en': ['en', 'flag'], '--seed': ['seed', 'number'] },
  generator,
);
