import assert from 'node:assert/strict';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { convertSileroOnnxFile, convertSileroOnnxToGgml } from '../../tools/silero/onnx-to-ggml.js';
import { halfToFloat } from '../../tools/silero/onnx.js';
import { SHARED, SILERO_V6 } from '../helpers/paths.js';

const onnxPath = path.join(SHARED, 'models', 'silero', 'silero_vad_v6.2.onnx');
const referencePath = SILERO_V6;

interface GgmlTensor {
  name: string;
  type: number;
  ne: number[];
  values: Float32Array;
}

interface GgmlFile {
  header: number[]; // every int32 between the model type string and the first tensor
  modelType: string;
  tensors: GgmlTensor[];
}

/** Independent reader of the whisper.cpp VAD file, mirroring whisper_vad_init_with_params. */
function readGgml(bytes: Uint8Array): GgmlFile {
  const v = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let pos = 0;
  const i32 = (): number => {
    const x = v.getInt32(pos, true);
    pos += 4;
    return x;
  };
  const str = (n: number): string => {
    const s = Buffer.from(bytes.subarray(pos, pos + n)).toString('utf8');
    pos += n;
    return s;
  };
  assert.equal(v.getUint32(0, true), 0x67676d6c, 'ggml magic');
  pos = 4;
  const modelType = str(i32());
  const header = [i32(), i32(), i32(), i32(), i32()]; // version, window, context
  const nLayers = i32();
  header.push(nLayers);
  for (let i = 0; i < nLayers * 3 + 4; i++) header.push(i32());
  const tensors: GgmlTensor[] = [];
  while (pos < bytes.length) {
    const nDims = i32();
    const nameLength = i32();
    const type = i32();
    const ne = Array.from({ length: nDims }, i32);
    const name = str(nameLength);
    const n = ne.reduce((a, b) => a * b, 1);
    const values = new Float32Array(n);
    for (let i = 0; i < n; i++) {
      values[i] = type === 1 ? halfToFloat(v.getUint16(pos + i * 2, true)) : v.getFloat32(pos + i * 4, true);
    }
    pos += n * (type === 1 ? 2 : 4);
    tensors.push({ name, type, ne, values });
  }
  assert.equal(pos, bytes.length, 'tensor data ends exactly at end of file');
  return { header, modelType, tensors };
}

describe('Silero ONNX -> GGML converter', async () => {
  const onnx = await readFile(onnxPath);
  const reference = await readFile(referencePath);
  const converted = convertSileroOnnxToGgml(onnx);
  const ours = readGgml(converted);
  const ref = readGgml(reference);

  it('writes the reference header and hparams', () => {
    assert.equal(ours.modelType, ref.modelType);
    assert.deepEqual(ours.header, ref.header);
  });

  it('writes the reference tensors: names, order, types and shapes', () => {
    assert.deepEqual(
      ours.tensors.map(({ name, type, ne }) => ({ name, type, ne })),
      ref.tensors.map(({ name, type, ne }) => ({ name, type, ne })),
    );
  });

  it('writes the reference tensor values', () => {
    for (const [i, t] of ours.tensors.entries()) {
      const r = ref.tensors[i]!;
      let maxDiff = 0;
      for (let j = 0; j < t.values.length; j++) maxDiff = Math.max(maxDiff, Math.abs(t.values[j]! - r.values[j]!));
      assert.ok(maxDiff <= 1e-6, `${t.name}: max abs difference ${maxDiff}`);
    }
  });

  it('is byte-identical to the reference file', () => {
    assert.ok(Buffer.from(converted).equals(reference), 'converted file differs from ggml-silero-v6.2.0.bin');
  });

  it('writes the version it is given', () => {
    const header = readGgml(convertSileroOnnxToGgml(onnx, { version: '5.1.2' })).header;
    assert.deepEqual(header.slice(0, 3), [5, 1, 2]);
    assert.throws(() => convertSileroOnnxToGgml(onnx, { version: 'v6' }), /invalid Silero version 'v6'/);
  });

  it('converts a file atomically, leaving no temporary behind', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'voxd-silero-'));
    try {
      const out = path.join(dir, 'ggml-silero.bin');
      await convertSileroOnnxFile(onnxPath, out);
      assert.ok((await readFile(out)).equals(reference));
      assert.deepEqual(await readdir(dir), ['ggml-silero.bin']);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('rejects input that is not an ONNX model', () => {
    assert.throws(() => convertSileroOnnxToGgml(new Uint8Array(0)), /not a Silero VAD ONNX model/);
    assert.throws(() => convertSileroOnnxToGgml(Buffer.from('GGML garbage, not protobuf')), /not a Silero VAD ONNX model/);
    assert.throws(() => convertSileroOnnxToGgml(reference), /not a Silero VAD ONNX model/);
    assert.throws(() => convertSileroOnnxToGgml(onnx.subarray(0, 1000)), /not a Silero VAD ONNX model \(truncated protobuf/);
  });

  it('rejects an ONNX model without the Silero weights', () => {
    // ModelProto { ir_version: 8, graph: {} }
    const empty = Uint8Array.of(0x08, 0x08, 0x3a, 0x00);
    assert.throws(() => convertSileroOnnxToGgml(empty), /none of its weight tensors/);
  });

  it('names the tensors a Silero model is missing', () => {
    // renaming in place keeps every protobuf length valid
    const renamed = Buffer.from(onnx.toString('latin1').replaceAll('rnn.bias_hh', 'rnn.bias_xx'), 'latin1');
    assert.throws(() => convertSileroOnnxToGgml(renamed), /missing tensors: decoder\.rnn\.bias_hh$/);
  });

  it('rejects a model without 16 kHz weights', () => {
    // hide the 16 kHz branch's STFT basis; the 8 kHz branch's [130, 1, 128] one must not be taken instead
    const latin1 = onnx.toString('latin1').replaceAll('then_branch__Inline_0__stft', 'then_branch__Inline_0__xxxx');
    const only8k = Buffer.from(latin1, 'latin1');
    assert.throws(() => convertSileroOnnxToGgml(only8k), /not a 16 kHz Silero VAD model/);
  });
});
