// What both architectures' files are made of: the general.* keys, and tensors with their deterministic random
// weights. Everything here fixes the models' bytes: change it only together with make-tts-test-model.mjs's
// FORMAT_VERSION.
import { halfBits, weylStream } from '../test-model-common.mjs';
import { GGML_TYPE_F16, GGML_TYPE_F32, nElements } from '../gguf/ggml.mjs';
import { ALIGNMENT, kv } from '../gguf/writer.mjs';

const LLAMA_FTYPE_MOSTLY_F16 = 1;

/**
 * The general.* keys every file starts with, in the converter's order.
 * @param {string} architecture
 * @param {string} type
 * @param {string} name
 */
export function generalKeys(architecture, type, name) {
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
/** @typedef {{ metadata: Record<string, import('../gguf/writer.mjs').MetadataValue>, tensors: Tensor[] }} GgufFile what writeGguf writes */

/**
 * A tensor: name, ne (ggml order: innermost dimension first), type, and how to fill it:
 * { std } normal values, { fill } a constant, { values: (i) => number } computed per element.
 * @param {string} name
 * @param {number[]} ne
 * @param {TensorInit} init
 * @param {number} [type]
 * @returns {Tensor}
 */
export function tensor(name, ne, init, type = ne.length > 1 ? GGML_TYPE_F16 : GGML_TYPE_F32) {
  return { name, ne, type, init };
}
export const gain = (value = 1) => ({ fill: value });
export const zeros = () => ({ fill: 0 });
/** N(0, scale^2 / fanIn): keeps the activation scale through a random layer. */
export const fanIn = (/** @type {number} */ n, scale = 1) => ({ std: scale / Math.sqrt(n) });

/**
 * @param {Tensor} t
 * @param {number} seed
 */
export function tensorData(t, seed) {
  const n = nElements(t.ne);
  const out = t.type === GGML_TYPE_F16 ? new Uint16Array(n) : new Float32Array(n);
  /** @type {(i: number, v: number) => number} */
  const put = t.type === GGML_TYPE_F16 ? (i, v) => (out[i] = halfBits(v)) : (i, v) => (out[i] = v);
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
