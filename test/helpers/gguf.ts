import assert from 'node:assert/strict';
import fs from 'node:fs';

// A minimal GGUF v3 reader for the tests of the random-weight model writers (scripts/make-*-test-model.mjs): they
// read back what a writer produced with code of their own, so a bug in the writer's GGUF layer cannot hide itself.

export type Value = number | bigint | boolean | string | Value[];
export interface TensorInfo {
  name: string;
  ne: number[];
  type: number;
  offset: number;
}
export interface Gguf {
  version: number;
  metadata: Map<string, Value>;
  tensors: Map<string, TensorInfo>;
  dataStart: number;
  buf: Buffer;
}

export const F32 = 0;
export const F16 = 1;

/** A minimal GGUF v3 reader (little-endian; the scalar types, strings and arrays llama.cpp writes). */
export function readGguf(file: string): Gguf {
  const buf = fs.readFileSync(file);
  let pos = 0;
  const u32 = () => ((pos += 4), buf.readUInt32LE(pos - 4));
  const u64 = () => ((pos += 8), Number(buf.readBigUInt64LE(pos - 8)));
  const str = () => {
    const n = u64();
    pos += n;
    return buf.toString('utf8', pos - n, pos);
  };
  const value = (type: number): Value => {
    switch (type) {
      case 0:
        return ((pos += 1), buf.readUInt8(pos - 1));
      case 1:
        return ((pos += 1), buf.readInt8(pos - 1));
      case 4:
        return u32();
      case 5:
        return ((pos += 4), buf.readInt32LE(pos - 4));
      case 6:
        return ((pos += 4), buf.readFloatLE(pos - 4));
      case 7:
        return ((pos += 1), buf.readUInt8(pos - 1) !== 0);
      case 8:
        return str();
      case 9: {
        const elementType = u32();
        const n = u64();
        return Array.from({ length: n }, () => value(elementType));
      }
      case 10:
        return ((pos += 8), buf.readBigUInt64LE(pos - 8));
      default:
        throw new Error(`${file}: unexpected value type ${type} at ${pos}`);
    }
  };
  assert.equal(buf.toString('latin1', 0, 4), 'GGUF', 'magic');
  pos = 4;
  const version = u32();
  const nTensors = u64();
  const nKv = u64();
  const metadata = new Map<string, Value>();
  for (let i = 0; i < nKv; i++) {
    const key = str();
    metadata.set(key, value(u32()));
  }
  const tensors = new Map<string, TensorInfo>();
  for (let i = 0; i < nTensors; i++) {
    const name = str();
    const nDims = u32();
    const ne = Array.from({ length: nDims }, () => u64());
    const type = u32();
    const offset = u64();
    assert.ok(!tensors.has(name), `duplicate tensor ${name}`);
    tensors.set(name, { name, ne, type, offset });
  }
  const alignment = Number(metadata.get('general.alignment') ?? 32);
  const dataStart = Math.ceil(pos / alignment) * alignment;
  return { version, metadata, tensors, dataStart, buf };
}

function nbytes(t: TensorInfo): number {
  return t.ne.reduce((a, b) => a * b, 1) * (t.type === F16 ? 2 : 4);
}

function halfToFloat(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >>> 10) & 0x1f;
  const mant = h & 0x3ff;
  if (exp === 0) return sign * mant * 2 ** -24;
  if (exp === 31) return mant ? NaN : sign * Infinity;
  return sign * (1 + mant / 1024) * 2 ** (exp - 15);
}

/** A tensor's values, all of them or `count` from element `first` on (ggml order: innermost dimension first). */
export function tensorValues(g: Gguf, name: string, first = 0, count?: number): number[] {
  const t = g.tensors.get(name);
  assert.ok(t, `tensor ${name}`);
  const start = g.dataStart + t.offset;
  const n = count ?? t.ne.reduce((a, b) => a * b, 1) - first;
  return Array.from({ length: n }, (_, k) => {
    const i = first + k;
    return t.type === F16 ? halfToFloat(g.buf.readUInt16LE(start + 2 * i)) : g.buf.readFloatLE(start + 4 * i);
  });
}

/** The layout every GGUF must have: tensors back to back in info order, each aligned, data to the end of the file. */
export function assertLayout(g: Gguf): void {
  assert.equal(g.version, 3);
  let expected = 0;
  for (const t of g.tensors.values()) {
    assert.ok(t.type === F32 || t.type === F16, `${t.name}: type ${t.type}`);
    assert.equal(t.offset, expected, `${t.name} offset`);
    expected += Math.ceil(nbytes(t) / 32) * 32;
  }
  assert.equal(g.buf.length, g.dataStart + expected, 'file ends with the last tensor');
}

export function type(g: Gguf, name: string): number {
  const t = g.tensors.get(name);
  assert.ok(t, `missing tensor ${name}`);
  return t.type;
}

export function shape(g: Gguf, name: string): number[] {
  const t = g.tensors.get(name);
  assert.ok(t, `missing tensor ${name}`);
  return t.ne;
}
