// A GGUF v3 writer: metadata of the scalar, string and array types llama.cpp's converters write, and f32 or f16
// tensors, in the converters' layout (header, metadata, tensor infos, then the aligned tensor data).
import { Buffer } from 'node:buffer';
import fs from 'node:fs';
import { elementSize, nElements } from './ggml.mjs';

const GGUF_MAGIC = 'GGUF';
const GGUF_VERSION = 3;
export const ALIGNMENT = 32; // GGUF_DEFAULT_ALIGNMENT; also written as general.alignment
const GGUF = { u8: 0, i8: 1, u16: 2, i16: 3, u32: 4, i32: 5, f32: 6, bool: 7, str: 8, arr: 9, u64: 10, i64: 11, f64: 12 };

/** @typedef {[type: number, ...value: any[]]} MetadataValue [gguf type, value], or [GGUF.arr, element type, values] */

/** Metadata values: [gguf type, value] (arrays: [GGUF.arr, element type, values]). */
export const kv = {
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

/** @typedef {{ name: string, ne: number[], type: number }} GgufTensor a tensor's info: name, ne (ggml order: innermost first), ggml type */

/** Growable little-endian byte buffer for the header (and torch/writer.mjs's pickles). */
export class ByteWriter {
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
 * @template {GgufTensor} T
 * @param {Record<string, MetadataValue>} metadata
 * @param {T[]} tensors
 * @param {(tensor: T) => Float32Array | Uint16Array} data
 */
export function writeGguf(file, metadata, tensors, data) {
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
