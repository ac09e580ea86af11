#!/usr/bin/env node
// Writes random-weight GGML text-to-speech models for tests and benchmarks: a backbone GGUF (libllama) and its
// mmproj GGUF (libmtmd), in the formats llama.cpp's converter writes, with every metadata key, tensor name, shape
// and type that the loaders (src/models/<arch>.cpp, tools/mtmd/clip.cpp) and graphs (tools/mtmd/models/*) use.
// The speech they produce is noise; the plumbing, timing and memory behave like the real models'.
//
//   node scripts/make-tts-test-model.mjs [--arch pockettts] [--size tiny|realistic] [--seed N] [--out DIR]
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
// Verified with llama.cpp's own tools/tts (llama-tts), built standalone from third_party/llama.cpp:
//   cmake -S third_party/llama.cpp -B /tmp/llama-build -G Ninja -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_MTMD=ON \
//     -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF \
//     -DCMAKE_BUILD_TYPE=Release && cmake --build /tmp/llama-build --target llama-tts -j2
//   node scripts/make-tts-test-model.mjs --size tiny --out /tmp/pocket-tiny
//   /tmp/llama-build/bin/llama-tts -m /tmp/pocket-tiny/pocket-tts-tiny-random-f16.gguf \
//     -mm /tmp/pocket-tiny/mmproj-pocket-tts-tiny-random-f16.gguf -p "Hello world, this is a test." \
//     --tts-speaker-file ../shared/audio/speech/jfk.wav --seed 1 -o /tmp/pocket-tiny/out.wav
// On 2 CPU cores (AVX-512), the 11 s reference clip encoded through the speaker encoder, 24 kHz 16-bit mono out:
//   tiny       80 frames (6.4 s) in 0.91 s, 88 frames/s; RMS 0.16, peak 0.78, nothing clipped, all finite
//   realistic  71 frames (5.7 s) in 2.76 s, 26 frames/s (1.9x real time, 0.9 GB resident); RMS 0.15, peak 0.64
// The same seed gives the same WAV byte for byte; without --tts-speaker-file it differs (no voice rows).
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

/** Metadata values: [gguf type, value] (arrays: [GGUF.arr, element type, values]). */
const kv = {
  u32: (v) => [GGUF.u32, v],
  i32: (v) => [GGUF.i32, v],
  f32: (v) => [GGUF.f32, v],
  bool: (v) => [GGUF.bool, v],
  str: (v) => [GGUF.str, v],
  strs: (v) => [GGUF.arr, GGUF.str, v],
  f32s: (v) => [GGUF.arr, GGUF.f32, v],
  i32s: (v) => [GGUF.arr, GGUF.i32, v],
};

/** Growable little-endian byte buffer for the header. */
class ByteWriter {
  constructor() {
    this.buf = Buffer.alloc(1 << 16);
    this.length = 0;
  }
  reserve(n) {
    if (this.length + n <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.length + n) size *= 2;
    const next = Buffer.alloc(size);
    this.buf.copy(next, 0, 0, this.length);
    this.buf = next;
  }
  u8(v) {
    this.reserve(1);
    this.buf.writeUInt8(v, this.length);
    this.length += 1;
  }
  i8(v) {
    this.reserve(1);
    this.buf.writeInt8(v, this.length);
    this.length += 1;
  }
  u32(v) {
    this.reserve(4);
    this.buf.writeUInt32LE(v, this.length);
    this.length += 4;
  }
  i32(v) {
    this.reserve(4);
    this.buf.writeInt32LE(v, this.length);
    this.length += 4;
  }
  u64(v) {
    this.reserve(8);
    this.buf.writeBigUInt64LE(BigInt(v), this.length);
    this.length += 8;
  }
  f32(v) {
    this.reserve(4);
    this.buf.writeFloatLE(v, this.length);
    this.length += 4;
  }
  str(s) {
    const bytes = Buffer.from(s, 'utf8');
    this.u64(bytes.length);
    this.reserve(bytes.length);
    bytes.copy(this.buf, this.length);
    this.length += bytes.length;
  }
  pad(alignment) {
    const n = (alignment - (this.length % alignment)) % alignment;
    this.reserve(n);
    this.buf.fill(0, this.length, this.length + n);
    this.length += n;
  }
  bytes() {
    return this.buf.subarray(0, this.length);
  }
}

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

function elementSize(type) {
  if (type === GGML_F32) return 4;
  if (type === GGML_F16) return 2;
  throw new Error(`unsupported ggml type ${type}`);
}

function alignUp(n, alignment) {
  return Math.ceil(n / alignment) * alignment;
}

/**
 * Writes one GGUF file: header (magic, version, counts), metadata, tensor infos (name, dims innermost first,
 * type, offset into the data section), padding to the alignment, then each tensor's data padded likewise.
 * `data(tensor)` returns a Float32Array or Uint16Array (f16 bits) of the tensor's elements.
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

/** 32-bit string hash (multiply-xorshift per character, then a finalizer). */
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

/** A 32-bit mixing function (xorshift-multiply, "lowbias32"). */
function lowbias32(z) {
  z = Math.imul(z ^ (z >>> 16), 0x7feb352d);
  z = Math.imul(z ^ (z >>> 15), 0x846ca68b);
  return (z ^ (z >>> 16)) >>> 0;
}

/** Counter-based generator: a Weyl sequence through a 32-bit mixing function; one stream per tensor. */
function randomStream(seed) {
  return weylStream(seed, 0x6a09e667, lowbias32);
}

// Approximately normal numbers as the centred sum of four 16-bit uniforms (two draws), scaled to unit variance:
// integer arithmetic only, so the bytes do not depend on the platform's Math library, and bounded by 3.46.
const IRWIN_HALL_SCALE = Math.sqrt(3) / 65536;
function normalStream(seed) {
  const next = randomStream(seed);
  return () => {
    const a = next();
    const b = next();
    return ((a & 0xffff) + (a >>> 16) + (b & 0xffff) + (b >>> 16) - 2 * 65535) * IRWIN_HALL_SCALE;
  };
}

/**
 * A tensor: name, ne (ggml order: innermost dimension first), type, and how to fill it:
 * { std } normal values, { fill } a constant, { values: (i) => number } computed per element.
 */
function tensor(name, ne, init, type = ne.length > 1 ? GGML_F16 : GGML_F32) {
  return { name, ne, type, init };
}
const gain = (value = 1) => ({ fill: value });
const zeros = () => ({ fill: 0 });
/** N(0, scale^2 / fanIn): keeps the activation scale through a random layer. */
const fanIn = (n, scale = 1) => ({ std: scale / Math.sqrt(n) });

function tensorData(t, seed) {
  const n = nElements(t.ne);
  const out = t.type === GGML_F16 ? new Uint16Array(n) : new Float32Array(n);
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
 */
function sentencePieces(size) {
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
const POCKET_LATENT = 32;
const POCKET_RATIOS = [4, 5, 6]; // encoder order; the decoder walks them backwards
const POCKET_DOWNSAMPLE = 16;
const POCKET_EOS_BIAS = -30; // the helper's threshold is -4: never fires
const POCKET_OUT_GAIN = 0.25; // last decoder conv: output around 0.1-0.3 RMS

function pocketBackbone(d, name) {
  const pieces = sentencePieces(d.vocab);
  const extra = ['<|pad|>', '<|bos_before_voice|>', '<|audio_bos|>'];
  const tokens = [...pieces.map((p) => p[0]), ...extra];
  const scores = [...pieces.map((p) => p[1]), ...extra.map(() => -1000)];
  const types = [...pieces.map((p) => p[2]), ...extra.map(() => TOKEN_CONTROL)];
  const nVocab = tokens.length;
  const a = 'pockettts';
  const metadata = {
    'general.architecture': kv.str(a),
    'general.type': kv.str('model'),
    'general.name': kv.str(name),
    'general.description': kv.str('random weights for tests (voxd scripts/make-tts-test-model.mjs)'),
    'general.file_type': kv.u32(LLAMA_FTYPE_MOSTLY_F16),
    'general.quantization_version': kv.u32(2),
    'general.alignment': kv.u32(ALIGNMENT),
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

/** mimi's transformer block (pre-norm, layer scale on both residuals), under `prefix`. */
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

/** A conv: kernel [K, IC, OC] (f16, as ggml_conv_1d needs) and bias [OC]. */
function conv(name, k, ic, oc, scale = 1) {
  return [tensor(`${name}.weight`, [k, ic, oc], fanIn(k * ic, scale)), tensor(`${name}.bias`, [oc], zeros())];
}

function pocketMmproj(d, name) {
  const e = d.embd;
  const m = d.mimiEmbd;
  const h = d.flowCh;
  const c = d.filters;
  const top = c * 2 ** POCKET_RATIOS.length; // SEANet channels at the latent end
  const common = {
    'general.architecture': kv.str('clip'),
    'general.type': kv.str('mmproj'),
    'general.name': kv.str(name),
    'general.description': kv.str('random weights for tests (voxd scripts/make-tts-test-model.mjs)'),
    'general.file_type': kv.u32(LLAMA_FTYPE_MOSTLY_F16),
    'general.quantization_version': kv.u32(2),
    'general.alignment': kv.u32(ALIGNMENT),
    'clip.has_vision_encoder': kv.bool(false),
  };
  const section = (prefix, projector) => ({
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

const ARCHS = {
  pockettts: {
    sizes: POCKET_SIZES,
    fileName: (size) => `pocket-tts-${size}-random-f16`,
    build: (dims, name) => ({ backbone: pocketBackbone(dims, name), mmproj: pocketMmproj(dims, name) }),
  },
};

// ---- options, cache, CLI ----

function normaliseOptions({ arch = 'pockettts', size = 'tiny', seed = 1 } = {}) {
  checkChoice('arch', arch, ARCHS);
  checkChoice('size', size, ARCHS[arch].sizes);
  checkSeed(seed);
  return { arch, size, seed };
}

/** The dimensions a size stands for (for tests and benchmarks that need them). */
export function ttsTestModelDims(options = {}) {
  const { arch, size } = normaliseOptions(options);
  return { ...ARCHS[arch].sizes[size] };
}

/** The file names of a pair written with these options: { model, mmproj }. */
export function ttsTestModelFiles(options = {}) {
  const { arch, size } = normaliseOptions(options);
  const base = ARCHS[arch].fileName(size);
  return { model: `${base}.gguf`, mmproj: `mmproj-${base}.gguf` };
}

/** The cache directory of a pair with these options. */
export function ttsTestModelDir(options = {}) {
  const { arch, size, seed } = normaliseOptions(options);
  return path.join(testModelsDir(), `${arch}-${size}-random-s${seed}-v${FORMAT_VERSION}`);
}

/**
 * Writes a pair into `outDir` (created if missing; the two files are written under temporary names and renamed
 * into place). Resolves to { dir, model, mmproj } (absolute paths).
 */
export async function writeTtsTestModel(outDir, options = {}) {
  const { arch, size, seed } = normaliseOptions(options);
  const dims = ARCHS[arch].sizes[size];
  const files = ttsTestModelFiles(options);
  const dir = path.resolve(outDir);
  await fs.promises.mkdir(dir, { recursive: true });
  const { backbone, mmproj } = ARCHS[arch].build(dims, ARCHS[arch].fileName(size));
  for (const [part, file] of [
    [backbone, files.model],
    [mmproj, files.mmproj],
  ]) {
    await writeAtomically(path.join(dir, file), (tmp) => writeGguf(tmp, part.metadata, part.tensors, (t) => tensorData(t, seed)));
  }
  return { dir, model: path.join(dir, files.model), mmproj: path.join(dir, files.mmproj) };
}

/** A cached random-weight pair for these options (generated on first use); resolves to { dir, model, mmproj }. */
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
