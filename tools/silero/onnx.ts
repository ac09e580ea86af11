/**
 * Minimal ONNX reader: just enough of the protobuf wire format and of the ONNX schema (onnx/onnx.proto3)
 * to find the float weights of a model, wherever the exporter put them: graph initializers, `Constant`
 * nodes, and the subgraphs of control-flow nodes (`If` branches, `Loop`/`Scan` bodies).
 */

// protobuf wire types
const WIRE_VARINT = 0;
const WIRE_I64 = 1;
const WIRE_LEN = 2;
const WIRE_I32 = 5;

// TensorProto.DataType values that hold (or losslessly widen to) float32
const DT_FLOAT = 1;
const DT_FLOAT16 = 10;
const DT_DOUBLE = 11;
const DT_BFLOAT16 = 16;

// AttributeProto.AttributeType values this reader keeps
const AT_FLOAT = 1;
const AT_TENSOR = 4;
const AT_GRAPH = 5;
const AT_FLOATS = 6;
const AT_TENSORS = 9;
const AT_GRAPHS = 10;

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** Cursor over one protobuf message; nested messages get their own reader over a subarray. */
class ProtoReader {
  private pos: number;

  constructor(
    private readonly buf: Uint8Array,
    start = 0,
    private readonly end = buf.length,
  ) {
    this.pos = start;
  }

  /** Next field key, or null at the end of the message. */
  key(): { field: number; wire: number } | null {
    if (this.pos >= this.end) return null;
    const k = this.varint();
    const field = Math.floor(k / 8);
    if (field <= 0) throw new Error(`invalid protobuf field number at byte ${this.pos}`);
    return { field, wire: k & 7 };
  }

  /**
   * Varint as a signed 64-bit integer (ONNX's int32/int64 fields are never zigzag-encoded, so negatives are
   * 10-byte two's complement). Assembled from two 32-bit halves to stay exact; values beyond 2^53 do not occur.
   */
  varint(): number {
    let lo = 0;
    let hi = 0;
    for (let shift = 0; shift < 70; shift += 7) {
      const b = this.byte();
      if (shift < 28) lo |= (b & 0x7f) << shift;
      else if (shift === 28) {
        lo |= (b & 0x0f) << 28;
        hi = (b & 0x7f) >> 4;
      } else hi |= (b & 0x7f) << (shift - 32);
      if (b < 0x80) return (hi | 0) * 2 ** 32 + (lo >>> 0);
    }
    throw new Error(`malformed protobuf varint at byte ${this.pos}`);
  }

  bytes(): Uint8Array {
    const n = this.varint();
    if (n < 0 || n > this.end - this.pos) throw new Error(`truncated protobuf message: length ${n} at byte ${this.pos} overruns it`);
    const out = this.buf.subarray(this.pos, this.pos + n);
    this.pos += n;
    return out;
  }

  string(): string {
    return utf8.decode(this.bytes());
  }

  message(): ProtoReader {
    const b = this.bytes();
    return new ProtoReader(this.buf, b.byteOffset - this.buf.byteOffset, b.byteOffset - this.buf.byteOffset + b.length);
  }

  float32(): number {
    this.need(4);
    const v = new DataView(this.buf.buffer, this.buf.byteOffset + this.pos, 4).getFloat32(0, true);
    this.pos += 4;
    return v;
  }

  float64(): number {
    this.need(8);
    const v = new DataView(this.buf.buffer, this.buf.byteOffset + this.pos, 8).getFloat64(0, true);
    this.pos += 8;
    return v;
  }

  skip(wire: number): void {
    switch (wire) {
      case WIRE_VARINT:
        this.varint();
        return;
      case WIRE_I64:
        this.need(8);
        this.pos += 8;
        return;
      case WIRE_LEN:
        this.bytes();
        return;
      case WIRE_I32:
        this.need(4);
        this.pos += 4;
        return;
      default:
        throw new Error(`unsupported protobuf wire type ${wire} at byte ${this.pos}`);
    }
  }

  /** Repeated scalar field: accepts both packed (one LEN record) and unpacked (one record per value) forms. */
  repeated(wire: number, scalarWire: number, read: (r: ProtoReader) => number, out: number[]): void {
    if (wire === scalarWire) {
      out.push(read(this));
      return;
    }
    if (wire !== WIRE_LEN) throw new Error(`unexpected protobuf wire type ${wire} for a repeated field`);
    const r = this.message();
    while (!r.done()) out.push(read(r));
  }

  done(): boolean {
    return this.pos >= this.end;
  }

  private byte(): number {
    this.need(1);
    return this.buf[this.pos++] as number;
  }

  private need(n: number): void {
    if (this.end - this.pos < n) throw new Error(`truncated protobuf message at byte ${this.pos}`);
  }
}

export interface OnnxTensor {
  name: string;
  dims: number[];
  dataType: number;
  raw: Uint8Array | null;
  floatData: number[];
  doubleData: number[];
  /** int32_data also carries FLOAT16/BFLOAT16 bit patterns when raw_data is not used */
  int32Data: number[];
  external: boolean;
}

export interface OnnxAttribute {
  name: string;
  type: number;
  f: number;
  floats: number[];
  t: OnnxTensor | null;
  tensors: OnnxTensor[];
  g: OnnxGraph | null;
  graphs: OnnxGraph[];
}

export interface OnnxNode {
  name: string;
  opType: string;
  outputs: string[];
  attributes: OnnxAttribute[];
}

export interface OnnxGraph {
  nodes: OnnxNode[];
  initializers: OnnxTensor[];
}

export interface OnnxModel {
  irVersion: number;
  graph: OnnxGraph;
}

function readTensor(r: ProtoReader): OnnxTensor {
  const t: OnnxTensor = {
    name: '',
    dims: [],
    dataType: 0,
    raw: null,
    floatData: [],
    doubleData: [],
    int32Data: [],
    external: false,
  };
  for (let k = r.key(); k; k = r.key()) {
    switch (k.field) {
      case 1: // dims
        r.repeated(k.wire, WIRE_VARINT, (x) => x.varint(), t.dims);
        break;
      case 2: // data_type
        t.dataType = r.varint();
        break;
      case 4: // float_data
        r.repeated(k.wire, WIRE_I32, (x) => x.float32(), t.floatData);
        break;
      case 5: // int32_data
        r.repeated(k.wire, WIRE_VARINT, (x) => x.varint(), t.int32Data);
        break;
      case 8: // name
        t.name = r.string();
        break;
      case 9: // raw_data
        t.raw = r.bytes();
        break;
      case 10: // double_data
        r.repeated(k.wire, WIRE_I64, (x) => x.float64(), t.doubleData);
        break;
      case 14: // data_location
        t.external = r.varint() === 1; // EXTERNAL
        break;
      default:
        r.skip(k.wire);
    }
  }
  return t;
}

function readAttribute(r: ProtoReader): OnnxAttribute {
  const a: OnnxAttribute = { name: '', type: 0, f: 0, floats: [], t: null, tensors: [], g: null, graphs: [] };
  for (let k = r.key(); k; k = r.key()) {
    switch (k.field) {
      case 1: // name
        a.name = r.string();
        break;
      case 20: // type
        a.type = r.varint();
        break;
      case 2: // f
        a.f = r.float32();
        break;
      case 5: // t
        a.t = readTensor(r.message());
        break;
      case 6: // g
        a.g = readGraph(r.message());
        break;
      case 7: // floats
        r.repeated(k.wire, WIRE_I32, (x) => x.float32(), a.floats);
        break;
      case 10: // tensors
        a.tensors.push(readTensor(r.message()));
        break;
      case 11: // graphs
        a.graphs.push(readGraph(r.message()));
        break;
      default:
        r.skip(k.wire);
    }
  }
  return a;
}

function readNode(r: ProtoReader): OnnxNode {
  const n: OnnxNode = { name: '', opType: '', outputs: [], attributes: [] };
  for (let k = r.key(); k; k = r.key()) {
    switch (k.field) {
      case 2: // output
        n.outputs.push(r.string());
        break;
      case 3: // name
        n.name = r.string();
        break;
      case 4: // op_type
        n.opType = r.string();
        break;
      case 5: // attribute
        n.attributes.push(readAttribute(r.message()));
        break;
      default:
        r.skip(k.wire);
    }
  }
  return n;
}

function readGraph(r: ProtoReader): OnnxGraph {
  const g: OnnxGraph = { nodes: [], initializers: [] };
  for (let k = r.key(); k; k = r.key()) {
    switch (k.field) {
      case 1: // node
        g.nodes.push(readNode(r.message()));
        break;
      case 5: // initializer
        g.initializers.push(readTensor(r.message()));
        break;
      default:
        r.skip(k.wire);
    }
  }
  return g;
}

/** Parses a serialized ModelProto. Throws if the bytes are not protobuf or there is no graph. */
export function parseOnnxModel(bytes: Uint8Array): OnnxModel {
  const r = new ProtoReader(bytes);
  let irVersion = 0;
  let graph: OnnxGraph | null = null;
  for (let k = r.key(); k; k = r.key()) {
    switch (k.field) {
      case 1: // ir_version
        irVersion = r.varint();
        break;
      case 7: // graph
        graph = readGraph(r.message());
        break;
      default:
        r.skip(k.wire);
    }
  }
  if (!graph || irVersion <= 0) throw new Error('ModelProto has no ir_version or graph');
  return { irVersion, graph };
}

/** IEEE 754 binary16 bits to a number. */
export function halfToFloat(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >> 10) & 0x1f;
  const frac = h & 0x3ff;
  if (exp === 0) return sign * frac * 2 ** -24;
  if (exp === 31) return frac ? NaN : sign * Infinity;
  return sign * (1 + frac / 1024) * 2 ** (exp - 15);
}

const bf16Scratch = new DataView(new ArrayBuffer(4));
function bfloat16ToFloat(h: number): number {
  bf16Scratch.setUint32(0, (h & 0xffff) << 16);
  return bf16Scratch.getFloat32(0);
}

/** Float32 values of a floating-point tensor, or null for other element types. */
export function tensorToFloat32(t: OnnxTensor): Float32Array | null {
  if (t.dataType !== DT_FLOAT && t.dataType !== DT_FLOAT16 && t.dataType !== DT_DOUBLE && t.dataType !== DT_BFLOAT16) {
    return null;
  }
  if (t.external) throw new Error(`tensor '${t.name}' keeps its data in an external file, which is not supported`);
  const n = t.dims.reduce((acc, d) => acc * d, 1);
  const out = new Float32Array(n);
  if (t.raw) {
    // raw_data is little-endian and may sit at any offset, so read through a DataView rather than a typed view
    const v = new DataView(t.raw.buffer, t.raw.byteOffset, t.raw.byteLength);
    const size = t.dataType === DT_DOUBLE ? 8 : t.dataType === DT_FLOAT ? 4 : 2;
    if (t.raw.byteLength !== n * size) {
      throw new Error(`tensor '${t.name}': raw_data has ${t.raw.byteLength} bytes, expected ${n * size}`);
    }
    const get =
      t.dataType === DT_FLOAT
        ? (i: number) => v.getFloat32(i * 4, true)
        : t.dataType === DT_DOUBLE
          ? (i: number) => v.getFloat64(i * 8, true)
          : t.dataType === DT_FLOAT16
            ? (i: number) => halfToFloat(v.getUint16(i * 2, true))
            : (i: number) => bfloat16ToFloat(v.getUint16(i * 2, true));
    for (let i = 0; i < n; i++) out[i] = get(i);
    return out;
  }
  // typed fields: float_data, double_data, or 16-bit patterns widened into int32_data
  const src = t.dataType === DT_FLOAT ? t.floatData : t.dataType === DT_DOUBLE ? t.doubleData : t.int32Data;
  if (src.length !== n) throw new Error(`tensor '${t.name}' has ${src.length} values, expected ${n}`);
  const widen = t.dataType === DT_FLOAT16 ? halfToFloat : t.dataType === DT_BFLOAT16 ? bfloat16ToFloat : null;
  for (let i = 0; i < n; i++) out[i] = widen ? widen(src[i] as number) : (src[i] as number);
  return out;
}

export interface FloatTensor {
  /** initializer name, or the output name of the `Constant` node that produces it */
  name: string;
  /**
   * Where the tensor lives: '' for the main graph, else the chain of subgraph owners, e.g.
   * `If_0.then_branch/If_3.else_branch`, so the same name in two `If` branches stays distinguishable.
   */
  scope: string;
  dims: number[];
  data: Float32Array;
}

function collectFloatTensors(graph: OnnxGraph, scope: string, out: FloatTensor[]): void {
  const push = (name: string, t: OnnxTensor): void => {
    const data = tensorToFloat32(t);
    if (data) out.push({ name, scope, dims: t.dims, data });
  };
  for (const t of graph.initializers) push(t.name, t);
  for (const [i, node] of graph.nodes.entries()) {
    const owner = node.name || `${node.opType}#${i}`;
    const output = node.outputs[0] ?? owner;
    for (const a of node.attributes) {
      const sub = scope ? `${scope}/${owner}.${a.name}` : `${owner}.${a.name}`;
      if (node.opType === 'Constant' && a.type === AT_FLOAT) {
        out.push({ name: output, scope, dims: [], data: Float32Array.of(a.f) });
      } else if (node.opType === 'Constant' && a.type === AT_FLOATS) {
        out.push({ name: output, scope, dims: [a.floats.length], data: Float32Array.from(a.floats) });
      } else if (a.type === AT_TENSOR && a.t) {
        // the graph refers to a Constant's tensor by the node output; other tensor attributes (ConstantOfShape's
        // fill value, ...) are not graph values and count only if they carry a name of their own
        const name = node.opType === 'Constant' ? output : a.t.name;
        if (name) push(name, a.t);
      } else if (a.type === AT_TENSORS) {
        for (const t of a.tensors) if (t.name) push(t.name, t);
      } else if (a.type === AT_GRAPH && a.g) {
        collectFloatTensors(a.g, sub, out);
      } else if (a.type === AT_GRAPHS) {
        for (const [j, g] of a.graphs.entries()) collectFloatTensors(g, `${sub}[${j}]`, out);
      }
    }
  }
}

/** Every floating-point tensor stored anywhere in the model, subgraphs included, as float32. */
export function listFloatTensors(model: OnnxModel | Uint8Array): FloatTensor[] {
  const m = model instanceof Uint8Array ? parseOnnxModel(model) : model;
  const out: FloatTensor[] = [];
  collectFloatTensors(m.graph, '', out);
  return out;
}
