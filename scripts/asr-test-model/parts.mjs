// What both audio language models of make-asr-test-model.mjs share: the mmproj's encoder keys, the Whisper-style
// audio encoder's transformer (Qwen3-ASR's and Voxtral's differ only in the key projection's bias and what comes
// before and after it), and the language model's vocabulary rows and last FFN, which make greedy decoding decisive.
// Everything here fixes those models' bytes: change it only together with make-asr-test-model.mjs's FORMAT_VERSION.
import { GGML_TYPE_F32 } from '../gguf/ggml.mjs';
import { kv } from '../gguf/writer.mjs';
import { fanIn, gain, randomSigns, tensor, zeros } from '../test-model-common.mjs';
import { bpeWords, TOKEN_NORMAL } from '../test-model-vocab.mjs';

/** @typedef {import('../test-model-common.mjs').Tensor} Tensor */
/** @typedef {{ embd: number, audioEmbd: number, audioHead: number, audioFf: number, audioLayer: number }} EncoderDims the language model's width and the encoder's shape */

// The encoder's positions: Whisper's 1500 (30 s at 50 per second), which both converters write whatever the
// graph reads of them (Qwen3-ASR's the first 13, one 100-frame chunk's worth).
const AUDIO_POSITIONS = 1500;

/**
 * A LayerNorm's gain and bias.
 * @param {string} name
 * @param {number} dim
 */
function layerNorm(name, dim) {
  return [tensor(`${name}.weight`, [dim], gain()), tensor(`${name}.bias`, [dim], zeros())];
}

/**
 * A linear layer with a bias, fan-in scaled.
 * @param {string} name
 * @param {number} inDim
 * @param {number} outDim
 */
export function linear(name, inDim, outDim, scale = 1) {
  return [tensor(`${name}.weight`, [inDim, outDim], fanIn(inDim, scale)), tensor(`${name}.bias`, [outDim], zeros())];
}

/**
 * The audio encoder's positions as the converters write them (f32, as they keep position embeddings): Whisper's
 * sinusoids, sin over the first half of the channels and cos over the second, timescales from 1 to 10000.
 * @param {number} channels
 */
function sinusoidPositions(channels) {
  const half = channels / 2;
  const increment = Math.log(10000) / (half - 1);
  return tensor(
    'a.position_embd.weight',
    [channels, AUDIO_POSITIONS],
    {
      values: (i) => {
        const c = i % channels;
        const angle = Math.floor(i / channels) * Math.exp(-increment * (c % half));
        return c < half ? Math.sin(angle) : Math.cos(angle);
      },
    },
    GGML_TYPE_F32,
  );
}

/**
 * The mmproj's keys that describe the audio encoder, as the converter's MmprojModel writes them.
 * @param {EncoderDims} d
 */
export function audioEncoderKeys(d) {
  return {
    'clip.has_audio_encoder': kv.bool(true),
    'clip.audio.projection_dim': kv.u32(d.embd),
    'clip.audio.embedding_length': kv.u32(d.audioEmbd),
    'clip.audio.feed_forward_length': kv.u32(d.audioFf),
    'clip.audio.block_count': kv.u32(d.audioLayer),
    'clip.audio.attention.head_count': kv.u32(d.audioHead),
  };
}

/**
 * A convolution of the encoder's front end: kernel `kernel` (ggml order, output channels last; f16, as the
 * converter forces convolutions) and a bias of shape `bias` (f32, as the converter keeps biases whatever their
 * rank, which its reshapes leave with leading 1s).
 * @param {string} name
 * @param {number[]} kernel
 * @param {number[]} bias
 */
export function frontConv(name, kernel, bias) {
  const inputs = kernel.slice(0, -1).reduce((a, b) => a * b, 1);
  return [tensor(`${name}.weight`, kernel, fanIn(inputs)), tensor(`${name}.bias`, bias, zeros(), GGML_TYPE_F32)];
}

/**
 * The transformer of a Whisper-style audio encoder, between its convolutional front end and its projector: the
 * positions, pre-norm layers (LayerNorm, attention with biased projections, LayerNorm, GELU MLP) and the final
 * LayerNorm, under clip.cpp's names. Whisper's key projection has no bias; Qwen3-ASR's has one.
 * @param {EncoderDims} d
 * @param {{ keyBias: boolean }} options
 */
export function audioTransformer(d, { keyBias }) {
  const e = d.audioEmbd;
  /** @type {Tensor[]} */
  const tensors = [sinusoidPositions(e)];
  for (let i = 0; i < d.audioLayer; i++) {
    const b = `a.blk.${i}`;
    const [keyWeight, keyBiasTensor] = linear(`${b}.attn_k`, e, e);
    tensors.push(
      ...layerNorm(`${b}.ln1`, e),
      ...linear(`${b}.attn_q`, e, e),
      ...(keyBias ? [keyWeight, keyBiasTensor] : [keyWeight]),
      ...linear(`${b}.attn_v`, e, e),
      ...linear(`${b}.attn_out`, e, e, 0.5),
      ...layerNorm(`${b}.ln2`, e),
      ...linear(`${b}.ffn_up`, e, d.audioFf),
      ...linear(`${b}.ffn_down`, d.audioFf, e, 0.5),
    );
  }
  tensors.push(...layerNorm('a.post_ln', e));
  return tensors;
}

// ---- the language model: decisive greedy decoding ----
//
// With random weights, greedy decoding picks each token among near-equal logits: in a random variant of the tiny
// Qwen3-ASR model the runner-up came within 0.05 of the winner over 64 steps, while flash attention on or off moved the
// logits by up to 0.4, so two implementations would part ways within a transcript. So the language model is a word
// chain instead. The whole words' rows (test-model-vocab.mjs's bpeWords, 107 of them) carry random sign patterns wide
// enough to make up about 0.8 of the residual stream, and the last block's FFN is a key-value memory over them
// (wordChain): the current word's neurons write the pattern of the next word in bpeWords order (the last wraps to the
// first) at three times the stream's size, so the next word leads by tens of units (20 at the tiny sizes, 100 at the
// realistic ones), far beyond float rounding. The first token follows the prompt's last token, which is no word; the
// random layers draw it from the words, from the audio and the prompt: the one close call of a transcript (a lead of
// 0.1 to 5 units in the checks, rounding moving logits by 0.05 at most). Other ordinary tokens' rows are a tenth as
// wide, so the words win that draw; special and unused rows (end of turn and end of text among them) are narrower
// still, so they never win and a transcript runs to the caller's token limit.

// a word's row RMS per sqrt(layer): each layer adds about 0.5 to the residual stream's RMS, so at the last block the
// word is about KEY_SHARE of it
const WORD_RMS_PER_ROOT_LAYER = 0.7;
const KEY_SHARE = 0.8;
const ORDINARY_GAIN = 0.1;
const SPECIAL_GAIN = 0.03;
const CHAIN_GAIN = 3;
// A random direction's logit spread over the words' rows (the output scale sets it): the chain's next word, aligned
// with the normalised hidden state, scores about 0.95 sqrt(embd) times that.
export const WORD_LOGIT_STD = 5;

/**
 * The RMS of a word's row for a language model of `layers` blocks.
 * @param {number} layers
 */
export function wordRms(layers) {
  return WORD_RMS_PER_ROOT_LAYER * Math.sqrt(layers);
}

/**
 * A vocabulary-sized matrix [width, tokens]: each row a random sign pattern (test-model-common.mjs's randomSigns,
 * keyed by the token id) times `wordScale` for whole words, ORDINARY_GAIN of it for other ordinary tokens and
 * SPECIAL_GAIN of it for special and unused ones.
 * @param {number} width
 * @param {string[]} tokens
 * @param {number[]} types
 * @param {number} wordScale
 * @returns {import('../test-model-common.mjs').TensorInit}
 */
export function vocabularyRows(width, tokens, types, wordScale) {
  const words = new Set(bpeWords());
  const scales = tokens.map((t, id) => wordScale * (types[id] !== TOKEN_NORMAL ? SPECIAL_GAIN : words.has(t) ? 1 : ORDINARY_GAIN));
  // rows are filled in order: their signs are drawn once per row
  let row = -1;
  let rowSeed = 0;
  let signs = randomSigns(0, 0);
  return {
    values: (i, seed) => {
      if (Math.floor(i / width) !== row || seed !== rowSeed) {
        row = Math.floor(i / width);
        rowSeed = seed;
        signs = randomSigns(row, seed);
      }
      return scales[row] * signs(i % width);
    },
  };
}

/**
 * The chain: the FFN of block `block`, for an embedding of `embd`, `ff` neurons (at least twice the number of words;
 * the rest stay silent) and word rows of RMS `wordScale` in the residual stream. Each word has two neurons, keyed
 * (gate and up) by its sign pattern and by the negated pattern, writing (down) the next word's pattern and its
 * negation: SwiGLU makes the pair's output z^2 tanh(z / 2) times the pattern, z the key's match, so a present word
 * (z large) writes the next word's pattern and the other pairs add noise with no mean, which would otherwise favour
 * the same few words whatever the audio.
 * @param {string} block
 * @param {number} embd
 * @param {number} ff
 * @param {string[]} tokens
 * @param {number} wordScale
 */
export function wordChain(block, embd, ff, tokens, wordScale) {
  const ids = new Map(tokens.map((t, id) => [t, id]));
  const words = bpeWords().map((w) => /** @type {number} */ (ids.get(w)));
  const n = words.length;
  if (2 * n > ff) throw new Error(`${n} words need ${2 * n} FFN neurons, not ${ff}`);
  // a word's key meets the normalised residual stream at KEY_SHARE * sqrt(embd), so its neuron gives about
  // KEY_SHARE^2 * embd; its output should be CHAIN_GAIN times the stream's norm, wordScale * sqrt(embd) / KEY_SHARE
  const keyScale = 1 / Math.sqrt(embd);
  const valueScale = (CHAIN_GAIN * wordScale) / (KEY_SHARE ** 3 * embd);
  /** the neuron's word (its index in `words`) and sign, or null for a silent neuron */
  const role = (/** @type {number} */ neuron) => (neuron < 2 * n ? { word: neuron % n, sign: neuron < n ? 1 : -1 } : null);
  /** @type {import('../test-model-common.mjs').TensorInit} */
  const key = {
    values: (i, seed) => {
      const r = role(Math.floor(i / embd));
      return r ? r.sign * keyScale * randomSigns(words[r.word], seed)(i % embd) : 0;
    },
  };
  /** @type {import('../test-model-common.mjs').TensorInit} */
  const value = {
    values: (i, seed) => {
      const r = role(i % ff);
      return r ? r.sign * valueScale * randomSigns(words[(r.word + 1) % n], seed)(Math.floor(i / ff)) : 0;
    },
  };
  return [
    tensor(`${block}.ffn_gate.weight`, [embd, ff], key),
    tensor(`${block}.ffn_up.weight`, [embd, ff], key),
    tensor(`${block}.ffn_down.weight`, [ff, embd], value),
  ];
}

/**
 * `tensors` with those of the same name replaced by `replacements`, in place.
 * @param {Tensor[]} tensors
 * @param {Tensor[]} replacements
 */
export function replaceTensors(tensors, replacements) {
  const byName = new Map(replacements.map((t) => [t.name, t]));
  return tensors.map((t) => byName.get(t.name) ?? t);
}
