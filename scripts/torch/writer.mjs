// A writer of PyTorch checkpoints in torch.save's zip format, byte for byte as deterministic as its input: a zip of
// stored entries laid out as PyTorch's own writer lays them out (each entry's data on a 64-byte boundary, padded by
// an "FB" extra field in its local header; sizes and CRC in a data descriptor after the data; a ZIP64 end record
// before the classic one; no timestamps), holding `<root>/data.pkl` (a pickle of protocol 2, the one torch.save
// writes, memoised as CPython's pickler memoises it), `<root>/byteorder`, one `<root>/data/<key>` per tensor (its
// float32 elements, little-endian) and `<root>/version`. What it pickles: dicts, OrderedDicts (with a state dict's
// _metadata), strings, integers and float32 tensors, each tensor in a storage of its own.
import { Buffer } from 'node:buffer';
import fs from 'node:fs';
import { crc32 } from 'node:zlib';
import { ByteWriter } from '../gguf/writer.mjs';

/** A contiguous float32 tensor whose elements are made on demand, so a large checkpoint is never whole in memory. */
export class TorchTensor {
  /**
   * @param {number[]} shape PyTorch's order, outermost first
   * @param {() => Float32Array} data its elements in C order
   */
  constructor(shape, data) {
    this.shape = shape;
    this.data = data;
  }
}

/** collections.OrderedDict; `metadata` becomes its _metadata attribute, as a module's state_dict() has one. */
export class OrderedDict extends Map {
  /**
   * @param {Iterable<[string, PickleValue]>} entries
   * @param {Map<string, PickleValue>} [metadata]
   */
  constructor(entries, metadata) {
    super(entries);
    this.metadata = metadata;
  }
}

/** @typedef {string | number | TorchTensor | Map<string, any>} PickleValue integers only; a Map is a dict */

// pickle opcodes (CPython's Lib/pickle.py names)
const OP = {
  PROTO: 0x80,
  STOP: 0x2e,
  MARK: 0x28,
  EMPTY_DICT: 0x7d,
  EMPTY_TUPLE: 0x29,
  TUPLE: 0x74,
  TUPLE1: 0x85,
  SETITEM: 0x73,
  SETITEMS: 0x75,
  BINUNICODE: 0x58,
  BININT: 0x4a,
  BININT1: 0x4b,
  BININT2: 0x4d,
  NEWFALSE: 0x89,
  GLOBAL: 0x63,
  REDUCE: 0x52,
  BUILD: 0x62,
  BINPERSID: 0x51,
  BINPUT: 0x71,
  LONG_BINPUT: 0x72,
  BINGET: 0x68,
  LONG_BINGET: 0x6a,
};
const BATCH = 1000; // items per SETITEMS, as CPython batches them

/** Protocol 2 as CPython's pickler writes torch.save's objects; tensors become persistent ids of storages. */
class Pickler {
  constructor() {
    this.w = new ByteWriter();
    /** @type {Map<string, number>} memo index of each string and global written, reused as CPython reuses one object */
    this.memo = new Map();
    this.memoSize = 0;
    /** @type {TorchTensor[]} in order of their storage keys "0", "1", ... */
    this.tensors = [];
    this.w.u8(OP.PROTO);
    this.w.u8(2);
  }
  /** @param {...number} bytes */
  op(...bytes) {
    for (const b of bytes) this.w.u8(b);
  }
  /**
   * A memo opcode and its index: the one-byte form below 256, the four-byte one from there.
   * @param {number} short
   * @param {number} long
   * @param {number} index
   */
  memoOp(short, long, index) {
    if (index < 256) this.op(short, index);
    else {
      this.op(long);
      this.w.u32(index);
    }
  }
  /** Memoises the object just written under the next index, which it returns. */
  put() {
    const index = this.memoSize++;
    this.memoOp(OP.BINPUT, OP.LONG_BINPUT, index);
    return index;
  }
  /**
   * Writes a memoised object again by reference, or returns false when it was never written.
   * @param {string} key
   */
  get(key) {
    const index = this.memo.get(key);
    if (index === undefined) return false;
    this.memoOp(OP.BINGET, OP.LONG_BINGET, index);
    return true;
  }
  /** @param {string} s */
  string(s) {
    if (this.get(`s:${s}`)) return;
    const bytes = Buffer.from(s, 'utf8');
    this.op(OP.BINUNICODE);
    this.w.u32(bytes.length);
    this.w.put(bytes.length, (at) => bytes.copy(this.w.buf, at));
    this.memo.set(`s:${s}`, this.put());
  }
  /**
   * @param {string} module
   * @param {string} name
   */
  global(module, name) {
    if (this.get(`g:${module} ${name}`)) return;
    this.op(OP.GLOBAL);
    for (const ch of Buffer.from(`${module}\n${name}\n`, 'utf8')) this.w.u8(ch);
    this.memo.set(`g:${module} ${name}`, this.put());
  }
  /** @param {number} n */
  int(n) {
    if (!Number.isInteger(n) || n < -0x80000000 || n > 0x7fffffff) throw new Error(`cannot pickle ${n}: only 32-bit integers`);
    if (n >= 0 && n <= 0xff) this.op(OP.BININT1, n);
    else if (n >= 0 && n <= 0xffff) {
      this.op(OP.BININT2, n & 0xff, n >>> 8);
    } else {
      this.op(OP.BININT);
      this.w.put(4, (at) => this.w.buf.writeInt32LE(n, at));
    }
  }
  /**
   * A tuple of what `items` write (CPython: TUPLE1..3 up to three items, MARK ... TUPLE beyond; the empty tuple
   * is not memoised).
   * @param {(() => void)[]} items
   */
  tuple(items) {
    if (items.length === 0) return this.op(OP.EMPTY_TUPLE);
    if (items.length > 3) this.op(OP.MARK);
    for (const item of items) item();
    this.op(items.length > 3 ? OP.TUPLE : OP.TUPLE1 + items.length - 1);
    this.put();
  }
  /** @param {Map<string, PickleValue>} map */
  setItems(map) {
    const entries = [...map];
    for (let at = 0; at < entries.length; at += BATCH) {
      const batch = entries.slice(at, at + BATCH);
      if (batch.length > 1) this.op(OP.MARK);
      for (const [key, value] of batch) {
        this.string(key);
        this.value(value);
      }
      this.op(batch.length > 1 ? OP.SETITEMS : OP.SETITEM);
    }
  }
  /** OrderedDict's reduce: the class called with (), then the items, then BUILD with its __dict__. @param {OrderedDict} dict */
  orderedDict(dict) {
    this.global('collections', 'OrderedDict');
    this.op(OP.EMPTY_TUPLE, OP.REDUCE);
    this.put();
    this.setItems(dict);
    if (dict.metadata) {
      this.value(new Map([['_metadata', new OrderedDict(dict.metadata)]]));
      this.op(OP.BUILD);
    }
  }
  /**
   * torch's reduce of a tensor: _rebuild_tensor_v2(storage, offset 0, size, stride, requires_grad False, hooks
   * OrderedDict()), the storage a persistent id ('storage', FloatStorage, key, 'cpu', element count).
   * @param {TorchTensor} tensor
   */
  tensor(tensor) {
    const key = String(this.tensors.length);
    this.tensors.push(tensor);
    const numel = tensor.shape.reduce((a, b) => a * b, 1);
    const stride = tensor.shape.map((_, d) => tensor.shape.slice(d + 1).reduce((a, b) => a * b, 1));
    this.global('torch._utils', '_rebuild_tensor_v2');
    this.tuple([
      () => {
        this.tuple([
          () => this.string('storage'),
          () => this.global('torch', 'FloatStorage'),
          () => this.string(key),
          () => this.string('cpu'),
          () => this.int(numel),
        ]);
        this.op(OP.BINPERSID);
      },
      () => this.int(0),
      () => this.tuple(tensor.shape.map((n) => () => this.int(n))),
      () => this.tuple(stride.map((n) => () => this.int(n))),
      () => this.op(OP.NEWFALSE),
      () => this.orderedDict(new OrderedDict([])),
    ]);
    this.op(OP.REDUCE);
    this.put();
  }
  /** @param {PickleValue} value */
  value(value) {
    if (typeof value === 'string') this.string(value);
    else if (typeof value === 'number') this.int(value);
    else if (value instanceof TorchTensor) this.tensor(value);
    else if (value instanceof OrderedDict) this.orderedDict(value);
    else {
      this.op(OP.EMPTY_DICT);
      this.put();
      this.setItems(value);
    }
  }
  finish() {
    this.op(OP.STOP);
    return this.w.bytes();
  }
}

const ALIGNMENT = 64; // torch's kFieldAlignment: each entry's data starts on it
const LOCAL_HEADER = 30;
const FLAG_DATA_DESCRIPTOR = 0x0808; // bit 3: sizes and CRC follow the data; bit 11: UTF-8 names

/** Appends zip entries to an open file, as PyTorchStreamWriter (miniz) writes them, then the directory. */
class ZipWriter {
  /** @param {number} fd */
  constructor(fd) {
    this.fd = fd;
    this.offset = 0;
    /** @type {{ name: Buffer, crc: number, size: number, offset: number }[]} */
    this.entries = [];
  }
  /** @param {Uint8Array} bytes */
  write(bytes) {
    fs.writeSync(this.fd, bytes);
    this.offset += bytes.length;
  }
  /**
   * @param {string} name
   * @param {Uint8Array} data
   */
  entry(name, data) {
    if (data.length >= 0xffffffff || this.offset >= 0xffffffff) throw new Error('entries past 4 GB are not written');
    const nameBytes = Buffer.from(name, 'utf8');
    const start = this.offset + LOCAL_HEADER + nameBytes.length + 4; // where the padding would start
    const padding = (ALIGNMENT - (start % ALIGNMENT)) % ALIGNMENT;
    const header = Buffer.alloc(LOCAL_HEADER + nameBytes.length + 4 + padding, 'Z'); // the padding is 'Z's
    header.writeUInt32LE(0x04034b50, 0);
    header.fill(0, 4, LOCAL_HEADER);
    header.writeUInt16LE(FLAG_DATA_DESCRIPTOR, 6);
    header.writeUInt16LE(nameBytes.length, 26);
    header.writeUInt16LE(4 + padding, 28);
    nameBytes.copy(header, LOCAL_HEADER);
    header.write('FB', LOCAL_HEADER + nameBytes.length, 'latin1');
    header.writeUInt16LE(padding, LOCAL_HEADER + nameBytes.length + 2);
    const offset = this.offset;
    this.write(header);
    this.write(data);
    const crc = crc32(data);
    const descriptor = Buffer.alloc(16);
    descriptor.writeUInt32LE(0x08074b50, 0);
    descriptor.writeUInt32LE(crc, 4);
    descriptor.writeUInt32LE(data.length, 8);
    descriptor.writeUInt32LE(data.length, 12);
    this.write(descriptor);
    this.entries.push({ name: nameBytes, crc, size: data.length, offset });
  }
  /** The central directory, the ZIP64 end record and its locator, then the classic end record. */
  finish() {
    const directoryOffset = this.offset;
    for (const e of this.entries) {
      const record = Buffer.alloc(46 + e.name.length);
      record.writeUInt32LE(0x02014b50, 0);
      record.writeUInt16LE(FLAG_DATA_DESCRIPTOR, 8);
      record.writeUInt32LE(e.crc, 16);
      record.writeUInt32LE(e.size, 20);
      record.writeUInt32LE(e.size, 24);
      record.writeUInt16LE(e.name.length, 28);
      record.writeUInt32LE(e.offset, 42);
      e.name.copy(record, 46);
      this.write(record);
    }
    const directorySize = this.offset - directoryOffset;
    const zip64EndOffset = this.offset;
    const end = Buffer.alloc(56 + 20 + 22);
    end.writeUInt32LE(0x06064b50, 0); // ZIP64 end of central directory
    end.writeBigUInt64LE(44n, 4); // its size after this field
    end.writeUInt16LE(0x031e, 12); // made by: Unix, 3.0
    end.writeUInt16LE(45, 14); // needs 4.5 (ZIP64)
    end.writeBigUInt64LE(BigInt(this.entries.length), 24);
    end.writeBigUInt64LE(BigInt(this.entries.length), 32);
    end.writeBigUInt64LE(BigInt(directorySize), 40);
    end.writeBigUInt64LE(BigInt(directoryOffset), 48);
    end.writeUInt32LE(0x07064b50, 56); // its locator
    end.writeBigUInt64LE(BigInt(zip64EndOffset), 64);
    end.writeUInt32LE(1, 72);
    end.writeUInt32LE(0x06054b50, 76); // classic end of central directory
    end.writeUInt16LE(this.entries.length, 84);
    end.writeUInt16LE(this.entries.length, 86);
    end.writeUInt32LE(directorySize, 88);
    end.writeUInt32LE(directoryOffset, 92);
    this.write(end);
  }
}

/**
 * Writes `value` as torch.save(value, file) would, the archive's root directory named `root` (torch names it after
 * the file it saves to). Each tensor's data is asked for once, in the order the pickle names them (their storages'
 * order; torch sorts the keys as strings, which no reader depends on).
 * @param {string} file
 * @param {string} root
 * @param {PickleValue} value
 */
export function writeTorchFile(file, root, value) {
  const pickler = new Pickler();
  pickler.value(value);
  const pickle = pickler.finish();
  const fd = fs.openSync(file, 'w');
  try {
    const zip = new ZipWriter(fd);
    zip.entry(`${root}/data.pkl`, pickle);
    zip.entry(`${root}/byteorder`, Buffer.from('little'));
    pickler.tensors.forEach((tensor, key) => {
      const data = tensor.data();
      const numel = tensor.shape.reduce((a, b) => a * b, 1);
      if (data.length !== numel) throw new Error(`tensor ${key}: ${data.length} elements for shape [${tensor.shape}]`);
      zip.entry(`${root}/data/${key}`, new Uint8Array(data.buffer, data.byteOffset, data.byteLength)); // little-endian hosts only
    });
    zip.entry(`${root}/version`, Buffer.from('3\n'));
    zip.finish();
  } finally {
    fs.closeSync(fd);
  }
}
