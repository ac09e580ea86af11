// ggml's tensor types as its file formats number them (GGUF, and the older format of whisper.cpp's models), and the
// sizes that follow: what the GGUF writer (writer.mjs) and make-whisper-test-model.mjs share.

export const GGML_TYPE_F32 = 0;
export const GGML_TYPE_F16 = 1;

/**
 * Number of elements of a tensor with dimensions `ne`.
 * @param {number[]} ne
 */
export function nElements(ne) {
  return ne.reduce((a, b) => a * b, 1);
}

/**
 * Bytes per element of the types these scripts write.
 * @param {number} type
 */
export function elementSize(type) {
  if (type === GGML_TYPE_F32) return 4;
  if (type === GGML_TYPE_F16) return 2;
  throw new Error(`unsupported ggml type ${type}`);
}
