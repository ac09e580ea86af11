// The Qwen3-TTS pair of make-tts-test-model.mjs: what its files hold, at which sizes, and how it was checked.
//
// Qwen3-TTS (Qwen, llama.cpp architecture `qwen3tts`, the 12 Hz tokenizer family): the backbone is the talker, a
// Qwen3 transformer (RMSNorm, q/k norms, SwiGLU, grouped-query attention, interleaved M-RoPE) whose vocabulary is
// Qwen2's byte-level BPE ("gpt2", pre-tokenizer "qwen2") followed by 3072 codec rows (<|codec_0|> .. with the
// talker config's named ids: <|codec_pad|> 2148, <|codec_bos|> 2149, <|codec_eos_token|> 2150, the think and
// language tokens). Its output head covers the codec rows only; llama.cpp pads the text logits with -inf, and
// tokenizer.ggml.suppress_tokens leaves codebook-0 codes (<|codec_0|> .. <|codec_2047|>) and codec_eos (the EOS
// token) to sample. The mmproj holds
//   - the speaker encoder (clip.audio, projector qwen3tts_spkenc): an ECAPA-TDNN x-vector over a 128-bin log-mel
//     of a 24 kHz clip, one backbone input row per clip;
//   - the generator (clip.gen.audio, projector qwen3tts_gen): the code predictor, a small Qwen3 transformer that
//     turns a backbone hidden state and its codebook-0 code into codebooks 1..15 (sampled on the graph) and their
//     summed embeddings (the next backbone input), and code2wav: RVQ decode, a causal conv, an 8-layer windowed
//     transformer, 2x2 ConvNeXt upsampling and a DAC decoder (strides 8, 5, 4, 3) giving 1920 samples per frame.
// Weights as for Pocket TTS (pockettts.mjs), with SnakeBeta's parameters stored folded (exp(alpha) = 1, 1 / exp(beta) = 1) and the
// last DAC conv scaled so the output sits around 0.1-0.2 RMS. The codec head gives N(0, 1) logits, so codec_eos
// comes up roughly once in two thousand frames and generation normally runs to the caller's limit. Sizes (why: see
// QWEN_SIZES below):
//   tiny       talker 2 layers x 64 (2 heads of 32, 1 key/value head, ffn 128), vocab 1280 text + 3072 codec;
//              predictor 2 x 32; ECAPA 64 channels; code2wav 32-d transformer, DAC 128 -> 8 channels.
//              1.2 MB + 9.2 MB, written in 0.2 s.
//   realistic  the released Qwen3-TTS-12Hz-0.6B-Base shapes: talker 28 layers x 1024, vocab 151936 + 3072 (440M +
//              159M parameters); predictor 5 x 1024; code2wav and ECAPA as released. 1.21 GB + 0.62 GB in f16 (the
//              transposed convs and the predictor's ffn_down in f32, as the converter writes them), written in
//              about 32 s.
// The text vocabulary is synthetic (bytes, test-model-vocab.mjs's English words merged whole, fillers, Qwen2's
// added tokens at their released ids), not Qwen's.
//
// Verified as Pocket TTS was (pockettts.mjs: llama-tts, -n 80 frames, --seed 1, 2 CPU cores). llama-tts leaves
// libmtmd at its default 4 threads; on 2 cores OpenMP's spinning barriers then make the predictor's graph
// (thousands of small nodes per frame) 10x slower, so these ran with OMP_WAIT_POLICY=passive (an embedder should
// give libmtmd no more threads than cores). The backbone never stopped early, so each ran to 80 frames (6.4 s):
//   tiny       80 frames (6.4 s) in 2.5 s, 33 frames/s (code2wav: 0.7 s per 72-frame window); RMS 0.14, peak 0.71,
//              nothing clipped, all finite; 2.6 s with the jfk clip (14 s without OMP_WAIT_POLICY=passive)
//   realistic  80 frames in 48 s, 1.7 frames/s (0.13x real time, 4.8 GB resident): about 3 frames/s through
//              backbone and predictor, then 9-13 s per 72-frame code2wav window; RMS 0.17, peak 0.81, all finite
// The same seed gives the same WAV byte for byte; with --tts-speaker-file it differs (one x-vector row).
import { GGML_TYPE_F32 } from '../gguf/ggml.mjs';
import { kv } from '../gguf/writer.mjs';
import { fanIn, gain, tensor, zeros } from '../test-model-common.mjs';
import { conv, decoderBlocks, QWEN3_0_6B, qwen2TokenizerKeys, qwen3DecoderKeys } from '../test-model-gguf.mjs';
import { bpeTokens, TOKEN_CONTROL, TOKEN_NORMAL } from '../test-model-vocab.mjs';

/** @typedef {import('../test-model-common.mjs').GeneralKeys} GeneralKeys */

// tiny: the smallest shapes that still take every path: grouped-query attention in both transformers (2 query
// heads, 1 key/value head), a code predictor narrower than the backbone (so the proj_in bridge runs), 2 layers
// each, and every code2wav stage at a few channels. Head size 32 splits its 16 rotary pairs in the release's
// proportions (24:20:20 of 64). What clip.cpp and the graphs fix is kept: 16 codebooks of 2048 entries, the
// 3072-row codec head, 128 mel bins, the 8-layer, 16-head decoder transformer with its 72-frame window, the 2x2
// upsampling (kernel = stride = 2), the DAC strides 8, 5, 4, 3 (1920 samples per 12.5 Hz frame, 24 kHz) with 3
// residual units each, and the ECAPA layout (3 SE-Res2Net blocks of scale 8, dilations 2, 3, 4).
// realistic: the released Qwen3-TTS-12Hz-0.6B-Base: talker 28 layers x 1024 (16 heads of 128, 8 key/value
// heads, ffn 3072, rope sections [24, 20, 20], text vocab 151936 + 3072 codec rows); code predictor 5 layers x
// 1024 (same heads and ffn, so no proj_in); ECAPA channels 512 (SE 128, attention 128, aggregation 1536), x-vector
// 1024; decoder codebook dim 256, 512 -> 1024 latent, transformer 512 (heads of 64, ffn 1024), DAC 1536 -> 96.
const QWEN_SIZES = {
  tiny: {
    embd: 64,
    head: 2,
    headKv: 1,
    headDim: 32,
    layer: 2,
    ff: 128,
    textVocab: 1280,
    spkChannels: 64,
    spkSe: 16,
    spkAttn: 16,
    spkMfa: 192,
    cpEmbd: 32,
    cpHead: 2,
    cpHeadKv: 1,
    cpHeadDim: 16,
    cpLayer: 2,
    cpFf: 64,
    wavCodeDim: 16,
    wavDim: 32,
    wavLatent: 64,
    wavTfm: 32,
    wavHeadDim: 4,
    wavTfmFf: 64,
    wavDac: 128,
  },
  realistic: {
    ...QWEN3_0_6B,
    textVocab: 151936,
    spkChannels: 512,
    spkSe: 128,
    spkAttn: 128,
    spkMfa: 1536,
    cpEmbd: 1024,
    cpHead: 16,
    cpHeadKv: 8,
    cpHeadDim: 128,
    cpLayer: 5,
    cpFf: 3072,
    wavCodeDim: 256,
    wavDim: 512,
    wavLatent: 1024,
    wavTfm: 512,
    wavHeadDim: 64,
    wavTfmFf: 1024,
    wavDac: 1536,
  },
};
/** @typedef {typeof QWEN_SIZES.tiny} QwenDims */
const QWEN_CODEC_VOCAB = 3072; // the talker's codec rows; llama.cpp hardcodes its output head to this size
const QWEN_CODEBOOK = 2048; // entries per RVQ codebook: codec_0 .. codec_2047 are the backbone's codebook-0 codes
const QWEN_CODEBOOKS = 16; // codebook 0 from the backbone, 1..15 from the code predictor
const QWEN_MELS = 128;
const QWEN_RES2NET_SCALE = 8;
const QWEN_WAV_HEADS = 16; // clip.cpp's wav_tfm_n_head
const QWEN_WAV_LAYERS = 8; // clip.cpp's wav_tfm_n_layer
const QWEN_UPSAMPLE_BLOCKS = 2; // each a stride-2 transposed conv and a ConvNeXt block
const QWEN_DAC_RATES = [8, 5, 4, 3];
const QWEN_DAC_RES_UNITS = 3;
const QWEN_OUT_GAIN = 0.03; // last DAC conv: output around 0.1-0.3 RMS

// Qwen2's added tokens sit after the ordinary ones: the last 293 text rows, at the released offsets
// (<|endoftext|> 151643, <|im_start|> 151644, <|im_end|> 151645, <tts_pad> 151671, <tts_text_bos> 151672,
// <tts_text_eod> 151673); the helper looks the ones named here up by text, the rest are reserved rows.
const QWEN_ADDED_TOKENS = 293;
/** @type {Record<number, string>} */
const QWEN_ADDED = { 0: '<|endoftext|>', 1: '<|im_start|>', 2: '<|im_end|>', 28: '<tts_pad>', 29: '<tts_text_bos>', 30: '<tts_text_eod>' };
// the talker config's named codec ids (the converter names row i <|codec_i|> unless a *_id key names it)
/** @type {Record<number, string>} */
const QWEN_CODEC_NAMES = {
  2148: 'codec_pad',
  2149: 'codec_bos',
  2150: 'codec_eos_token',
  2154: 'codec_think',
  2155: 'codec_nothink',
  2156: 'codec_think_bos',
  2157: 'codec_think_eos',
  2050: 'codec_language_english',
  2053: 'codec_language_german',
  2054: 'codec_language_spanish',
  2055: 'codec_language_chinese',
  2058: 'codec_language_japanese',
  2061: 'codec_language_french',
  2064: 'codec_language_korean',
  2069: 'codec_language_russian',
  2070: 'codec_language_italian',
  2071: 'codec_language_portuguese',
};
const QWEN_CODEC_EOS = 2150;

/**
 * @param {QwenDims} d
 * @param {GeneralKeys} general
 */
function qwenBackbone(d, general) {
  const { tokens: ordinary, merges } = bpeTokens(d.textVocab - QWEN_ADDED_TOKENS);
  const added = Array.from({ length: QWEN_ADDED_TOKENS }, (_, k) => QWEN_ADDED[k] ?? `<|reserved_${k}|>`);
  const codec = Array.from({ length: QWEN_CODEC_VOCAB }, (_, i) => `<|${QWEN_CODEC_NAMES[i] ?? `codec_${i}`}|>`);
  const tokens = [...ordinary, ...added, ...codec];
  const types = [...ordinary.map(() => TOKEN_NORMAL), ...added.map(() => TOKEN_CONTROL), ...codec.map(() => TOKEN_CONTROL)];
  const nVocab = tokens.length;
  const codecEos = d.textVocab + QWEN_CODEC_EOS;
  // as the converter: the backbone may sample codebook-0 codes and codec_eos only; the codec rows past the
  // codebook are suppressed (text rows never compete: the graph pads their logits with -inf)
  const suppressed = [];
  for (let id = nVocab - (QWEN_CODEC_VOCAB - QWEN_CODEBOOK); id < nVocab; id++) if (id !== codecEos) suppressed.push(id);
  const a = 'qwen3tts';
  const metadata = {
    ...general(a, 'model'),
    // the release says 32768, but llama.cpp's default context is the trained one, and 32768 positions of KV
    // cache would be 3.7 GB at the realistic size; 4096 frames are 5.5 minutes of speech
    ...qwen3DecoderKeys(a, d, nVocab, 4096),
    ...qwen2TokenizerKeys(tokens, types, merges),
    'tokenizer.ggml.bos_token_id': kv.u32(tokens.indexOf('<|endoftext|>')),
    'tokenizer.ggml.eos_token_id': kv.u32(codecEos), // the end-of-speech code ends generation
    'tokenizer.ggml.padding_token_id': kv.u32(tokens.indexOf('<|endoftext|>')),
    'tokenizer.ggml.suppress_tokens': kv.i32s(suppressed),
  };
  const e = d.embd;
  const tensors = [
    // text and codec rows alike: unit scale (the converter folds the text projection MLP into the text rows)
    tensor('token_embd.weight', [e, nVocab], { std: 1 }),
    tensor('output_norm.weight', [e], gain()),
    // the codec head: logits ~ N(0, 1) over the codec rows, so sampling wanders and codec_eos is rare
    tensor('output.weight', [e, QWEN_CODEC_VOCAB], fanIn(e)),
    ...decoderBlocks(d),
  ];
  return { metadata, tensors };
}

/**
 * A pre-norm transformer block with SwiGLU under `prefix` (the code predictor's and code2wav's layout).
 * @param {string} prefix
 * @param {number} dim
 * @param {number} heads
 * @param {number} headsKv
 * @param {number} headDim
 * @param {number} ff
 * @param {{ qkNorm?: boolean, layerScale?: boolean, downType?: number }} [options] downType: ffn_down's ggml type
 */
function swigluBlock(prefix, dim, heads, headsKv, headDim, ff, { qkNorm = false, layerScale = false, downType } = {}) {
  const q = heads * headDim;
  const k = headsKv * headDim;
  return [
    tensor(`${prefix}.ln1.weight`, [dim], gain()),
    tensor(`${prefix}.attn_q.weight`, [dim, q], fanIn(dim)),
    tensor(`${prefix}.attn_k.weight`, [dim, k], fanIn(dim)),
    tensor(`${prefix}.attn_v.weight`, [dim, k], fanIn(dim)),
    tensor(`${prefix}.attn_out.weight`, [q, dim], fanIn(q, 0.5)),
    ...(qkNorm ? [tensor(`${prefix}.attn_q_norm.weight`, [headDim], gain()), tensor(`${prefix}.attn_k_norm.weight`, [headDim], gain())] : []),
    ...(layerScale ? [tensor(`${prefix}.ls1.weight`, [dim], gain(0.1))] : []),
    tensor(`${prefix}.ln2.weight`, [dim], gain()),
    tensor(`${prefix}.ffn_gate.weight`, [dim, ff], fanIn(dim)),
    tensor(`${prefix}.ffn_up.weight`, [dim, ff], fanIn(dim)),
    tensor(`${prefix}.ffn_down.weight`, [ff, dim], fanIn(ff, 0.5), downType),
    ...(layerScale ? [tensor(`${prefix}.ls2.weight`, [dim], gain(0.1))] : []),
  ];
}

/**
 * SnakeBeta's parameters as the converter folds them (exp(alpha), 1 / exp(beta)): 1 and 1 for fresh ones.
 * @param {string} name
 * @param {number} channels
 */
function snake(name, channels) {
  return [tensor(`${name}.alpha`, [channels], gain()), tensor(`${name}.beta`, [channels], gain())];
}

/**
 * @param {QwenDims} d
 * @param {GeneralKeys} general
 */
function qwenMmproj(d, general) {
  const e = d.embd;
  const c = d.spkChannels;
  const m = d.spkMfa;
  const metadata = {
    ...general('clip', 'mmproj'),
    'clip.has_vision_encoder': kv.bool(false),
    'clip.has_audio_encoder': kv.bool(true),
    'clip.audio.projector_type': kv.str('qwen3tts_spkenc'),
    'clip.audio.projection_dim': kv.u32(e),
    'clip.audio.num_mel_bins': kv.u32(QWEN_MELS),
    'clip.audio.block_count': kv.u32(3), // the SE-Res2Net blocks
    // ECAPA-TDNN has no attention or FFN; clip.cpp still reads these, so they hold the aggregation width
    'clip.audio.embedding_length': kv.u32(m),
    'clip.audio.feed_forward_length': kv.u32(m),
    'clip.audio.attention.head_count': kv.u32(1),
    'clip.audio.attention.layer_norm_epsilon': kv.f32(1e-5),
    // the gen section describes the code predictor; code2wav's hyperparameters are clip.cpp's constants
    'clip.has_gen_audio_encoder': kv.bool(true),
    'clip.gen.audio.projector_type': kv.str('qwen3tts_gen'),
    'clip.gen.audio.projection_dim': kv.u32(e),
    'clip.gen.audio.embedding_length': kv.u32(d.cpEmbd),
    'clip.gen.audio.feed_forward_length': kv.u32(d.cpFf),
    'clip.gen.audio.block_count': kv.u32(d.cpLayer),
    'clip.gen.audio.attention.head_count': kv.u32(d.cpHead),
    'clip.gen.audio.attention.head_count_kv': kv.u32(d.cpHeadKv),
    'clip.gen.audio.attention.layer_norm_epsilon': kv.f32(1e-6),
  };

  // speaker encoder (ECAPA-TDNN over a 128-bin log-mel): stem TDNN, 3 SE-Res2Net blocks (1x1 conv, 7 chained
  // k=3 convs on eighths of the channels, 1x1 conv, squeeze-excitation), aggregation of the three, attentive
  // statistics pooling (mean and std: 2 x aggregation wide) and the projection to one backbone input row
  const res2 = c / QWEN_RES2NET_SCALE;
  const tensors = [...conv('a.conv1d.0', 5, QWEN_MELS, c)];
  for (let bid = 1; bid <= 3; bid++) {
    const b = `a.blk.${bid}`;
    tensors.push(...conv(`${b}.conv_pw1`, 1, c, c));
    for (let x = 0; x < QWEN_RES2NET_SCALE - 1; x++) tensors.push(...conv(`${b}.res2.${x}`, 3, res2, res2));
    tensors.push(...conv(`${b}.conv_pw2`, 1, c, c), ...conv(`${b}.se_conv1`, 1, c, d.spkSe), ...conv(`${b}.se_conv2`, 1, d.spkSe, c));
  }
  tensors.push(
    ...conv('a.conv_out', 1, 3 * c, m),
    ...conv('a.asp_tdnn', 1, 3 * m, d.spkAttn),
    ...conv('a.asp_attn', 1, d.spkAttn, m),
    ...conv('mm.a.fc', 1, 2 * m, e),
  );

  // code predictor: codebooks 1..15 from the backbone's hidden state and codebook-0 code; its embedding
  // tables are backbone-wide (their sum is the next backbone input), its heads predictor-wide
  const acoustic = QWEN_CODEBOOKS - 1;
  const cp = d.cpEmbd;
  if (cp !== e) tensors.push(tensor('a.gen.code.proj_in.weight', [e, cp], fanIn(e)), tensor('a.gen.code.proj_in.bias', [cp], zeros()));
  tensors.push(
    tensor('a.gen.code.embd.weight', [e, QWEN_CODEBOOK, acoustic], { std: 1 }),
    tensor('a.gen.code.head.weight', [cp, QWEN_CODEBOOK, acoustic], fanIn(cp)),
    tensor('a.gen.code.out_embd.weight', [e, QWEN_CODEC_VOCAB], { std: 1 }), // the talker's codec rows
    tensor('a.gen.code.output_norm.weight', [cp], gain()),
  );
  for (let i = 0; i < d.cpLayer; i++) {
    // ffn_down in f32, as the converter writes it: the released predictor's FFN peaks above the f16 range
    tensors.push(...swigluBlock(`a.gen.code.blk.${i}`, cp, d.cpHead, d.cpHeadKv, d.cpHeadDim, d.cpFf, { qkNorm: true, downType: GGML_TYPE_F32 }));
  }

  // code2wav: RVQ decode (codebook 0 and the sum of 1..15, each projected), causal k=3 conv up to the latent,
  // the windowed transformer between in/out projections, 2 x (transposed conv, ConvNeXt), then the DAC decoder
  const cd = d.wavCodeDim;
  const h = d.wavDim;
  const lat = d.wavLatent;
  const t = d.wavTfm;
  tensors.push(
    tensor('a.gen.wav.quant.first.in_proj.weight', [h, cd], fanIn(h)),
    tensor('a.gen.wav.quant.first.out_proj.weight', [cd, h], fanIn(cd)),
    tensor('a.gen.wav.quant.first.codebook.weight', [cd, QWEN_CODEBOOK], { std: 1 }),
    tensor('a.gen.wav.quant.rest.in_proj.weight', [h, cd], fanIn(h)),
    tensor('a.gen.wav.quant.rest.out_proj.weight', [cd, h], fanIn(cd * acoustic)), // its input sums 15 rows
    tensor('a.gen.wav.quant.rest.codebook.weight', [cd, QWEN_CODEBOOK, acoustic], { std: 1 }),
    ...conv('a.gen.wav.pre_conv', 3, h, lat),
    tensor('a.gen.wav.tfm.in_proj.weight', [lat, t], fanIn(lat)),
    tensor('a.gen.wav.tfm.in_proj.bias', [t], zeros()),
    tensor('a.gen.wav.tfm.out_proj.weight', [t, lat], fanIn(t)),
    tensor('a.gen.wav.tfm.out_proj.bias', [lat], zeros()),
    tensor('a.gen.wav.tfm.output_norm.weight', [t], gain()),
  );
  for (let i = 0; i < QWEN_WAV_LAYERS; i++) {
    tensors.push(...swigluBlock(`a.gen.wav.tfm.blk.${i}`, t, QWEN_WAV_HEADS, QWEN_WAV_HEADS, d.wavHeadDim, d.wavTfmFf, { layerScale: true }));
  }
  for (let i = 0; i < QWEN_UPSAMPLE_BLOCKS; i++) {
    const b = `a.gen.wav.up.blk.${i}`;
    tensors.push(
      // transposed conv [K, OC, IC] in f32 (ggml has no f16 path for it); kernel = stride, so IC taps per sample
      tensor(`${b}.conv.weight`, [2, lat, lat], fanIn(lat), GGML_TYPE_F32),
      tensor(`${b}.conv.bias`, [lat], zeros()),
      tensor(`${b}.dwconv.weight`, [7, 1, lat], fanIn(7)), // depthwise, [K, 1, channels]
      tensor(`${b}.dwconv.bias`, [lat], zeros()),
      tensor(`${b}.norm.weight`, [lat], gain()),
      tensor(`${b}.norm.bias`, [lat], zeros()),
      tensor(`${b}.pw1.weight`, [lat, 4 * lat], fanIn(lat)),
      tensor(`${b}.pw1.bias`, [4 * lat], zeros()),
      tensor(`${b}.pw2.weight`, [4 * lat, lat], fanIn(4 * lat)),
      tensor(`${b}.pw2.bias`, [lat], zeros()),
      tensor(`${b}.gamma`, [lat], gain(0.1)),
    );
  }
  tensors.push(...conv('a.gen.wav.dac.entry', 7, lat, d.wavDac));
  QWEN_DAC_RATES.forEach((stride, i) => {
    const dim = d.wavDac / 2 ** i; // in; out is dim / 2
    const b = `a.gen.wav.dac.blk.${i}`;
    tensors.push(
      ...snake(`${b}.snake`, dim),
      // kernel 2 x stride: each output sample sums IC x 2 taps
      tensor(`${b}.conv.weight`, [2 * stride, dim / 2, dim], fanIn(2 * dim), GGML_TYPE_F32),
      tensor(`${b}.conv.bias`, [dim / 2], zeros()),
    );
    for (let r = 0; r < QWEN_DAC_RES_UNITS; r++) {
      tensors.push(
        ...snake(`${b}.res.${r}.act1`, dim / 2),
        ...conv(`${b}.res.${r}.conv1`, 7, dim / 2, dim / 2),
        ...snake(`${b}.res.${r}.act2`, dim / 2),
        ...conv(`${b}.res.${r}.conv2`, 1, dim / 2, dim / 2, 0.5),
      );
    }
  });
  const last = d.wavDac / 2 ** QWEN_DAC_RATES.length;
  tensors.push(...snake('a.gen.wav.dac.post_snake', last), ...conv('a.gen.wav.dac.post_conv', 7, last, 1, QWEN_OUT_GAIN));
  return { metadata, tensors };
}

export const qwen3Tts = {
  sizes: QWEN_SIZES,
  fileName: (/** @type {string} */ size) => `qwen3-tts-${size}-random-f16`,
  build: (/** @type {QwenDims} */ dims, /** @type {GeneralKeys} */ general) => ({ model: qwenBackbone(dims, general), mmproj: qwenMmproj(dims, general) }),
};
