// The Qwen3-ASR pair of make-asr-test-model.mjs: what its files hold, at which sizes, and how it was checked.
//
// Qwen3-ASR (Qwen; llama.cpp's converter, conversion/qwen3vl.py, writes it as Qwen3ASRTextModel and
// Qwen3ASRMmprojModel): the language model is a Qwen3 decoder under architecture `qwen3vl` (RMSNorm, q/k norms,
// SwiGLU, grouped-query attention, interleaved M-RoPE with sections 24:20:20 of 64 rotary pairs, n_deepstack_layers
// 0), its output head tied to the token embeddings as in the release, Qwen2's byte-level BPE ("gpt2", pre-tokenizer
// "qwen2") with the added tokens at the released ids: <|endoftext|> 151643, <|im_start|> 151644, <|im_end|> 151645
// (BOS and EOS, as the converter sets them), <|audio_start|> 151669, <|audio_end|> 151670, <|audio_pad|> 151676
// (control tokens), <asr_text> 151704 (user-defined: not special in the release's tokenizer configuration, nor
// <|...|>-shaped); the added rows whose text was not at hand are written as the converter writes ids the tokenizer
// lacks, [PADn] and unused. The chat template is the chatml one the converter writes. The mmproj (projector
// `qwen3a`, under clip.audio.projector_type) holds the audio encoder: three stride-2 3x3 convolutions over
// 100-frame chunks of a 128-bin log-mel, a linear map (no bias) of channels x the 16 bins left to the encoder's
// width, Whisper's sinusoidal positions (restarting each chunk: 13 positions per second of audio), pre-norm layers
// with biased q, k, v, the final LayerNorm, and the two-layer GELU projector to the language model's width; the
// convolutions f16, biases and positions f32, as the converter writes them. The weights are random, the language
// model a word chain (parts.mjs), so greedy decoding is decisive and a transcript runs to the caller's limit.
// Sizes (why: see QWEN_ASR_SIZES below):
//   tiny       language model 2 layers x 64 (2 heads of 32, 1 key/value head, ffn 256), the full 151936 rows
//              (the released ids need them); encoder 2 layers x 32 (2 heads, ffn 64), 8 conv channels.
//              22 MB + 0.25 MB, written in 0.6 s.
//   realistic  the released Qwen3-ASR-0.6B: language model 28 layers x 1024 (16 heads of 128, 8 key/value heads,
//              ffn 3072); encoder 18 layers x 896 (14 heads, ffn 3584), 480 conv channels, output 1024.
//              1.19 GB + 0.38 GB in f16, written in about 30 s.
// The text vocabulary is synthetic (test-model-vocab.mjs's bytes, English words merged whole, fillers), not Qwen's.
//
// Verified with the llama.cpp of third_party (its llama-mtmd-cli, and a probe printing each step's logits through
// libllama and libmtmd with the same prompt), 2 CPU cores:
//   llama-mtmd-cli -m qwen3-asr-SIZE-random-f16.gguf --mmproj mmproj-qwen3-asr-SIZE-random-f16.gguf \
//     --audio ../shared/audio/speech/jfk.wav -p "Transcribe audio to text" --temp 0 -n 48 -t 2
// Both files load without a warning (every tensor found and used); jfk.wav (11 s) becomes 156 audio positions, the
// prompt 184; both sizes write 48 words, e.g. " long make thing see him two has look more day could go ..." (tiny):
//   tiny       load 157 ms, audio encoded in 84 + 83 ms (two batches), prompt 171 ms, 890 tokens/s
//   realistic  load 0.9 s, audio encoded in 1.05 + 0.47 s, prompt 2.7 s (68 tokens/s), 23 tokens/s, 2.7 GB resident
// The transcript is the same with -t 1 and -t 2, flash attention on and off, and -ub 16. Over 64 steps on
// jfk.wav and librivox-0870/0890/0920.wav, flash attention with 2 threads against none with 1 thread and
// 64-token batches: logits moved by 0.023 at most (tiny; realistic 0.012); after the first token the leader was
// ahead by 16.6 at least (tiny; realistic 103.6); the first token led by 0.45 to 5.6 (tiny; realistic 0.12 to
// 1.8) and varies little with the audio (at the tiny size "long" for jfk and 0870, "who" for 0890 and 0920); and
// <|im_end|> stayed 37000 places or more below the top.
import { kv } from '../gguf/writer.mjs';
import { fanIn, gain, tensor } from '../test-model-common.mjs';
import { decoderBlocks, QWEN3_0_6B, qwen2TokenizerKeys, qwen3DecoderKeys } from '../test-model-gguf.mjs';
import { bpeTokens, TOKEN_CONTROL, TOKEN_NORMAL, TOKEN_UNUSED, TOKEN_USER_DEFINED } from '../test-model-vocab.mjs';
import { audioEncoderKeys, audioTransformer, frontConv, linear, replaceTensors, vocabularyRows, WORD_LOGIT_STD, wordChain, wordRms } from './parts.mjs';

/** @typedef {import('../test-model-common.mjs').GeneralKeys} GeneralKeys */

// tiny: the smallest shapes that still take every path: grouped-query attention (2 query heads, 1 key/value head),
// heads of 32 (16 rotary pairs, split 6:5:5 as the release's 24:20:20), 2 layers, an FFN of 256 (two neurons for
// each of the chain's 107 words), an encoder of 2 layers x 32 with 2 heads and 8 conv channels. What the loaders and
// graphs fix is kept: the 151936 rows (the released ids need them), 128 mel bins, Whisper's 1500 positions.
// realistic: Qwen3-ASR-0.6B as released (its thinker_config: text 28 layers x 1024, 16 heads of 128, 8 key/value
// heads, intermediate 3072, vocabulary 151936, tied embeddings; audio d_model 896, 18 layers, 14 heads, ffn 3584,
// downsample_hidden_size 480, output_dim 1024).
const QWEN_ASR_SIZES = {
  tiny: { embd: 64, head: 2, headKv: 1, headDim: 32, layer: 2, ff: 256, audioEmbd: 32, audioHead: 2, audioLayer: 2, audioFf: 64, audioConv: 8 },
  realistic: {
    ...QWEN3_0_6B,
    audioEmbd: 896,
    audioHead: 14,
    audioLayer: 18,
    audioFf: 3584,
    audioConv: 480,
  },
};
/** @typedef {typeof QWEN_ASR_SIZES.tiny} QwenAsrDims */

// Qwen2's vocabulary size; the ordinary tokens end where its added tokens begin, at <|endoftext|>
const QWEN_VOCAB = 151936;
const QWEN_FIRST_ADDED = 151643;
/** @type {Record<number, [text: string, type: number]>} */
const QWEN_ADDED = {
  151643: ['<|endoftext|>', TOKEN_CONTROL],
  151644: ['<|im_start|>', TOKEN_CONTROL],
  151645: ['<|im_end|>', TOKEN_CONTROL],
  151669: ['<|audio_start|>', TOKEN_CONTROL],
  151670: ['<|audio_end|>', TOKEN_CONTROL],
  151676: ['<|audio_pad|>', TOKEN_CONTROL],
  // not special in the tokenizer's configuration and not <|...|>-shaped, so the converter makes it user-defined
  151704: ['<asr_text>', TOKEN_USER_DEFINED],
};
const QWEN_IM_END = 151645;
const QWEN_ENDOFTEXT = 151643;
// the chatml template the converter writes in place of the release's (its \n are Jinja escapes)
const QWEN_CHAT_TEMPLATE =
  "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}" +
  "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
// The release's 65536 positions would cost 7.5 GB of KV cache at the realistic size, and llama.cpp's default context
// is the trained one; 8192 hold 10 minutes of audio (13 positions a second) with room for the transcript.
const QWEN_CONTEXT = 8192;
const QWEN_MELS = 128;
const QWEN_CONV_FREQS = QWEN_MELS / 8; // mel bins left after the three stride-2 convolutions

/**
 * The vocabulary: test-model-vocab.mjs's byte-level BPE tokens up to <|endoftext|>, then Qwen2's added tokens at their
 * released ids; the added rows not named in QWEN_ADDED are written as the converter writes ids the tokenizer lacks.
 */
function qwenVocabulary() {
  const { tokens: ordinary, merges } = bpeTokens(QWEN_FIRST_ADDED);
  const tokens = [...ordinary];
  const types = ordinary.map(() => TOKEN_NORMAL);
  for (let id = QWEN_FIRST_ADDED; id < QWEN_VOCAB; id++) {
    const [text, type] = QWEN_ADDED[id] ?? [`[PAD${id}]`, TOKEN_UNUSED];
    tokens.push(text);
    types.push(type);
  }
  return { tokens, types, merges };
}

/**
 * The language model, as conversion/qwen3vl.py's Qwen3ASRTextModel writes it.
 * @param {QwenAsrDims} d
 * @param {GeneralKeys} general
 */
function qwenLanguageModel(d, general) {
  const { tokens, types, merges } = qwenVocabulary();
  const a = 'qwen3vl';
  const metadata = {
    ...general(a, 'model'),
    ...qwen3DecoderKeys(a, d, tokens.length, QWEN_CONTEXT),
    [`${a}.n_deepstack_layers`]: kv.u32(0),
    ...qwen2TokenizerKeys(tokens, types, merges),
    // as the converter: <|im_end|> as both
    'tokenizer.ggml.bos_token_id': kv.u32(QWEN_IM_END),
    'tokenizer.ggml.eos_token_id': kv.u32(QWEN_IM_END),
    'tokenizer.ggml.padding_token_id': kv.u32(QWEN_ENDOFTEXT),
    'tokenizer.chat_template': kv.str(QWEN_CHAT_TEMPLATE),
  };
  const e = d.embd;
  const words = wordRms(d.layer);
  const tensors = [
    // tied: the released models have no separate output head, so llama.cpp uses these rows for both
    tensor('token_embd.weight', [e, tokens.length], vocabularyRows(e, tokens, types, words)),
    // the logits' scale: a word's row gives N(0, WORD_LOGIT_STD^2) over a random normalised hidden state
    tensor('output_norm.weight', [e], gain(WORD_LOGIT_STD / (words * Math.sqrt(e)))),
    ...replaceTensors(decoderBlocks(d), wordChain(`blk.${d.layer - 1}`, e, d.ff, tokens, words)),
  ];
  return { metadata, tensors };
}

/**
 * The audio encoder and projector, as conversion/qwen3vl.py's Qwen3ASRMmprojModel writes them.
 * @param {QwenAsrDims} d
 * @param {GeneralKeys} general
 */
function qwenMmproj(d, general) {
  const ae = d.audioEmbd;
  const c = d.audioConv;
  const metadata = {
    ...general('clip', 'mmproj'),
    ...audioEncoderKeys(d),
    'clip.audio.num_mel_bins': kv.u32(QWEN_MELS),
    'clip.audio.attention.layer_norm_epsilon': kv.f32(1e-5),
    'clip.audio.projector_type': kv.str('qwen3a'),
  };
  const tensors = [
    // three stride-2 3x3 convolutions over (frames, mel bins)
    ...frontConv('a.conv2d.1', [3, 3, 1, c], [1, 1, c]),
    ...frontConv('a.conv2d.2', [3, 3, c, c], [1, 1, c]),
    ...frontConv('a.conv2d.3', [3, 3, c, c], [1, 1, c]),
    // the channels x remaining mel bins of each frame to the encoder's width, without a bias
    tensor('a.conv_out.weight', [c * QWEN_CONV_FREQS, ae], fanIn(c * QWEN_CONV_FREQS)),
    ...audioTransformer(d, { keyBias: true }),
    // the projector: GELU MLP to the language model's width
    ...linear('mm.a.mlp.1', ae, ae),
    ...linear('mm.a.mlp.2', ae, d.embd),
  ];
  return { metadata, tensors };
}

export const qwen3Asr = {
  sizes: QWEN_ASR_SIZES,
  fileName: (/** @type {string} */ size) => `qwen3-asr-${size}-random-f16`,
  build: (/** @type {QwenAsrDims} */ dims, /** @type {GeneralKeys} */ general) => ({
    model: qwenLanguageModel(dims, general),
    mmproj: qwenMmproj(dims, general),
  }),
};
