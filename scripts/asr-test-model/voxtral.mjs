// The Voxtral pair of make-asr-test-model.mjs: what its files hold, at which sizes, and how it was checked.
//
// Voxtral Mini (Mistral, Voxtral-Mini-3B-2507; llama.cpp's converter writes its language model with
// conversion/llama.py and its mmproj with conversion/ultravox.py's VoxtralWhisperEncoderModel): the language model
// is a Llama decoder (architecture `llama`, rope base 1e8, its own output head) with Mistral's Tekken tokenizer as
// conversion/base.py's _set_vocab_mistral writes it: "gpt2" with pre-tokenizer "tekken", the 1000 special tokens
// first (control tokens: <unk> 0, <s> 1 (BOS, added to prompts), </s> 2 (EOS), [INST] 3, [/INST] 4, <pad> 11,
// [AUDIO] 24, [BEGIN_AUDIO] 25, [TRANSCRIBE] 34, <SPECIAL_n> for the unnamed ones), then the byte-level tokens,
// every score 0, and the community chat template of the tokenizer's version, v13's: Devstral's (the GGUF converted
// from the release carries it), which llama-mtmd-cli (without --jinja) takes for Mistral's v7 format,
// "[SYSTEM_PROMPT]...[INST]...[/INST]". The
// mmproj (projector `voxtral`, under clip.projector_type) holds Whisper large-v3's encoder: two k=3 convolutions
// (the second with stride 2) over a 30 s, 128-bin log-mel, 1500 positions, pre-norm layers whose key projection
// has no bias, the final LayerNorm; clip.cpp then averages pairs of frames and stacks 4 (stack_factor), and the
// projector, a two-layer GELU MLP without biases, maps them to the language model's width: 187 positions per 30 s
// chunk (750 frames / 4, rounded down by llama.cpp's padding arithmetic, which rounds down unless 4 x the encoder's
// width is a power of two; so the tiny width is 80, like the release's 1280 not a power-of-two multiple, where 64
// would give 188 positions and abort clip.cpp's output check). The weights are random, the language model a word
// chain (parts.mjs), so greedy decoding is decisive and a transcript runs to the caller's limit.
// Sizes (why: see VOXTRAL_SIZES below):
//   tiny       language model 2 layers x 64 (2 heads of 32, 1 key/value head, ffn 256), 3048 tokens (the 1000
//              specials, 2048 byte-level); encoder 2 layers x 80 (2 heads, ffn 160). 1.1 MB + 0.8 MB, written in
//              well under a second.
//   realistic  the released shapes: language model 30 layers x 3072 (32 heads of 128, 8 key/value heads, ffn
//              8192, 131072 tokens); encoder 32 layers x 1280 (20 heads, ffn 5120). 8.0 GB + 1.3 GB in f16,
//              written in 3 to 5 minutes.
// The text vocabulary is synthetic (test-model-vocab.mjs's bytes, English words merged whole, fillers), not Mistral's.
//
// Verified as the Qwen3-ASR pair was (qwen3asr.mjs), with the same llama-mtmd-cli command:
//   tiny       jfk.wav: 187 audio positions, 207 in the prompt; 48 words (" find hello world test speech voice
//              audio model ..."); audio encoded in about 0.2 s; the same with -t 1, flash attention off, -ub 16.
//              Probed over 64 steps on the four clips, in the chat prompt and in transcription mode
//              ("[INST]<audio>[/INST]lang:en[TRANSCRIBE]"): logits moved by 0.052 at most; after the first token
//              the leader was ahead by 20.5 at least; the first token led by 0.39 to 4.6; </s> stayed 460 places
//              or more below the top.
//   realistic  jfk.wav, -n 8: load 11.1 s, audio encoded in 16.7 s, prompt 24.6 s (207 tokens, 8.4 tokens/s), 4.9
//              tokens/s: " my over know water than call first who". Probed over 16 steps on jfk.wav in transcription
//              mode: logits moved by 0.016 at most, the leader ahead by 186.8 after the first token, which led by
//              0.55; </s> 41000 places or more below the top.
import fs from 'node:fs';
import path from 'node:path';
import { kv } from '../gguf/writer.mjs';
import { fanIn, gain, ROOT, tensor } from '../test-model-common.mjs';
import { decoderBlocks } from '../test-model-gguf.mjs';
import { bpeTokens, TOKEN_CONTROL, TOKEN_NORMAL } from '../test-model-vocab.mjs';
import { audioEncoderKeys, audioTransformer, frontConv, replaceTensors, vocabularyRows, WORD_LOGIT_STD, wordChain, wordRms } from './parts.mjs';

/** @typedef {import('../test-model-common.mjs').GeneralKeys} GeneralKeys */

// tiny: the smallest shapes that still take every path: grouped-query attention (2 query heads, 1 key/value head),
// 2 layers, an FFN of 256 (the chain's two neurons per word), the 1000 special tokens and 2048 byte-level ones (only
// the specials' ids are fixed), an encoder of 2 layers x 80 with 2 heads (80: see above). Whisper's 1500 positions,
// 128 mel bins and the stack factor of 4 are kept.
// realistic: Voxtral-Mini-3B-2507 as released (text: 30 layers x 3072, 32 heads of 128, 8 key/value heads,
// intermediate 8192, vocabulary 131072, rope base 1e8, untied; audio: Whisper large-v3, 32 layers x 1280, 20 heads,
// ffn 5120).
const VOXTRAL_SIZES = {
  tiny: { embd: 64, head: 2, headKv: 1, headDim: 32, layer: 2, ff: 256, vocab: 3048, audioEmbd: 80, audioHead: 2, audioLayer: 2, audioFf: 160 },
  realistic: {
    embd: 3072,
    head: 32,
    headKv: 8,
    headDim: 128,
    layer: 30,
    ff: 8192,
    vocab: 131072,
    audioEmbd: 1280,
    audioHead: 20,
    audioLayer: 32,
    audioFf: 5120,
  },
};
/** @typedef {typeof VOXTRAL_SIZES.tiny} VoxtralDims */

// Tekken's special tokens come first, 1000 of them, the unnamed ones <SPECIAL_id>; these are the named ones of its
// v13 table with audio (mistral-common's Tekkenizer)
const TEKKEN_SPECIALS = 1000;
/** @type {Record<number, string>} */
const TEKKEN_NAMED = {
  0: '<unk>',
  1: '<s>',
  2: '</s>',
  3: '[INST]',
  4: '[/INST]',
  5: '[AVAILABLE_TOOLS]',
  6: '[/AVAILABLE_TOOLS]',
  7: '[TOOL_RESULTS]',
  8: '[/TOOL_RESULTS]',
  9: '[TOOL_CALLS]',
  10: '[IMG]',
  11: '<pad>',
  12: '[IMG_BREAK]',
  13: '[IMG_END]',
  14: '[PREFIX]',
  15: '[MIDDLE]',
  16: '[SUFFIX]',
  17: '[SYSTEM_PROMPT]',
  18: '[/SYSTEM_PROMPT]',
  19: '[TOOL_CONTENT]',
  24: '[AUDIO]',
  25: '[BEGIN_AUDIO]',
  32: '[ARGS]',
  33: '[CALL_ID]',
  34: '[TRANSCRIBE]',
};
const TEKKEN_UNK = 0;
const TEKKEN_BOS = 1;
const TEKKEN_EOS = 2;
const TEKKEN_PAD = 11;
// The converter writes the community template of the tokenizer's version: v13's is Devstral's
const VOXTRAL_CHAT_TEMPLATE = path.join(ROOT, 'third_party', 'llama.cpp', 'models', 'templates', 'unsloth-mistral-Devstral-Small-2507.jinja');
// The release's 131072 positions would cost 16 GB of KV cache at the realistic size, and llama.cpp's default
// context is the trained one; 8192 hold 10 minutes of audio (12.5 positions a second) with room for the transcript.
const VOXTRAL_CONTEXT = 8192;
const VOXTRAL_MELS = 128;
// Whisper's encoder output, 4 frames stacked into one language model position (1280 x 4 = the projector's input)
const VOXTRAL_STACK = 4;

/**
 * The vocabulary: the special tokens, then test-model-vocab.mjs's byte-level BPE tokens (the 256 bytes first, as
 * Tekken's).
 * @param {number} size
 */
function tekkenVocabulary(size) {
  const { tokens: ordinary, merges } = bpeTokens(size - TEKKEN_SPECIALS);
  const specials = Array.from({ length: TEKKEN_SPECIALS }, (_, id) => TEKKEN_NAMED[id] ?? `<SPECIAL_${id}>`);
  return {
    tokens: [...specials, ...ordinary],
    types: [...specials.map(() => TOKEN_CONTROL), ...ordinary.map(() => TOKEN_NORMAL)],
    merges,
  };
}

/**
 * The language model, as conversion/llama.py writes VoxtralForConditionalGeneration's (its Mistral vocabulary by
 * conversion/base.py's _set_vocab_mistral).
 * @param {VoxtralDims} d
 * @param {GeneralKeys} general
 */
function voxtralLanguageModel(d, general) {
  const { tokens, types, merges } = tekkenVocabulary(d.vocab);
  const a = 'llama';
  const metadata = {
    ...general(a, 'model'),
    [`${a}.block_count`]: kv.u32(d.layer),
    [`${a}.context_length`]: kv.u32(VOXTRAL_CONTEXT),
    [`${a}.embedding_length`]: kv.u32(d.embd),
    [`${a}.feed_forward_length`]: kv.u32(d.ff),
    [`${a}.attention.head_count`]: kv.u32(d.head),
    [`${a}.attention.head_count_kv`]: kv.u32(d.headKv),
    [`${a}.rope.freq_base`]: kv.f32(1e8),
    [`${a}.attention.layer_norm_rms_epsilon`]: kv.f32(1e-5),
    [`${a}.attention.key_length`]: kv.u32(d.headDim),
    [`${a}.attention.value_length`]: kv.u32(d.headDim),
    [`${a}.vocab_size`]: kv.u32(tokens.length),
    [`${a}.rope.dimension_count`]: kv.u32(d.headDim),
    'tokenizer.ggml.model': kv.str('gpt2'),
    'tokenizer.ggml.pre': kv.str('tekken'),
    'tokenizer.ggml.merges': kv.strs(merges),
    'tokenizer.ggml.bos_token_id': kv.u32(TEKKEN_BOS),
    'tokenizer.ggml.eos_token_id': kv.u32(TEKKEN_EOS),
    'tokenizer.ggml.unknown_token_id': kv.u32(TEKKEN_UNK),
    'tokenizer.ggml.padding_token_id': kv.u32(TEKKEN_PAD),
    'tokenizer.ggml.tokens': kv.strs(tokens),
    'tokenizer.ggml.scores': kv.f32s(tokens.map(() => 0)),
    'tokenizer.ggml.token_type': kv.i32s(types),
    'tokenizer.ggml.add_bos_token': kv.bool(true),
    'tokenizer.ggml.add_eos_token': kv.bool(false),
    'tokenizer.chat_template': kv.str(fs.readFileSync(VOXTRAL_CHAT_TEMPLATE, 'utf8')),
  };
  const e = d.embd;
  const words = wordRms(d.layer);
  const tensors = [
    tensor('token_embd.weight', [e, tokens.length], vocabularyRows(e, tokens, types, words)),
    // the logits' scale: a word's output row (fan-in sized) gives N(0, WORD_LOGIT_STD^2) over a random normalised
    // hidden state
    tensor('output_norm.weight', [e], gain(WORD_LOGIT_STD)),
    tensor('output.weight', [e, tokens.length], vocabularyRows(e, tokens, types, 1 / Math.sqrt(e))),
    ...replaceTensors(decoderBlocks(d, { qkNorm: false }), wordChain(`blk.${d.layer - 1}`, e, d.ff, tokens, words)),
  ];
  return { metadata, tensors };
}

/**
 * The audio encoder (Whisper large-v3's shape) and projector, as conversion/ultravox.py's VoxtralWhisperEncoderModel
 * writes them.
 * @param {VoxtralDims} d
 * @param {GeneralKeys} general
 */
function voxtralMmproj(d, general) {
  const ae = d.audioEmbd;
  const metadata = {
    ...general('clip', 'mmproj'),
    ...audioEncoderKeys(d),
    'clip.projector_type': kv.str('voxtral'),
    'clip.audio.num_mel_bins': kv.u32(VOXTRAL_MELS),
    'clip.audio.attention.layer_norm_epsilon': kv.f32(1e-5),
    'clip.audio.projector.stack_factor': kv.u32(VOXTRAL_STACK),
  };
  const tensors = [
    // Whisper's two k=3 convolutions over frames, the second with stride 2
    ...frontConv('a.conv1d.1', [3, VOXTRAL_MELS, ae], [1, ae]),
    ...frontConv('a.conv1d.2', [3, ae, ae], [1, ae]),
    ...audioTransformer(d, { keyBias: false }),
    // the projector: GELU MLP without biases from the stacked frames to the language model's width
    tensor('mm.a.mlp.1.weight', [VOXTRAL_STACK * ae, d.embd], fanIn(VOXTRAL_STACK * ae)),
    tensor('mm.a.mlp.2.weight', [d.embd, d.embd], fanIn(d.embd)),
  ];
  return { metadata, tensors };
}

export const voxtral = {
  sizes: VOXTRAL_SIZES,
  fileName: (/** @type {string} */ size) => `voxtral-mini-${size}-random-f16`,
  build: (/** @type {VoxtralDims} */ dims, /** @type {GeneralKeys} */ general) => ({
    model: voxtralLanguageModel(dims, general),
    mmproj: voxtralMmproj(dims, general),
  }),
};
