// What both architectures' files are made of besides their tensors' weights (test-model-common.mjs): the general.*
// keys and convolutions. Everything here fixes the models' bytes: change it only together with
// make-tts-test-model.mjs's FORMAT_VERSION.
import { fanIn, tensor, zeros } from '../test-model-common.mjs';
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

/** @typedef {{ metadata: Record<string, import('../gguf/writer.mjs').MetadataValue>, tensors: Tensor[] }} GgufFile what writeGguf writes */
/** @typedef {import('../test-model-common.mjs').Tensor} Tensor */

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
