// What the GGUF test models (make-tts-test-model.mjs, make-asr-test-model.mjs) share besides the general.* keys and
// the tensors' weights (test-model-common.mjs): convolutions, the Qwen3 decoder that Qwen3-TTS's talker and
// Qwen3-ASR's language model both are (Voxtral's Llama decoder is the same without the q/k norms) and Qwen2's
// tokenizer keys. Everything here fixes those models' bytes: change it only together with both scripts'
// FORMAT_VERSION.
import { fanIn, gain, tensor, zeros } from './test-model-common.mjs';
import { kv } from './gguf/writer.mjs';

/** @typedef {import('./test-model-common.mjs').Tensor} Tensor */

/**
 * A conv: kernel [K, IC, OC] (f16, as ggml_conv_1d needs) and bias [OC].
 * @param {string} name
 * @param {number} k
 * @param {number} ic
 * @param {number} oc
 */
export function conv(name, k, ic, oc, scale = 1) {
  return [tensor(`${name}.weight`, [k, ic, oc], fanIn(k * ic, scale)), tensor(`${name}.bias`, [oc], zeros())];
}

// ---- the Qwen3 decoder (llama.cpp's qwen3vl graph and its relatives) and the Llama decoder ----

/** @typedef {{ embd: number, head: number, headKv: number, headDim: number, layer: number, ff: number }} Qwen3Dims */

/** The released Qwen3-0.6B decoder's shape, which Qwen3-TTS-12Hz-0.6B's talker and Qwen3-ASR-0.6B's LM share. */
export const QWEN3_0_6B = { embd: 1024, head: 16, headKv: 8, headDim: 128, layer: 28, ff: 3072 };

/**
 * A Qwen3 decoder's hyperparameters under `arch`, in the converter's order: RMSNorm, grouped-query attention with
 * head size `headDim` (which need not be embd / head), rope base 1e6, and interleaved M-RoPE sections (temporal,
 * height, width, extra) in rotary pairs, in the release's proportions 24:20:20 of 64.
 * @param {string} arch
 * @param {Qwen3Dims} d
 * @param {number} nVocab
 * @param {number} contextLength
 */
export function qwen3DecoderKeys(arch, d, nVocab, contextLength) {
  const pairs = d.headDim / 2;
  return {
    [`${arch}.vocab_size`]: kv.u32(nVocab),
    [`${arch}.context_length`]: kv.u32(contextLength),
    [`${arch}.embedding_length`]: kv.u32(d.embd),
    [`${arch}.feed_forward_length`]: kv.u32(d.ff),
    [`${arch}.block_count`]: kv.u32(d.layer),
    [`${arch}.attention.head_count`]: kv.u32(d.head),
    [`${arch}.attention.head_count_kv`]: kv.u32(d.headKv),
    [`${arch}.attention.key_length`]: kv.u32(d.headDim),
    [`${arch}.attention.value_length`]: kv.u32(d.headDim),
    [`${arch}.attention.layer_norm_rms_epsilon`]: kv.f32(1e-6),
    [`${arch}.rope.freq_base`]: kv.f32(1e6),
    [`${arch}.rope.dimension_sections`]: kv.i32s([(pairs * 3) / 8, (pairs * 5) / 16, (pairs * 5) / 16, 0]),
  };
}

/**
 * A Qwen3 decoder's blocks: pre-norm attention with q/k norms and a SwiGLU FFN, unit gains, fan-in scaled weights
 * and the output projections at half scale, so the residual stream grows slowly through the layers. Without the
 * q/k norms (qkNorm false), a Llama decoder's.
 * @param {Qwen3Dims} d
 */
export function decoderBlocks(d, { qkNorm = true } = {}) {
  const e = d.embd;
  const q = d.head * d.headDim;
  const k = d.headKv * d.headDim;
  /** @type {Tensor[]} */
  const tensors = [];
  for (let i = 0; i < d.layer; i++) {
    const b = `blk.${i}`;
    tensors.push(
      tensor(`${b}.attn_norm.weight`, [e], gain()),
      tensor(`${b}.attn_q.weight`, [e, q], fanIn(e)),
      tensor(`${b}.attn_k.weight`, [e, k], fanIn(e)),
      tensor(`${b}.attn_v.weight`, [e, k], fanIn(e)),
      tensor(`${b}.attn_output.weight`, [q, e], fanIn(q, 0.5)),
      ...(qkNorm ? [tensor(`${b}.attn_q_norm.weight`, [d.headDim], gain()), tensor(`${b}.attn_k_norm.weight`, [d.headDim], gain())] : []),
      tensor(`${b}.ffn_norm.weight`, [e], gain()),
      tensor(`${b}.ffn_gate.weight`, [e, d.ff], fanIn(e)),
      tensor(`${b}.ffn_up.weight`, [e, d.ff], fanIn(e)),
      tensor(`${b}.ffn_down.weight`, [d.ff, e], fanIn(d.ff, 0.5)),
    );
  }
  return tensors;
}

/**
 * Qwen2's byte-level BPE tokenizer's keys as the converter writes them (the special token ids follow, the model's
 * own): no BOS or EOS added to prompts.
 * @param {string[]} tokens
 * @param {number[]} types
 * @param {string[]} merges
 */
export function qwen2TokenizerKeys(tokens, types, merges) {
  return {
    'tokenizer.ggml.model': kv.str('gpt2'),
    'tokenizer.ggml.pre': kv.str('qwen2'),
    'tokenizer.ggml.tokens': kv.strs(tokens),
    'tokenizer.ggml.token_type': kv.i32s(types),
    'tokenizer.ggml.merges': kv.strs(merges),
    'tokenizer.ggml.add_bos_token': kv.bool(false),
    'tokenizer.ggml.add_eos_token': kv.bool(false),
  };
}
