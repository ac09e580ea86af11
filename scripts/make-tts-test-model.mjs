#!/usr/bin/env node
// Writes random-weight GGML text-to-speech models for tests and benchmarks: a backbone GGUF (libllama) and its
// mmproj GGUF (libmtmd), in the formats llama.cpp's converter writes, with every metadata key, tensor name, shape
// and type that the loaders (src/models/<arch>.cpp, tools/mtmd/clip.cpp) and graphs (tools/mtmd/models/*) use.
// The speech they produce is noise; the plumbing, timing and memory behave like the real models'.
//
//   node scripts/make-tts-test-model.mjs [--arch pockettts|qwen3tts] [--size tiny|realistic] [--seed N] [--out DIR]
//
// Without --out the pair goes to the cache (build/test-models, or $VOXD_TEST_MODELS_DIR) in a directory named by
// the options and the format version, and an existing one there is reused. Output is deterministic for given
// options (byte for byte). The directory holds `<name>.gguf` (backbone) and `mmproj-<name>.gguf`, the layout of
// llama.cpp's hub repositories.
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
// Weights as for Pocket TTS, with SnakeBeta's parameters stored folded (exp(alpha) = 1, 1 / exp(beta) = 1) and the
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
// The text vocabulary is synthetic (bytes, the words above merged whole, fillers, Qwen2's added tokens at their
// released ids), not Qwen's.
//
// Verified the same way (llama-tts, -n 80 frames, --seed 1, 2 CPU cores). llama-tts leaves libmtmd at its
// default 4 threads; on 2 cores OpenMP's spinning barriers then make the predictor's graph (thousands of small
// nodes per frame) 10x slower, so these ran with OMP_WAIT_POLICY=passive (an embedder should give libmtmd no more
// threads than cores). The backbone never stopped early, so each ran to 80 frames (6.4 s):
//   tiny       80 frames (6.4 s) in 2.5 s, 33 frames/s (code2wav: 0.7 s per 72-frame window); RMS 0.14, peak 0.71,
//              nothing clipped, all finite; 2.6 s with the jfk clip (14 s without OMP_WAIT_POLICY=passive)
//   realistic  80 frames in 48 s, 1.7 frames/s (0.13x real time, 4.8 GB resident): about 3 frames/s through
//              backbone and predictor, then 9-13 s per 72-frame code2wav window; RMS 0.17, peak 0.81, all finite
// The same seed gives the same WAV byte for byte; with --tts-speaker-file it differs (one x-vector row).
import { Buffer } from 'node:buffer';
import fs from 'node:fs';
import path from 'node:path';
import {
  cachedBuild,
  checkChoice,
  checkSeed,
  halfBits,
  nElements,
  parseArgs,
  runAsCli,
  testModelsDir,
  weylStream,
  writeAtomically,
} from './test-model-common.mjs';

// bumped whenever the output for given options changes, so stale cache entries are not reused
const FORMAT_VERSION = 1;

// ---- GGUF v3 ----

const GGUF_MAGIC = 'GGUF';
const GGUF_VERSION = 3;
const ALIGNMENT = 32; // GGUF_DEFAULT_ALIGNMENT; also written as general.alignment
const GGUF = { u8: 0, i8: 1, u16: 2, i16: 3, u32: 4, i32: 5, f32: 6, bool: 7, str: 8, arr: 9, u64: 10, i64: 11, f64: 12 };
const GGML_F32 = 0;
const GGML_F16 = 1;
const LLAMA_FTYPE_MOSTLY_F16 = 1;

// llama.cpp's token types (llama_token_type)
const TOKEN_NORMAL = 1;
const TOKEN_UNKNOWN = 2;
const TOKEN_CONTROL = 3;

/** @typedef {[type: number, ...value: any[]]} MetadataValue [gguf type, value], or [GGUF.arr, element type, values] */

/** Metadata values: [gguf type, value] (arrays: [GGUF.arr, element type, values]). */
const kv = {
  /** @type {(v: number) => MetadataValue} */
  u32: (v) => [GGUF.u32, v],
  /** @type {(v: number) => MetadataValue} */
  i32: (v) => [GGUF.i32, v],
  /** @type {(v: number) => MetadataValue} */
  f32: (v) => [GGUF.f32, v],
  /** @type {(v: boolean) => MetadataValue} */
  bool: (v) => [GGUF.bool, v],
  /** @type {(v: string) => MetadataValue} */
  str: (v) => [GGUF.str, v],
  /** @type {(v: string[]) => MetadataValue} */
  strs: (v) => [GGUF.arr, GGUF.str, v],
  /** @type {(v: number[]) => MetadataValue} */
  f32s: (v) => [GGUF.arr, GGUF.f32, v],
  /** @type {(v: number[]) => MetadataValue} */
  i32s: (v) => [GGUF.arr, GGUF.i32, v],
};

/** Growable little-endian byte buffer for the header. */
class ByteWriter {
  constructor() {
    this.buf = Buffer.alloc(1 << 16);
    this.length = 0;
  }
  /** @param {number} n */
  reserve(n) {
    if (this.length + n <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.length + n) size *= 2;
    const next = Buffer.alloc(size);
    this.buf.copy(next, 0, 0, this.length);
    this.buf = next;
  }
  /**
   * Appends `size` bytes that `write(at)` puts at offset `at`.
   * @param {number} size
   * @param {(at: number) => void} write
   */
  put(size, write) {
    this.reserve(size);
    write(this.length);
    this.length += size;
  }
  /** @param {number} v */
  u8(v) {
    this.put(1, (at) => this.buf.writeUInt8(v, at));
  }
  /** @param {number} v */
  i8(v) {
    this.put(1, (at) => this.buf.writeInt8(v, at));
  }
  /** @param {number} v */
  u32(v) {
    this.put(4, (at) => this.buf.writeUInt32LE(v, at));
  }
  /** @param {number} v */
  i32(v) {
    this.put(4, (at) => this.buf.writeInt32LE(v, at));
  }
  /** @param {number} v */
  u64(v) {
    this.put(8, (at) => this.buf.writeBigUInt64LE(BigInt(v), at));
  }
  /** @param {number} v */
  f32(v) {
    this.put(4, (at) => this.buf.writeFloatLE(v, at));
  }
  /** @param {string} s */
  str(s) {
    const bytes = Buffer.from(s, 'utf8');
    this.u64(bytes.length);
    this.put(bytes.length, (at) => bytes.copy(this.buf, at));
  }
  /** @param {number} alignment */
  pad(alignment) {
    const n = (alignment - (this.length % alignment)) % alignment;
    this.put(n, (at) => this.buf.fill(0, at, at + n));
  }
  bytes() {
    return this.buf.subarray(0, this.length);
  }
}

/**
 * The general.* keys every file starts with, in the converter's order.
 * @param {string} architecture
 * @param {string} type
 * @param {string} name
 */
function generalKeys(architecture, type, name) {
  return {
    'general.architecture': kv.str(architecture),
    'general.type': kv.str(type),
    'general.name': kv.str(name),
    'general.description': kv.str('random weights for tests (voxd scripts/make-tts-test-model.mjs)'),
    'general.file_type': kv.u32(LLAMA_FTYPE_MOSTLY_F16),
    'general.quantization_version': kv.u32(2),
    'general.alignment': kv.u32(ALIGNMENT),
  };
}
/**
 * @param {ByteWriter} w
 * @param {number} type a GGUF value type
 * @param {any} value a value of that type
 */
function writeValue(w, type, value) {
  switch (type) {
    case GGUF.u8:
      return w.u8(value);
    case GGUF.i8:
      return w.i8(value);
    case GGUF.u32:
      return w.u32(value);
    case GGUF.i32:
      return w.i32(value);
    case GGUF.f32:
      return w.f32(value);
    case GGUF.bool:
      return w.u8(value ? 1 : 0);
    case GGUF.str:
      return w.str(value);
    case GGUF.u64:
      return w.u64(value);
    default:
      throw new Error(`unsupported GGUF value type ${type}`);
  }
}

/** @param {number} type */
function elementSize(type) {
  if (type === GGML_F32) return 4;
  if (type === GGML_F16) return 2;
  throw new Error(`unsupported ggml type ${type}`);
}

/**
 * @param {number} n
 * @param {number} alignment
 */
function alignUp(n, alignment) {
  return Math.ceil(n / alignment) * alignment;
}

/**
 * Writes one GGUF file: header (magic, version, counts), metadata, tensor infos (name, dims innermost first,
 * type, offset into the data section), padding to the alignment, then each tensor's data padded likewise.
 * `data(tensor)` returns a Float32Array or Uint16Array (f16 bits) of the tensor's elements.
 * @param {string} file
 * @param {Record<string, MetadataValue>} metadata
 * @param {Tensor[]} tensors
 * @param {(tensor: Tensor) => Float32Array | Uint16Array} data
 */
function writeGguf(file, metadata, tensors, data) {
  const w = new ByteWriter();
  for (const ch of GGUF_MAGIC) w.u8(ch.charCodeAt(0));
  w.u32(GGUF_VERSION);
  w.u64(tensors.length);
  const entries = Object.entries(metadata);
  w.u64(entries.length);
  for (const [key, [type, ...rest]] of entries) {
    w.str(key);
    w.u32(type);
    if (type === GGUF.arr) {
      const [elementType, values] = rest;
      w.u32(elementType);
      w.u64(values.length);
      for (const v of values) writeValue(w, elementType, v);
    } else {
      writeValue(w, type, rest[0]);
    }
  }
  let offset = 0;
  for (const t of tensors) {
    w.str(t.name);
    w.u32(t.ne.length);
    for (const dim of t.ne) w.u64(dim);
    w.u32(t.type);
    w.u64(offset);
    offset += alignUp(nElements(t.ne) * elementSize(t.type), ALIGNMENT);
  }
  w.pad(ALIGNMENT);

  const fd = fs.openSync(file, 'w');
  try {
    fs.writeSync(fd, w.bytes());
    const zeros = Buffer.alloc(ALIGNMENT);
    for (const t of tensors) {
      const values = data(t);
      const bytes = Buffer.from(values.buffer, values.byteOffset, values.byteLength); // little-endian hosts only
      if (bytes.length !== nElements(t.ne) * elementSize(t.type)) throw new Error(`${t.name}: wrong data size`);
      fs.writeSync(fd, bytes);
      const padding = alignUp(bytes.length, ALIGNMENT) - bytes.length;
      if (padding > 0) fs.writeSync(fd, zeros, 0, padding);
    }
  } finally {
    fs.closeSync(fd);
  }
}

// ---- deterministic weights ----

/**
 * 32-bit string hash (multiply-xorshift per character, then a finalizer).
 * @param {string} text
 */
function hashString(text) {
  let h = 0x2545f491;
  for (let i = 0; i < text.length; i++) {
    h = Math.imul(h ^ text.charCodeAt(i), 0x9e3779b1);
    h ^= h >>> 13;
  }
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

/**
 * A 32-bit mixing function (xorshift-multiply, "lowbias32").
 * @param {number} z
 */
function lowbias32(z) {
  z = Math.imul(z ^ (z >>> 16), 0x7feb352d);
  z = Math.imul(z ^ (z >>> 15), 0x846ca68b);
  return (z ^ (z >>> 16)) >>> 0;
}

/**
 * Counter-based generator: a Weyl sequence through a 32-bit mixing function; one stream per tensor.
 * @param {number} seed
 */
function randomStream(seed) {
  return weylStream(seed, 0x6a09e667, lowbias32);
}

// Approximately normal numbers as the centred sum of four 16-bit uniforms (two draws), scaled to unit variance:
// integer arithmetic only, so the bytes do not depend on the platform's Math library, and bounded by 3.46.
const IRWIN_HALL_SCALE = Math.sqrt(3) / 65536;
/** @param {number} seed */
function normalStream(seed) {
  const next = randomStream(seed);
  return () => {
    const a = next();
    const b = next();
    return ((a & 0xffff) + (a >>> 16) + (b & 0xffff) + (b >>> 16) - 2 * 65535) * IRWIN_HALL_SCALE;
  };
}

/** @typedef {{ std: number } | { fill: number } | { values: (i: number) => number }} TensorInit */
/** @typedef {{ name: string, ne: number[], type: number, init: TensorInit }} Tensor */
/** @typedef {{ metadata: Record<string, MetadataValue>, tensors: Tensor[] }} GgufFile what writeGguf writes */

/**
 * A tensor: name, ne (ggml order: innermost dimension first), type, and how to fill it:
 * { std } normal values, { fill } a constant, { values: (i) => number } computed per element.
 * @param {string} name
 * @param {number[]} ne
 * @param {TensorInit} init
 * @param {number} [type]
 * @returns {Tensor}
 */
function tensor(name, ne, init, type = ne.length > 1 ? GGML_F16 : GGML_F32) {
  return { name, ne, type, init };
}
const gain = (value = 1) => ({ fill: value });
const zeros = () => ({ fill: 0 });
/** N(0, scale^2 / fanIn): keeps the activation scale through a random layer. */
const fanIn = (/** @type {number} */ n, scale = 1) => ({ std: scale / Math.sqrt(n) });

/**
 * @param {Tensor} t
 * @param {number} seed
 */
function tensorData(t, seed) {
  const n = nElements(t.ne);
  const out = t.type === GGML_F16 ? new Uint16Array(n) : new Float32Array(n);
  /** @type {(i: number, v: number) => number} */
  const put = t.type === GGML_F16 ? (i, v) => (out[i] = halfBits(v)) : (i, v) => (out[i] = v);
  const { init } = t;
  if ('fill' in init) {
    for (let i = 0; i < n; i++) put(i, init.fill);
  } else if ('values' in init) {
    for (let i = 0; i < n; i++) put(i, init.values(i));
  } else {
    const next = normalStream(hashString(t.name) ^ Math.imul(seed, 0x27d4eb2f));
    for (let i = 0; i < n; i++) put(i, init.std * next());
  }
  return out;
}

// ---- vocabulary (SentencePiece unigram, llama.cpp's UGM tokenizer) ----

const SPACE = '\u2581'; // SentencePiece's escaped space
const WORDS = (
  'the of and to a in is it you that he was for on are with as I his they be at one have this from or had by ' +
  'word but what some we can out other were all there when up use your how said an each she which do their time ' +
  'if will way about many then them write would like so these her long make thing see him two has look more day ' +
  'could go come did number sound no most people my over know water than call first who may down side been now ' +
  'find hello world test speech voice audio model'
).split(' ');
const LETTERS = 'abcdefghijklmnopqrstuvwxyz';
const CHARS = `${LETTERS}${LETTERS.toUpperCase()}0123456789.,!?;:'"-()`;

/**
 * Pieces with unigram log-probabilities: <unk>, <s>, </s>, the bare space piece (so punctuation after a space
 * tokenizes as [space, mark], which the Pocket TTS helper relies on), single characters, whole words with a
 * leading space, then (to reach `size`) two- and three-letter pieces. No piece joins a space and punctuation.
 * @param {number} size
 */
function sentencePieces(size) {
  /** @type {[piece: string, score: number, type: number][]} */
  const pieces = [
    ['<unk>', 0, TOKEN_UNKNOWN],
    ['<s>', 0, TOKEN_CONTROL],
    ['</s>', 0, TOKEN_CONTROL],
    [SPACE, -3, TOKEN_NORMAL],
  ];
  for (const ch of CHARS) pieces.push([ch, -6, TOKEN_NORMAL]);
  for (const word of WORDS) pieces.push([SPACE + word, -4 - word.length / 10, TOKEN_NORMAL]);
  const seen = new Set(pieces.map((p) => p[0]));
  const fillers = function* () {
    for (const a of LETTERS) for (const b of LETTERS) yield SPACE + a + b;
    for (const a of LETTERS) for (const b of LETTERS) yield a + b;
    for (const a of LETTERS) for (const b of LETTERS) for (const c of LETTERS) yield SPACE + a + b + c;
  };
  for (const piece of fillers()) {
    if (pieces.length >= size) break;
    if (seen.has(piece)) continue;
    seen.add(piece);
    pieces.push([piece, -8 - pieces.length / 1000, TOKEN_NORMAL]);
  }
  return pieces;
}

// ---- Pocket TTS ----

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
 * @param {string} name
 */
function pocketBackbone(d, name) {
  const pieces = sentencePieces(d.vocab);
  const extra = ['<|pad|>', '<|bos_before_voice|>', '<|audio_bos|>'];
  const tokens = [...pieces.map((p) => p[0]), ...extra];
  const scores = [...pieces.map((p) => p[1]), ...extra.map(() => -1000)];
  const types = [...pieces.map((p) => p[2]), ...extra.map(() => TOKEN_CONTROL)];
  const nVocab = tokens.length;
  const a = 'pockettts';
  const metadata = {
    ...generalKeys(a, 'model', name),
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
 * A conv: kernel [K, IC, OC] (f16, as ggml_conv_1d needs) and bias [OC].
 * @param {string} name
 * @param {number} k
 * @param {number} ic
 * @param {number} oc
 */
function conv(name, k, ic, oc, scale = 1) {
  return [tensor(`${name}.weight`, [k, ic, oc], fanIn(k * ic, scale)), tensor(`${name}.bias`, [oc], zeros())];
}

/**
 * @param {PocketDims} d
 * @param {string} name
 */
function pocketMmproj(d, name) {
  const e = d.embd;
  const m = d.mimiEmbd;
  const h = d.flowCh;
  const c = d.filters;
  const top = c * 2 ** POCKET_RATIOS.length; // SEANet channels at the latent end
  const common = {
    ...generalKeys('clip', 'mmproj', name),
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

// ---- vocabulary (byte-level BPE, llama.cpp's "gpt2" tokenizer) ----

/**
 * GPT-2's byte alphabet: every byte is one printable character, the printable Latin-1 ones standing for
 * themselves and the rest (controls, space, soft hyphen) moved to U+0100 upwards in byte order, so a space is
 * "Ġ" and a newline "Ċ". Ordinary tokens are strings over this alphabet.
 */
function byteAlphabet() {
  const chars = [];
  let next = 0x100;
  for (let b = 0; b < 256; b++) {
    const printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || b >= 0xae;
    chars.push(String.fromCodePoint(printable ? b : next++));
  }
  return chars;
}

/**
 * Ordinary tokens and merges: the 256 bytes (so any text tokenizes), then whole words built one character at a
 * time (each merge joins a word's prefix and its next character, so every intermediate is itself a token and
 * BPE never strands a symbol outside the vocabulary). "assistant" goes first, so its merges rank highest and
 * the chat wrap's role line is three tokens, as the helper's slicing assumes; the other words carry a leading
 * space ("Ġ"). Unreachable fillers (letter runs without merges) pad the list to `size`.
 * @param {number} size
 */
function bpeTokens(size) {
  const alphabet = byteAlphabet();
  const space = alphabet[0x20];
  const tokens = [...alphabet];
  const seen = new Set(tokens);
  const merges = [];
  for (const word of ['assistant', ...WORDS.map((w) => space + w)]) {
    const chars = [...word];
    let prefix = chars[0];
    for (const ch of chars.slice(1)) {
      const merged = prefix + ch;
      if (!seen.has(merged)) {
        merges.push(`${prefix} ${ch}`);
        tokens.push(merged);
        seen.add(merged);
      }
      prefix = merged;
    }
  }
  const fillers = function* () {
    for (const a of LETTERS) for (const b of LETTERS) yield* [space + a + b, a + b];
    for (const a of LETTERS) for (const b of LETTERS) for (const c of LETTERS) yield* [space + a + b + c, a + b + c];
    for (const a of LETTERS) for (const b of LETTERS) for (const c of LETTERS) for (const e of LETTERS) yield a + b + c + e;
  };
  for (const piece of fillers()) {
    if (tokens.length >= size) break;
    if (seen.has(piece)) continue;
    seen.add(piece);
    tokens.push(piece);
  }
  if (tokens.length < size) throw new Error(`vocabulary of ${size} is too large for the filler pieces`);
  return { tokens, merges };
}

// ---- Qwen3-TTS ----

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
    embd: 1024,
    head: 16,
    headKv: 8,
    headDim: 128,
    layer: 28,
    ff: 3072,
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
 * @param {string} name
 */
function qwenBackbone(d, name) {
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
  const pairs = d.headDim / 2;
  const a = 'qwen3tts';
  const metadata = {
    ...generalKeys(a, 'model', name),
    [`${a}.vocab_size`]: kv.u32(nVocab),
    // the release says 32768, but llama.cpp's default context is the trained one, and 32768 positions of KV
    // cache would be 3.7 GB at the realistic size; 4096 frames are 5.5 minutes of speech
    [`${a}.context_length`]: kv.u32(4096),
    [`${a}.embedding_length`]: kv.u32(d.embd),
    [`${a}.feed_forward_length`]: kv.u32(d.ff),
    [`${a}.block_count`]: kv.u32(d.layer),
    [`${a}.attention.head_count`]: kv.u32(d.head),
    [`${a}.attention.head_count_kv`]: kv.u32(d.headKv),
    [`${a}.attention.key_length`]: kv.u32(d.headDim),
    [`${a}.attention.value_length`]: kv.u32(d.headDim),
    [`${a}.attention.layer_norm_rms_epsilon`]: kv.f32(1e-6),
    [`${a}.rope.freq_base`]: kv.f32(1e6),
    // interleaved M-RoPE sections (temporal, height, width, extra) in rotary pairs, in the release's proportions
    [`${a}.rope.dimension_sections`]: kv.i32s([(pairs * 3) / 8, (pairs * 5) / 16, (pairs * 5) / 16, 0]),
    'tokenizer.ggml.model': kv.str('gpt2'),
    'tokenizer.ggml.pre': kv.str('qwen2'),
    'tokenizer.ggml.tokens': kv.strs(tokens),
    'tokenizer.ggml.token_type': kv.i32s(types),
    'tokenizer.ggml.merges': kv.strs(merges),
    'tokenizer.ggml.add_bos_token': kv.bool(false),
    'tokenizer.ggml.add_eos_token': kv.bool(false),
    'tokenizer.ggml.bos_token_id': kv.u32(tokens.indexOf('<|endoftext|>')),
    'tokenizer.ggml.eos_token_id': kv.u32(codecEos), // the end-of-speech code ends generation
    'tokenizer.ggml.padding_token_id': kv.u32(tokens.indexOf('<|endoftext|>')),
    'tokenizer.ggml.suppress_tokens': kv.i32s(suppressed),
  };
  const e = d.embd;
  const q = d.head * d.headDim;
  const k = d.headKv * d.headDim;
  const tensors = [
    // text and codec rows alike: unit scale (the converter folds the text projection MLP into the text rows)
    tensor('token_embd.weight', [e, nVocab], { std: 1 }),
    tensor('output_norm.weight', [e], gain()),
    // the codec head: logits ~ N(0, 1) over the codec rows, so sampling wanders and codec_eos is rare
    tensor('output.weight', [e, QWEN_CODEC_VOCAB], fanIn(e)),
  ];
  for (let i = 0; i < d.layer; i++) {
    const b = `blk.${i}`;
    tensors.push(
      tensor(`${b}.attn_norm.weight`, [e], gain()),
      tensor(`${b}.attn_q.weight`, [e, q], fanIn(e)),
      tensor(`${b}.attn_k.weight`, [e, k], fanIn(e)),
      tensor(`${b}.attn_v.weight`, [e, k], fanIn(e)),
      tensor(`${b}.attn_output.weight`, [q, e], fanIn(q, 0.5)),
      tensor(`${b}.attn_q_norm.weight`, [d.headDim], gain()),
      tensor(`${b}.attn_k_norm.weight`, [d.headDim], gain()),
      tensor(`${b}.ffn_norm.weight`, [e], gain()),
      tensor(`${b}.ffn_gate.weight`, [e, d.ff], fanIn(e)),
      tensor(`${b}.ffn_up.weight`, [e, d.ff], fanIn(e)),
      tensor(`${b}.ffn_down.weight`, [d.ff, e], fanIn(d.ff, 0.5)),
    );
  }
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
 * @param {string} name
 */
function qwenMmproj(d, name) {
  const e = d.embd;
  const c = d.spkChannels;
  const m = d.spkMfa;
  const metadata = {
    ...generalKeys('clip', 'mmproj', name),
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
    tensors.push(...swigluBlock(`a.gen.code.blk.${i}`, cp, d.cpHead, d.cpHeadKv, d.cpHeadDim, d.cpFf, { qkNorm: true, downType: GGML_F32 }));
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
      tensor(`${b}.conv.weight`, [2, lat, lat], fanIn(lat), GGML_F32),
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
      tensor(`${b}.conv.weight`, [2 * stride, dim / 2, dim], fanIn(2 * dim), GGML_F32),
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

const ARCHS = {
  pockettts: {
    sizes: POCKET_SIZES,
    fileName: (/** @type {string} */ size) => `pocket-tts-${size}-random-f16`,
    build: (/** @type {PocketDims} */ dims, /** @type {string} */ name) => ({ backbone: pocketBackbone(dims, name), mmproj: pocketMmproj(dims, name) }),
  },
  qwen3tts: {
    sizes: QWEN_SIZES,
    fileName: (/** @type {string} */ size) => `qwen3-tts-${size}-random-f16`,
    build: (/** @type {QwenDims} */ dims, /** @type {string} */ name) => ({ backbone: qwenBackbone(dims, name), mmproj: qwenMmproj(dims, name) }),
  },
};

// ---- options, cache, CLI ----

/** @typedef {{ arch?: string, size?: string, seed?: number }} TtsOptions */

/** @param {TtsOptions} [options] */
function normaliseOptions({ arch = 'pockettts', size = 'tiny', seed = 1 } = {}) {
  checkChoice('arch', arch, ARCHS);
  checkChoice('size', size, ARCHS[arch].sizes);
  checkSeed(seed);
  return { arch, size, seed };
}

/**
 * The dimensions a size stands for (for tests and benchmarks that need them).
 * @param {TtsOptions} [options]
 */
export function ttsTestModelDims(options = {}) {
  const { arch, size } = normaliseOptions(options);
  return { ...ARCHS[arch].sizes[size] };
}

/**
 * The file names of a pair written with these options: { model, mmproj }.
 * @param {TtsOptions} [options]
 */
export function ttsTestModelFiles(options = {}) {
  const { arch, size } = normaliseOptions(options);
  const base = ARCHS[arch].fileName(size);
  return { model: `${base}.gguf`, mmproj: `mmproj-${base}.gguf` };
}

/**
 * The cache directory of a pair with these options.
 * @param {TtsOptions} [options]
 */
export function ttsTestModelDir(options = {}) {
  const { arch, size, seed } = normaliseOptions(options);
  return path.join(testModelsDir(), `${arch}-${size}-random-s${seed}-v${FORMAT_VERSION}`);
}

/**
 * Writes a pair into `outDir` (created if missing; the two files are written under temporary names and renamed
 * into place). Resolves to { dir, model, mmproj } (absolute paths).
 * @param {string} outDir
 * @param {TtsOptions} [options]
 */
export async function writeTtsTestModel(outDir, options = {}) {
  const { arch, size, seed } = normaliseOptions(options);
  const dims = ARCHS[arch].sizes[size];
  const files = ttsTestModelFiles(options);
  const dir = path.resolve(outDir);
  await fs.promises.mkdir(dir, { recursive: true });
  // dims are this arch's own sizes: a link between ARCHS[arch].sizes and .build that TypeScript cannot follow
  const { backbone, mmproj } = ARCHS[arch].build(/** @type {PocketDims & QwenDims} */ (dims), ARCHS[arch].fileName(size));
  for (const [part, file] of /** @type {[GgufFile, string][]} */ ([
    [backbone, files.model],
    [mmproj, files.mmproj],
  ])) {
    await writeAtomically(path.join(dir, file), (tmp) => writeGguf(tmp, part.metadata, part.tensors, (t) => tensorData(t, seed)));
  }
  return { dir, model: path.join(dir, files.model), mmproj: path.join(dir, files.mmproj) };
}

/**
 * A cached random-weight pair for these options (generated on first use); resolves to { dir, model, mmproj }.
 * @param {TtsOptions} [options]
 */
export async function makeTtsTestModel(options = {}) {
  const dir = ttsTestModelDir(options);
  const files = ttsTestModelFiles(options);
  const result = { dir, model: path.join(dir, files.model), mmproj: path.join(dir, files.mmproj) };
  // the whole directory is built and renamed in, so a reader never sees half a pair
  await cachedBuild(
    dir,
    () => fs.existsSync(result.model) && fs.existsSync(result.mmproj),
    (tmp) => writeTtsTestModel(tmp, options),
  );
  return result;
}

await runAsCli(import.meta.url, 'make-tts-test-model', async (args) => {
  const { options, out } = parseArgs(args, { '--arch': ['arch', 'string'], '--size': ['size', 'string'], '--seed': ['seed', 'number'] });
  const result = out ? await writeTtsTestModel(out, options) : await makeTtsTestModel(options);
  console.log(result.model);
  console.log(result.mmproj);
});
