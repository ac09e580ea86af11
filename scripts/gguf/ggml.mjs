// ggml's tensor types as its file formats number them (GGUF, and the older format of whisper.cpp's and libparakeet's
// models), the sizes that follow, and that older format's magic and tensor records: what the GGUF writer
// (writer.mjs), make-whisper-test-model.mjs and make-parakeet-test-model.mjs share.
import { Buffer } from 'node:buffer';
import fs from 'node:fs';

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

// ---- the older format: magic, the model's own header (hparams, filters, vocabulary...), then tensor records ----

/** "ggml" as a little-endian uint32: a file's first 4 bytes. */
export const GGML_FILE_MAGIC = 0x67676d6c;

/**
 * A tensor record's header: n_dims, the name's length and the type (int32 each), ne (int32 each, innermost first),
 * the name; the data follows. A scalar has n_dims 0 and no ne.
 * @param {string} name
 * @param {number[]} ne
 * @param {number} type
 */
function tensorHeader(name, ne, type) {
  const nameBytes = Buffer.from(name, 'utf8');
  const head = Buffer.alloc(12 + 4 * ne.length);
  head.writeInt32LE(ne.length, 0);
  head.writeInt32LE(nameBytes.length, 4);
  head.writeInt32LE(type, 8);
  ne.forEach((dim, i) => head.writeInt32LE(dim, 12 + 4 * i));
  return Buffer.concat([head, nameBytes]);
}

/**
 * Writes a file in the older format: `preamble` (the magic and everything before the tensors), then one record per
 * tensor, its data from `data(t)` (little-endian hosts only), one tensor at a time so that no file is held whole.
 * @template {{ name: string, ne: number[], type: number }} T
 * @param {string} file
 * @param {Uint8Array} preamble
 * @param {Iterable<T>} tensors
 * @param {(t: T) => Uint16Array | Float32Array} data
 */
export async function writeGgmlFile(file, preamble, tensors, data) {
  const handle = await fs.promises.open(file, 'w');
  try {
    await handle.write(preamble);
    for (const t of tensors) {
      const values = data(t);
      if (values.byteLength !== nElements(t.ne) * elementSize(t.type)) throw new Error(`${t.name}: ${values.byteLength} bytes for [${t.ne}]`);
      await handle.write(tensorHeader(t.name, t.ne, t.type));
      await handle.write(new Uint8Array(values.buffer, values.byteOffset, values.byteLength));
    }
  } finally {
    await handle.close();
  }
}
