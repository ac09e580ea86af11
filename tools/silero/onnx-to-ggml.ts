/**
 * Silero VAD ONNX -> whisper.cpp GGML VAD file (the format `whisper_vad_init_from_file_with_params` reads).
 *
 * File layout, all integers int32 little-endian:
 *   magic "ggml" (0x67676d6c)
 *   model type (length-prefixed string), version major/minor/patch, window size, context size
 *   n_encoder_layers, then per layer: in_channels, out_channels, kernel_size
 *   lstm_input_size, lstm_hidden_size, final_conv_in, final_conv_out
 *   tensors until EOF: n_dims, name length, type (0 = f32, 1 = f16), ne[n_dims] (innermost first), name, data
 *
 * The loader allocates every tensor from the hparams with a fixed type, so names, element counts and types
 * below must match it exactly; the tensor order follows the upstream files.
 */
import { rename, readFile, rm, writeFile } from 'node:fs/promises';
import { listFloatTensors, type FloatTensor } from './onnx.js';

const GGML_FILE_MAGIC = 0x67676d6c;
const GGML_TYPE_F32 = 0;
const GGML_TYPE_F16 = 1;

const MODEL_TYPE = 'silero-16k';
// The ONNX file records no Silero release; this is the one the converter is validated against.
const DEFAULT_VERSION = '6.2.0';
// 16 kHz Silero consumes 512-sample windows plus 64 samples of left context (ONNX input [1, 576]).
const WINDOW_SIZE = 512;
const CONTEXT_SIZE = 64;
const N_ENCODER_LAYERS = 4;
// whisper.cpp hardcodes the STFT basis as [258, 1, 256]: real and imaginary rows for the 129 bins of a
// 256-point DFT. The 8 kHz branch of the ONNX graph has [130, 1, 128], so this shape also tells the two apart.
const STFT_BINS = 129;
const STFT_BASIS_DIMS = [2 * STFT_BINS, 1, 256];

interface TensorSpec {
  /** PyTorch state-dict name; the GGML file prefixes it with `_model.` */
  key: string;
  type: number;
  /** Keep unit dims: the loader compares ne[0..2], and only the STFT basis has a unit dim it expects. */
  keepDims?: boolean;
}

// conv weights are f16 (they feed ggml_conv_1d, which wants f16 kernels), everything else f32
const TENSORS: TensorSpec[] = [
  ...Array.from({ length: N_ENCODER_LAYERS }, (_, i) => [
    { key: `encoder.${i}.reparam_conv.weight`, type: GGML_TYPE_F16 },
    { key: `encoder.${i}.reparam_conv.bias`, type: GGML_TYPE_F32 },
  ]).flat(),
  { key: 'decoder.rnn.weight_ih', type: GGML_TYPE_F32 },
  { key: 'decoder.rnn.weight_hh', type: GGML_TYPE_F32 },
  { key: 'decoder.rnn.bias_ih', type: GGML_TYPE_F32 },
  { key: 'decoder.rnn.bias_hh', type: GGML_TYPE_F32 },
  { key: 'decoder.decoder.2.weight', type: GGML_TYPE_F16 },
  { key: 'decoder.decoder.2.bias', type: GGML_TYPE_F32 },
  { key: 'stft.forward_basis_buffer', type: GGML_TYPE_F16, keepDims: true },
];

export interface ConvertOptions {
  /** Silero release written into the header as major.minor.patch (default 6.2.0). */
  version?: string;
}

/**
 * Whether a graph name refers to a state-dict key: exporters and inliners prefix names
 * (`If_0_then_branch__Inline_0__encoder.0.reparam_conv.weight`), so match the key as a whole trailing component.
 */
function namesKey(name: string, key: string): boolean {
  if (name === key) return true;
  return name.endsWith(key) && /[^A-Za-z0-9]/.test(name.charAt(name.length - key.length - 1));
}

/** The 16 kHz weights: the graph scope (main graph or one subgraph) that holds every tensor we need. */
function select16kWeights(tensors: FloatTensor[]): Map<string, FloatTensor> {
  const scopes = new Map<string, Map<string, FloatTensor>>();
  for (const t of tensors) {
    const spec = TENSORS.find((s) => namesKey(t.name, s.key));
    if (!spec) continue;
    let found = scopes.get(t.scope);
    if (!found) scopes.set(t.scope, (found = new Map()));
    found.set(spec.key, t);
  }
  let best: Map<string, FloatTensor> | null = null;
  for (const found of scopes.values()) {
    const stft = found.get('stft.forward_basis_buffer');
    const is16k = stft !== undefined && stft.dims.join() === STFT_BASIS_DIMS.join();
    if (is16k && found.size === TENSORS.length) return found;
    if (is16k && (!best || found.size > best.size)) best = found;
  }
  if (scopes.size === 0) throw new Error('not a Silero VAD model: the ONNX graph has none of its weight tensors');
  if (!best) {
    throw new Error(`not a 16 kHz Silero VAD model: no 'stft.forward_basis_buffer' of shape [${STFT_BASIS_DIMS.join(', ')}] found`);
  }
  const missing = TENSORS.filter((s) => !best.has(s.key)).map((s) => s.key);
  throw new Error(`Silero VAD model is missing tensors: ${missing.join(', ')}`);
}

function requireDims(t: FloatTensor, key: string, expected: number[]): void {
  if (t.dims.join() !== expected.join()) {
    throw new Error(`tensor '${key}' has shape [${t.dims.join(', ')}], expected [${expected.join(', ')}]`);
  }
}

/** Hparams as the loader reads them; derived from the weight shapes and checked for consistency. */
function hparamsFrom(w: Map<string, FloatTensor>): number[] {
  const get = (key: string): FloatTensor => w.get(key) as FloatTensor; // presence checked by select16kWeights
  const out: number[] = [N_ENCODER_LAYERS];
  let channels = STFT_BINS; // the magnitude spectrum feeds the first conv
  for (let i = 0; i < N_ENCODER_LAYERS; i++) {
    const weight = get(`encoder.${i}.reparam_conv.weight`); // [out, in, kernel]
    const [cout = 0, cin = 0, kernel = 0] = weight.dims;
    requireDims(weight, `encoder.${i}.reparam_conv.weight`, [cout, channels, kernel]);
    requireDims(get(`encoder.${i}.reparam_conv.bias`), `encoder.${i}.reparam_conv.bias`, [cout]);
    out.push(cin, cout, kernel);
    channels = cout;
  }
  // PyTorch LSTM: weight_ih [4 * hidden, input], weight_hh [4 * hidden, hidden], gates stacked i, f, g, o
  const hidden = get('decoder.rnn.weight_hh').dims[1] ?? 0;
  requireDims(get('decoder.rnn.weight_ih'), 'decoder.rnn.weight_ih', [4 * hidden, channels]);
  requireDims(get('decoder.rnn.weight_hh'), 'decoder.rnn.weight_hh', [4 * hidden, hidden]);
  requireDims(get('decoder.rnn.bias_ih'), 'decoder.rnn.bias_ih', [4 * hidden]);
  requireDims(get('decoder.rnn.bias_hh'), 'decoder.rnn.bias_hh', [4 * hidden]);
  // the 1x1 output conv: weight [1, hidden, 1], bias [1]
  requireDims(get('decoder.decoder.2.weight'), 'decoder.decoder.2.weight', [1, hidden, 1]);
  requireDims(get('decoder.decoder.2.bias'), 'decoder.decoder.2.bias', [1]);
  out.push(channels, hidden, hidden, 1);
  return out;
}

const f16Scratch = new DataView(new ArrayBuffer(4));

/** IEEE binary32 -> binary16 bits, rounding to nearest even (what numpy's astype(float16) does). */
function f32ToF16(value: number): number {
  f16Scratch.setFloat32(0, value);
  const x = f16Scratch.getUint32(0);
  const sign = (x >>> 16) & 0x8000;
  const exp = (x >>> 23) & 0xff;
  const mant = x & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 : 0);
  const e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00;
  if (e < -10) return sign;
  // bits of the 24-bit significand that do not fit a half: 13 for normals, more for subnormals
  const shift = e > 0 ? 13 : 14 - e;
  const sig = e > 0 ? mant : mant | 0x800000;
  let h = (e > 0 ? e << 10 : 0) | (sig >>> shift);
  const rem = sig & ((1 << shift) - 1);
  const half = 1 << (shift - 1);
  // a carry out of the mantissa correctly bumps the exponent (up to infinity)
  if (rem > half || (rem === half && h & 1)) h++;
  return sign | h;
}

function parseVersion(version: string): number[] {
  const m = /^(\d+)\.(\d+)\.(\d+)$/.exec(version);
  if (!m) throw new Error(`invalid Silero version '${version}', expected major.minor.patch`);
  return m.slice(1).map(Number);
}

/** Converts a Silero VAD ONNX model (16 kHz branch) into a whisper.cpp GGML VAD model file image. */
export function convertSileroOnnxToGgml(onnx: Uint8Array, options: ConvertOptions = {}): Uint8Array {
  let tensors: FloatTensor[];
  try {
    tensors = listFloatTensors(onnx);
  } catch (err) {
    throw new Error(`not a Silero VAD ONNX model (${(err as Error).message})`, { cause: err });
  }
  const weights = select16kWeights(tensors);
  const hparams = hparamsFrom(weights);
  const version = parseVersion(options.version ?? DEFAULT_VERSION);

  const enc = new TextEncoder();
  const modelType = enc.encode(MODEL_TYPE);
  const records = TENSORS.map((spec) => {
    const t = weights.get(spec.key) as FloatTensor;
    const dims = spec.keepDims ? t.dims : t.dims.filter((d) => d !== 1);
    return { spec, t, name: enc.encode(`_model.${spec.key}`), ne: [...dims].reverse() };
  });

  const headerInts = 1 + 1 + 3 + 2 + hparams.length;
  let size = headerInts * 4 + modelType.length;
  for (const r of records) size += (3 + r.ne.length) * 4 + r.name.length + r.t.data.length * (r.spec.type === GGML_TYPE_F16 ? 2 : 4);

  const out = new Uint8Array(size);
  const v = new DataView(out.buffer);
  let pos = 0;
  const i32 = (x: number): void => {
    v.setInt32(pos, x, true);
    pos += 4;
  };
  const bytes = (b: Uint8Array): void => {
    out.set(b, pos);
    pos += b.length;
  };

  v.setUint32(pos, GGML_FILE_MAGIC, true);
  pos += 4;
  i32(modelType.length);
  bytes(modelType);
  version.forEach(i32);
  i32(WINDOW_SIZE);
  i32(CONTEXT_SIZE);
  hparams.forEach(i32);

  for (const { spec, t, name, ne } of records) {
    i32(ne.length);
    i32(name.length);
    i32(spec.type);
    ne.forEach(i32);
    bytes(name);
    // row-major PyTorch/ONNX order is already ggml order once the dims are reversed
    if (spec.type === GGML_TYPE_F16) {
      for (const x of t.data) {
        v.setUint16(pos, f32ToF16(x), true);
        pos += 2;
      }
    } else {
      for (const x of t.data) {
        v.setFloat32(pos, x, true);
        pos += 4;
      }
    }
  }
  return out;
}

/** Converts `onnxPath` into `ggmlPath`, writing a temporary file first so readers never see a partial model. */
export async function convertSileroOnnxFile(onnxPath: string, ggmlPath: string, options: ConvertOptions = {}): Promise<void> {
  const ggml = convertSileroOnnxToGgml(await readFile(onnxPath), options);
  const tmp = `${ggmlPath}.tmp-${process.pid}`;
  try {
    await writeFile(tmp, ggml);
    await rename(tmp, ggmlPath);
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
}
