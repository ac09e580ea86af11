// The Pocket TTS pair of make-tts-test-model.mjs: what its files hold, at which sizes, and how it was checked.
//
// Pocket TTS (kyutai, llama.cpp architecture `pockettts`): a CALM. The backbone is a causal transformer
// (LayerNorm with bias, GELU MLP, RoPE, no output head: its hidden state is the output) over a SentencePiece
// unigram vocabulary (llama.cpp's UGM tokenizer, "t5") whose last rows are the learned input vectors
// <|pad|>, <|bos_before_voice|> and <|audio_bos|>. The mmproj holds
//   - the speaker encoder (clip.audio, projector pockettts_spkenc): mimi's SEANet encoder (strides 4, 5, 6),
//     its transformer, a 16x downsampling conv and the speaker projection; a 24 kHz reference clip becomes one
//     backbone input row per 1920 samples (12.5 Hz);
//   - the generator (clip.gen.audio, projector pockettts_gen): the flow-matching MLP with AdaLN blocks that turns
//     a backbone hidden state into a 32-d latent, the end-of-speech head, the latent -> backbone input
//     projection, and mimi's decoder (upsampling conv, transformer, SEANet decoder) that turns latents into
//     24 kHz PCM, 1920 samples per frame.
// Weights: matrices N(0, 1/fan_in) (so activations keep their scale through the random stack), norm gains 1,
// biases 0, layer scales 0.1, the flow net's timestep frequencies as in the reference, latent mean 0 / std 1.
// Three choices make generation well behaved: the last decoder conv is scaled so the output sits around
// 0.1-0.3 RMS (never silent, rarely clipped); the end-of-speech head's bias is -30, so it never fires and every
// text chunk runs to the helper's length budget, ceil((n_tokens / 3 + 2) * 12.5) frames (deterministic lengths:
// longer text, longer audio); the model variant is "english", so the helper applies that pack's settings
// (temperature 0.3). Sizes (why: see POCKET_SIZES below):
//   tiny       backbone 2 layers x 64 (2 heads, ffn 256), vocab 213; flow 64 x 2 blocks; mimi 64-d, 1 layer per
//              side, SEANet filters 8. 0.23 MB + 0.79 MB, written in well under a second.
//   realistic  backbone 6 layers x 1024 (16 heads, ffn 4096), vocab 4003; flow 512 x 6 blocks; mimi 512-d,
//              2 layers per side (8 heads, ffn 2048), SEANet filters 64: the released Pocket TTS shapes (80M
//              backbone + 38M mmproj parameters). 159 MB + 77 MB in f16, written in about 10 s.
// The vocabulary is synthetic (characters, common English words, letter pairs and triples), not kyutai's.
//
// Verified with llama.cpp's own tools/tts (llama-tts; `cmake --build build --target llama-tts` builds it from
// third_party/llama.cpp with the addon's libraries, as bench/tts-ggml does):
//   node scripts/make-tts-test-model.mjs --size tiny --out /tmp/pocket-tiny
//   build/llama-tts -m /tmp/pocket-tiny/pocket-tts-tiny-random-f16.gguf \
//     -mm /tmp/pocket-tiny/mmproj-pocket-tts-tiny-random-f16.gguf -p "Hello world, this is a test." \
//     --tts-speaker-file ../shared/audio/speech/jfk.wav --seed 1 -o /tmp/pocket-tiny/out.wav
// The figures below came from a standalone OpenMP build of the same sources.
// On 2 CPU cores (AVX-512), the 11 s reference clip encoded through the speaker encoder, 24 kHz 16-bit mono out:
//   tiny       80 frames (6.4 s) in 0.91 s, 88 frames/s; RMS 0.16, peak 0.78, nothing clipped, all finite
//   realistic  71 frames (5.7 s) in 2.76 s, 26 frames/s (1.9x real time, 0.9 GB resident); RMS 0.15, peak 0.64
// The same seed gives the same WAV byte for byte; without --tts-speaker-file it differs (no voice rows).
import { fanIn, gain, tensor, zeros } from '../test-model-common.mjs';
import { conv } from '../test-model-gguf.mjs';
import { kv } from '../gguf/writer.mjs';
import { sentencePieces, TOKEN_CONTROL } from '../test-model-vocab.mjs';

/** @typedef {import('../test-model-common.mjs').GeneralKeys} GeneralKeys */

/** @typedef {import('../test-model-common.mjs').Tensor} Tensor */

// tiny: the smallest shapes the graphs accept that still exercise every path (2 heads, 2 layers, 2 flow blocks,
// 1 mimi layer per side; SEANet filters 8 so the 24 kHz stages stay cheap). The fixed parts are not shrunk: the
// strides (4, 5, 6 and 16, clip.cpp hardcodes them), kernel sizes (7, 3, 2 x stride), the 32-d latent, the
// transformer context (250) and the two timestep embedders.
// realistic: the released kyutai/pocket-tts (flow_lm: 6 layers x 1024, 16 heads of 64, ffn 4096, vocab 4000 + 3
// learned rows; flow net 512 channels x 6 blocks, 256-d timestep features; mimi: 512-d, 2 layers each side,
// 8 heads, ffn 2048, SEANet filters 64), so timings and memory are the real model's.
const POCKET_SIZES = {
  tiny: {
    embd: 64,
    head: 2,
    layer: 2,
    ff: 256,
    vocab: 210,
    flowCh: 64,
    flowBlocks: 2,
    freqHalf: 16,
    filters: 8,
    mimiEmbd: 64,
    mimiHead: 2,
    mimiFf: 128,
    mimiLayer: 1,
  },
  realistic: {
    embd: 1024,
    head: 16,
    layer: 6,
    ff: 4096,
    vocab: 4000,
    flowCh: 512,
    flowBlocks: 6,
    freqHalf: 128,
    filters: 64,
    mimiEmbd: 512,
    mimiHead: 8,
    mimiFf: 2048,
    mimiLayer: 2,
  },
};
/** @typedef {typeof POCKET_SIZES.tiny} PocketDims */
const POCKET_LATENT = 32;
const POCKET_RATIOS = [4, 5, 6]; // encoder order; the decoder walks them backwards
const POCKET_DOWNSAMPLE = 16;
const POCKET_EOS_BIAS = -30; // the helper's threshold is -4: never fires
const POCKET_OUT_GAIN = 0.25; // last decoder conv: output around 0.1-0.3 RMS

/**
 * @param {PocketDims} d
 * @param {GeneralKeys} general
 */
function pocketBackbone(d, general) {
  const pieces = sentencePieces(d.vocab);
  const extra = ['<|pad|>', '<|bos_before_voice|>', '<|audio_bos|>'];
  const tokens = [...pieces.map((p) => p[0]), ...extra];
  const scores = [...pieces.map((p) => p[1]), ...extra.map(() => -1000)];
  const types = [...pieces.map((p) => p[2]), ...extra.map(() => TOKEN_CONTROL)];
  const nVocab = tokens.length;
  const a = 'pockettts';
  const metadata = {
    ...general(a, 'model'),
    [`${a}.vocab_size`]: kv.u32(nVocab),
    [`${a}.context_length`]: kv.u32(4096), // the transformer has no limit; this only bounds the KV cache
    [`${a}.embedding_length`]: kv.u32(d.embd),
    [`${a}.feed_forward_length`]: kv.u32(d.ff),
    [`${a}.block_count`]: kv.u32(d.layer),
    [`${a}.attention.head_count`]: kv.u32(d.head),
    [`${a}.attention.head_count_kv`]: kv.u32(d.head),
    [`${a}.attention.layer_norm_epsilon`]: kv.f32(1e-5),
    [`${a}.rope.freq_base`]: kv.f32(10000),
    'tokenizer.ggml.model': kv.str('t5'),
    'tokenizer.ggml.pre': kv.str('default'),
    'tokenizer.ggml.tokens': kv.strs(tokens),
    'tokenizer.ggml.scores': kv.f32s(scores),
    'tokenizer.ggml.token_type': kv.i32s(types),
    'tokenizer.ggml.add_space_prefix': kv.bool(true),
    'tokenizer.ggml.remove_extra_whitespaces': kv.bool(true),
    'tokenizer.ggml.add_bos_token': kv.bool(false),
    'tokenizer.ggml.add_eos_token': kv.bool(false),
    'tokenizer.ggml.unknown_token_id': kv.u32(0),
    'tokenizer.ggml.bos_token_id': kv.u32(1),
    'tokenizer.ggml.eos_token_id': kv.u32(2),
    'tokenizer.ggml.padding_token_id': kv.u32(tokens.indexOf('<|pad|>')),
  };
  const e = d.embd;
  const tensors = [
    // text rows and the learned vectors alike: unit scale, like the voice rows the speaker encoder produces
    tensor('token_embd.weight', [e, nVocab], { std: 1 }),
    tensor('output_norm.weight', [e], gain()),
    tensor('output_norm.bias', [e], zeros()),
  ];
  for (let i = 0; i < d.layer; i++) {
    const b = `blk.${i}`;
    tensors.push(
      tensor(`${b}.attn_norm.weight`, [e], gain()),
      tensor(`${b}.attn_norm.bias`, [e], zeros()),
      tensor(`${b}.attn_q.weight`, [e, e], fanIn(e)),
      tensor(`${b}.attn_k.weight`, [e, e], fanIn(e)),
      tensor(`${b}.attn_v.weight`, [e, e], fanIn(e)),
      tensor(`${b}.attn_output.weight`, [e, e], fanIn(e, 0.5)),
      tensor(`${b}.ffn_norm.weight`, [e], gain()),
      tensor(`${b}.ffn_norm.bias`, [e], zeros()),
      tensor(`${b}.ffn_up.weight`, [e, d.ff], fanIn(e)),
      tensor(`${b}.ffn_down.weight`, [d.ff, e], fanIn(d.ff, 0.5)),
    );
  }
  return { metadata, tensors };
}

/**
 * mimi's transformer block (pre-norm, layer scale on both residuals), under `prefix`.
 * @param {string} prefix
 * @param {PocketDims} d
 */
function mimiLayers(prefix, d) {
  const m = d.mimiEmbd;
  const out = [];
  for (let i = 0; i < d.mimiLayer; i++) {
    const b = `${prefix}.blk.${i}`;
    out.push(
      tensor(`${b}.ln1.weight`, [m], gain()),
      tensor(`${b}.ln1.bias`, [m], zeros()),
      tensor(`${b}.attn_q.weight`, [m, m], fanIn(m)),
      tensor(`${b}.attn_k.weight`, [m, m], fanIn(m)),
      tensor(`${b}.attn_v.weight`, [m, m], fanIn(m)),
      tensor(`${b}.attn_out.weight`, [m, m], fanIn(m)),
      tensor(`${b}.ls1.weight`, [m], gain(0.1)),
      tensor(`${b}.ln2.weight`, [m], gain()),
      tensor(`${b}.ln2.bias`, [m], zeros()),
      tensor(`${b}.ffn_up.weight`, [m, d.mimiFf], fanIn(m)),
      tensor(`${b}.ffn_down.weight`, [d.mimiFf, m], fanIn(d.mimiFf)),
      tensor(`${b}.ls2.weight`, [m], gain(0.1)),
    );
  }
  return out;
}

/**
 * @param {PocketDims} d
 * @param {GeneralKeys} general
 */
function pocketMmproj(d, general) {
  const e = d.embd;
  const m = d.mimiEmbd;
  const h = d.flowCh;
  const c = d.filters;
  const top = c * 2 ** POCKET_RATIOS.length; // SEANet channels at the latent end
  const common = {
    ...general('clip', 'mmproj'),
    'clip.has_vision_encoder': kv.bool(false),
  };
  const section = (/** @type {string} */ prefix, /** @type {string} */ projector) => ({
    [`clip.${prefix}.projector_type`]: kv.str(projector),
    [`clip.${prefix}.projection_dim`]: kv.u32(e),
    [`clip.${prefix}.embedding_length`]: kv.u32(m),
    [`clip.${prefix}.feed_forward_length`]: kv.u32(d.mimiFf),
    [`clip.${prefix}.block_count`]: kv.u32(d.mimiLayer),
    [`clip.${prefix}.attention.head_count`]: kv.u32(d.mimiHead),
    [`clip.${prefix}.attention.layer_norm_epsilon`]: kv.f32(1e-5),
  });
  const metadata = {
    ...common,
    'clip.has_audio_encoder': kv.bool(true),
    ...section('audio', 'pockettts_spkenc'),
    'clip.audio.num_mel_bins': kv.u32(1), // the waveform goes in as a one-row "mel"
    'clip.has_gen_audio_encoder': kv.bool(true),
    ...section('gen.audio', 'pockettts_gen'),
    'clip.gen.audio.model_variant': kv.str('english'),
  };

  // speaker encoder: SEANet encoder (per stage: residual unit at dim, then a strided conv to 2 x dim)
  const tensors = [...conv('a.seanet.conv_in', 7, 1, c)];
  POCKET_RATIOS.forEach((stride, i) => {
    const dim = c * 2 ** i;
    tensors.push(
      ...conv(`a.seanet.blk.${i}.res_conv1`, 3, dim, dim / 2),
      ...conv(`a.seanet.blk.${i}.res_conv2`, 1, dim / 2, dim, 0.5),
      ...conv(`a.seanet.blk.${i}.scale_conv`, 2 * stride, dim, 2 * dim),
    );
  });
  tensors.push(
    ...conv('a.seanet.conv_out', 3, top, m),
    ...mimiLayers('a', d),
    tensor('a.downsample.conv.weight', [2 * POCKET_DOWNSAMPLE, m, m], fanIn(2 * POCKET_DOWNSAMPLE * m)),
    tensor('a.speaker_proj.weight', [m, e], fanIn(m)),
  );

  // generator: flow net
  /** @type {(n: string, inDim: number, outDim: number, scale?: number) => Tensor[]} */
  const linear = (n, inDim, outDim, scale = 1) => [tensor(`${n}.weight`, [inDim, outDim], fanIn(inDim, scale)), tensor(`${n}.bias`, [outDim], zeros())];
  tensors.push(...linear('a.gen.flow.input_proj', POCKET_LATENT, h), ...linear('a.gen.flow.cond_embd', e, h));
  for (let i = 0; i < 2; i++) {
    const half = d.freqHalf;
    tensors.push(
      // as the reference's TimestepEmbedder: exp(-ln(10000) * k / half)
      tensor(`a.gen.flow.time.${i}.freqs`, [half], { values: (k) => Math.exp((-Math.log(10000) * k) / half) }),
      ...linear(`a.gen.flow.time.${i}.up`, 2 * half, h),
      ...linear(`a.gen.flow.time.${i}.down`, h, h),
      tensor(`a.gen.flow.time.${i}.norm`, [h], gain()),
    );
  }
  for (let i = 0; i < d.flowBlocks; i++) {
    const b = `a.gen.flow.blk.${i}`;
    tensors.push(
      tensor(`${b}.norm.weight`, [h], gain()),
      tensor(`${b}.norm.bias`, [h], zeros()),
      ...linear(`${b}.up`, h, h),
      ...linear(`${b}.down`, h, h),
      ...linear(`${b}.ada`, h, 3 * h, 0.5), // shift, scale, gate
    );
  }
  tensors.push(
    ...linear('a.gen.flow.final.ada', h, 2 * h, 0.5), // shift, scale
    ...linear('a.gen.flow.final.proj', h, POCKET_LATENT),
    tensor('a.gen.out_eos.weight', [e, 1], fanIn(e)),
    tensor('a.gen.out_eos.bias', [1], gain(POCKET_EOS_BIAS)),
    tensor('a.gen.input_linear.weight', [POCKET_LATENT, e], fanIn(POCKET_LATENT)),
    tensor('a.gen.emb_mean', [POCKET_LATENT], zeros()),
    tensor('a.gen.emb_std', [POCKET_LATENT], gain()),
  );

  // generator: mimi decoder (latent -> mimi dim, depthwise 16x upsampling, transformer, SEANet decoder)
  tensors.push(
    tensor('a.gen.wav.quant_out.weight', [POCKET_LATENT, m], fanIn(POCKET_LATENT)),
    // depthwise transposed conv, [K, 1, channels]; each output sample sums K / stride = 2 taps
    tensor('a.gen.wav.upsample.weight', [2 * POCKET_DOWNSAMPLE, 1, m], fanIn(2)),
    ...mimiLayers('a.gen.wav.tfm', d),
    ...conv('a.gen.wav.seanet.conv_in', 7, m, top),
  );
  [...POCKET_RATIOS].reverse().forEach((stride, i) => {
    const dim = top / 2 ** i; // in; out is dim / 2
    tensors.push(
      // transposed conv, [K, OC, IC]; each output sample sums IC x K / stride taps
      tensor(`a.gen.wav.seanet.blk.${i}.scale_conv.weight`, [2 * stride, dim / 2, dim], fanIn(2 * dim)),
      tensor(`a.gen.wav.seanet.blk.${i}.scale_conv.bias`, [dim / 2], zeros()),
      ...conv(`a.gen.wav.seanet.blk.${i}.res_conv1`, 3, dim / 2, dim / 4),
      ...conv(`a.gen.wav.seanet.blk.${i}.res_conv2`, 1, dim / 4, dim / 2, 0.5),
    );
  });
  tensors.push(...conv('a.gen.wav.seanet.conv_out', 3, c, 1, POCKET_OUT_GAIN));
  return { metadata, tensors };
}

export const pocketTts = {
  sizes: POCKET_SIZES,
  fileName: (/** @type {string} */ size) => `pocket-tts-${size}-random-f16`,
  build: (/** @type {PocketDims} */ dims, /** @type {GeneralKeys} */ general) => ({
    model: pocketBackbone(dims, general),
    mmproj: pocketMmproj(dims, general),
  }),
};
