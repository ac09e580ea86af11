import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { pathToFileURL } from 'node:url';
import { ROOT } from '../helpers/paths.js';

// scripts/make-parakeet-test-model.mjs writes random-weight Parakeet TDT models for the engine's tests. These tests
// read what it wrote with a reader of their own and hold it to what whisper.cpp's libparakeet reads
// (parakeet_model_load: the header in order, then a tensor for every name it creates, of its shape and type, and
// nothing else), as its converter (models/convert-parakeet-to-ggml.py) writes an f16 file.

interface ParakeetOptions {
  size?: 'tiny' | 'realistic';
  en?: boolean;
  seed?: number;
}
interface Generator {
  writeParakeetTestModel(out: string, options?: ParakeetOptions): Promise<string>;
  makeParakeetTestModel(options?: ParakeetOptions): Promise<string>;
  parakeetTestModelPath(options?: ParakeetOptions): string;
  parakeetTestModelHparams(options?: ParakeetOptions): Hparams;
}

async function generator(): Promise<Generator> {
  return (await import(pathToFileURL(path.join(ROOT, 'scripts', 'make-parakeet-test-model.mjs')).href)) as Generator;
}

const F32 = 0;
const F16 = 1;
const GGML_MAGIC = 0x67676d6c;
// parakeet_model_load's reads, in order
const HPARAMS = [
  'n_vocab',
  'n_audio_ctx',
  'n_audio_state',
  'n_audio_head',
  'n_audio_layer',
  'n_mels',
  'ftype',
  'n_fft',
  'subsampling_factor',
  'n_subsampling_channels',
  'n_conv_kernel',
  'n_pred_dim',
  'n_pred_layers',
  'n_tdt_durations',
  'n_max_tokens',
] as const;
type Hparams = Record<(typeof HPARAMS)[number], number>;

interface TensorRecord {
  ne: number[];
  type: number;
  offset: number;
}
interface ParakeetFile {
  hparams: Hparams;
  filters: { nMel: number; nFb: number; data: Float32Array };
  window: Float32Array;
  durations: number[];
  vocab: string[];
  tensors: Map<string, TensorRecord>;
  buf: Buffer;
}

/** Reads a whole file: header, filters, window, durations, vocabulary, then tensor records to the last byte. */
function readParakeet(file: string): ParakeetFile {
  const buf = fs.readFileSync(file);
  let pos = 0;
  const i32 = () => ((pos += 4), buf.readInt32LE(pos - 4));
  const f32s = (n: number) => {
    const out = Float32Array.from({ length: n }, (_, i) => buf.readFloatLE(pos + 4 * i));
    pos += 4 * n;
    return out;
  };
  assert.equal(buf.readUInt32LE(0), GGML_MAGIC, 'magic');
  pos = 4;
  const hparams = Object.fromEntries(HPARAMS.map((key) => [key, i32()])) as Hparams;
  const nMel = i32();
  const nFb = i32();
  const filters = { nMel, nFb, data: f32s(nMel * nFb) };
  const window = f32s(i32());
  const durations = Array.from({ length: hparams.n_tdt_durations }, () => ((pos += 4), buf.readUInt32LE(pos - 4)));
  const vocab = Array.from({ length: i32() }, () => {
    const length = i32();
    pos += length;
    return buf.toString('utf8', pos - length, pos);
  });
  const tensors = new Map<string, TensorRecord>();
  while (pos < buf.length) {
    const nDims = i32();
    const nameLength = i32();
    const type = i32();
    const ne = Array.from({ length: nDims }, i32);
    const name = buf.toString('utf8', pos, pos + nameLength);
    pos += nameLength;
    assert.ok(type === F32 || type === F16, `${name}: type ${type}`);
    assert.ok(!tensors.has(name), `duplicate tensor ${name}`);
    tensors.set(name, { ne, type, offset: pos });
    pos += ne.reduce((a, b) => a * b, 1) * (type === F16 ? 2 : 4);
  }
  assert.equal(pos, buf.length, 'the last tensor ends the file');
  return { hparams, filters, window, durations, vocab, tensors, buf };
}

/**
 * What parakeet_model_load creates for these hparams: name -> [ne (innermost first), type of an f16 file].
 * Matrices are f16; vectors, the subsampling convolutions, depthwise kernels and pos_bias_u/v f32.
 */
function loaderTensors(h: Hparams): Map<string, [number[], number]> {
  const d = h.n_audio_state;
  const c = h.n_subsampling_channels;
  const p = h.n_pred_dim;
  const spec = new Map<string, [number[], number]>();
  for (const i of [0, 2, 5]) spec.set(`encoder.pre_encode.conv.${i}.weight`, [[3, 3, 1, c], F32]);
  for (const i of [3, 6]) spec.set(`encoder.pre_encode.conv.${i}.weight`, [[1, 1, c, c], F32]);
  for (const i of [0, 2, 3, 5, 6]) spec.set(`encoder.pre_encode.conv.${i}.bias`, [[1, 1, c, 1], F32]);
  spec.set('encoder.pre_encode.out.weight', [[(h.n_mels / h.subsampling_factor) * c, d], F16]);
  spec.set('encoder.pre_encode.out.bias', [[d], F32]);
  const layer: [string, number[], number][] = [
    ['feed_forward1.linear1.weight', [d, 4 * d], F16],
    ['feed_forward1.linear2.weight', [4 * d, d], F16],
    ['feed_forward2.linear1.weight', [d, 4 * d], F16],
    ['feed_forward2.linear2.weight', [4 * d, d], F16],
    ['conv.pointwise_conv1.weight', [d, 2 * d], F16],
    ['conv.depthwise_conv.weight', [h.n_conv_kernel, d], F32],
    ['conv.pointwise_conv2.weight', [d, d], F16],
    ['conv.batch_norm.num_batches_tracked', [], F32], // 0-d in the checkpoint; the loader reads 4 bytes into an i32 [1]
    ['self_attn.pos_bias_u', [d / h.n_audio_head, h.n_audio_head], F32],
    ['self_attn.pos_bias_v', [d / h.n_audio_head, h.n_audio_head], F32],
    ...['linear_q', 'linear_k', 'linear_v', 'linear_out', 'linear_pos'].map((n): [string, number[], number] => [`self_attn.${n}.weight`, [d, d], F16]),
    ...['norm_feed_forward1', 'norm_conv', 'norm_self_att', 'norm_feed_forward2', 'norm_out'].flatMap((n): [string, number[], number][] => [
      [`${n}.weight`, [d], F32],
      [`${n}.bias`, [d], F32],
    ]),
    ...['weight', 'bias', 'running_mean', 'running_var'].map((n): [string, number[], number] => [`conv.batch_norm.${n}`, [d], F32]),
  ];
  for (let l = 0; l < h.n_audio_layer; l++) for (const [name, ne, type] of layer) spec.set(`encoder.layers.${l}.${name}`, [ne, type]);
  spec.set('decoder.prediction.embed.weight', [[p, h.n_vocab + 1], F16]);
  for (let l = 0; l < h.n_pred_layers; l++) {
    spec.set(`decoder.prediction.dec_rnn.lstm.weight_ih_l${l}`, [[p, 4 * p], F16]);
    spec.set(`decoder.prediction.dec_rnn.lstm.weight_hh_l${l}`, [[p, 4 * p], F16]);
    spec.set(`decoder.prediction.dec_rnn.lstm.bias_h_l${l}`, [[4 * p], F32]);
  }
  const nJoint = h.n_vocab + 1 + h.n_tdt_durations;
  spec.set('joint.pred.weight', [[p, p], F16]);
  spec.set('joint.pred.bias', [[p], F32]);
  spec.set('joint.enc.weight', [[d, p], F16]);
  spec.set('joint.enc.bias', [[p], F32]);
  spec.set('joint.joint_net.2.weight', [[p, nJoint], F16]);
  spec.set('joint.joint_net.2.bias', [[nJoint], F32]);
  return spec;
}

function f32Values(f: ParakeetFile, name: string): Float32Array {
  const t = f.tensors.get(name);
  assert.ok(t && t.type === F32, `f32 tensor ${name}`);
  const n = t.ne.reduce((a, b) => a * b, 1);
  return Float32Array.from({ length: n }, (_, i) => f.buf.readFloatLE(t.offset + 4 * i));
}

const isAscii = (piece: string) => /^[\u2581\x20-\x7e]*$/.test(piece);

describe('random-weight Parakeet TDT test models (scripts/make-parakeet-test-model.mjs)', () => {
  let tmp: string;
  let model: ParakeetFile;
  let english: ParakeetFile;

  before(async () => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'voxd-parakeet-model-'));
    const gen = await generator();
    model = readParakeet(await gen.writeParakeetTestModel(path.join(tmp, 'v3.bin'), { size: 'tiny', seed: 1 }));
    english = readParakeet(await gen.writeParakeetTestModel(path.join(tmp, 'v2.bin'), { size: 'tiny', en: true, seed: 1 }));
  });
  after(() => fs.rmSync(tmp, { recursive: true, force: true }));

  it('writes the hparams in the loader order, with the real front end and decoder settings', async () => {
    const gen = await generator();
    assert.deepEqual(model.hparams, gen.parakeetTestModelHparams({ size: 'tiny' }));
    assert.deepEqual(english.hparams, gen.parakeetTestModelHparams({ size: 'tiny', en: true }));
    const h = model.hparams;
    assert.deepEqual([h.n_vocab, english.hparams.n_vocab], [8192, 1024]);
    assert.deepEqual([h.n_audio_ctx, h.n_mels, h.ftype, h.n_fft, h.subsampling_factor, h.n_conv_kernel], [5000, 128, 1, 512, 8, 9]);
    assert.deepEqual([h.n_tdt_durations, h.n_max_tokens], [5, 10]);
    assert.equal(h.n_audio_state % h.n_audio_head, 0);
    assert.ok(h.n_audio_layer >= 2 && h.n_pred_layers >= 2 && h.n_audio_head >= 2, 'more than one of each, so indexing is exercised');
  });

  it('carries the mel filter bank, the STFT window and the TDT durations', () => {
    const { filters, window, durations } = model;
    assert.deepEqual([filters.nMel, filters.nFb], [128, 257]);
    for (let m = 0; m < filters.nMel; m++) {
      const row = filters.data.subarray(m * filters.nFb, (m + 1) * filters.nFb);
      assert.ok(row.every((v) => v >= 0) && row.some((v) => v > 0), `filter ${m}`);
    }
    // librosa's Slaney filters: the first one peaks at the second FFT bin, the last ends at Nyquist
    assert.equal(filters.data.subarray(0, filters.nFb).indexOf(Math.max(...filters.data.subarray(0, filters.nFb))), 1);
    assert.ok(filters.data[filters.nMel * filters.nFb - 2]! > 0);
    assert.equal(window.length, 400);
    assert.equal(window[0], 0);
    assert.equal(window[399], 0);
    assert.ok(
      window.every((v, i) => v >= 0 && v <= 1 && Math.abs(v - window[399 - i]!) < 1e-6),
      'a symmetric Hann window',
    );
    assert.deepEqual(durations, [0, 1, 2, 3, 4]);
  });

  it('carries a SentencePiece vocabulary: n_vocab distinct pieces, multilingual for v3, ASCII for v2', () => {
    for (const f of [model, english]) {
      assert.equal(f.vocab.length, f.hparams.n_vocab);
      assert.equal(new Set(f.vocab).size, f.vocab.length, 'distinct pieces');
      assert.deepEqual(f.vocab.slice(0, 3), ['<unk>', '<s>', '</s>']);
      assert.ok(f.vocab.filter((piece) => piece.startsWith('\u2581')).length > f.vocab.length / 4, 'word starts');
      for (const mark of ['.', ',', '?', '!']) assert.ok(f.vocab.includes(mark), `punctuation ${mark}`);
      assert.ok(!f.vocab.includes('[BLANK]'), 'the blank is id n_vocab, not a piece');
    }
    assert.ok(english.vocab.every(isAscii));
    const foreign = model.vocab.filter((piece) => !isAscii(piece));
    assert.ok(foreign.length > 300, `${foreign.length} multilingual pieces`);
    for (const piece of ['ä', '\u2581é', 'ж', '\u2581λ', '\u2581что']) assert.ok(model.vocab.includes(piece), piece);
  });

  it('has every tensor parakeet_model_load creates, of its shape and type, and no other', () => {
    for (const f of [model, english]) {
      const spec = loaderTensors(f.hparams);
      assert.equal(spec.size, 12 + 29 * f.hparams.n_audio_layer + 1 + 3 * f.hparams.n_pred_layers + 6, "the loader's count");
      assert.deepEqual([...f.tensors.keys()].sort(), [...spec.keys()].sort());
      for (const [name, [ne, type]] of spec) {
        const t = f.tensors.get(name)!;
        assert.deepEqual(t.ne, ne, `${name} shape`);
        assert.equal(t.type, type, `${name} type`);
      }
    }
  });

  it('writes the tensors in the order of NeMo state dict, as the converter does', () => {
    const names = [...model.tensors.keys()];
    const first = (prefix: string) => names.findIndex((n) => n.startsWith(prefix));
    const order = ['encoder.pre_encode.conv.0', 'encoder.pre_encode.out', 'encoder.layers.0.', 'encoder.layers.1.', 'decoder.', 'joint.'].map(first);
    assert.deepEqual(
      order,
      [...order].sort((a, b) => a - b),
    );
    const layer = names.filter((n) => n.startsWith('encoder.layers.0.')).map((n) => n.split('.')[3]);
    assert.deepEqual(
      [...new Set(layer)],
      ['norm_feed_forward1', 'feed_forward1', 'norm_conv', 'conv', 'norm_self_att', 'self_attn', 'norm_feed_forward2', 'feed_forward2', 'norm_out'],
    );
  });

  it('fills the weights with finite values, positive running variances and a joint biased towards the blank', () => {
    for (const t of model.tensors.values()) {
      const n = t.ne.reduce((a, b) => a * b, 1);
      for (let i = 0; i < n; i++) {
        const finite =
          t.type === F16 ? (model.buf.readUInt16LE(t.offset + 2 * i) & 0x7c00) !== 0x7c00 : Number.isFinite(model.buf.readFloatLE(t.offset + 4 * i));
        if (!finite) assert.fail(`non-finite value in a tensor at byte ${t.offset + i}`);
      }
    }
    assert.ok(f32Values(model, 'encoder.layers.1.conv.batch_norm.running_var').every((v) => v > 0));
    assert.deepEqual([...f32Values(model, 'encoder.layers.0.conv.batch_norm.num_batches_tracked')], [0]);
    const gains = f32Values(model, 'encoder.layers.0.norm_out.weight');
    assert.ok(gains.every((v) => v > 0.5 && v < 1.5) && gains.some((v) => v !== 1), 'gains about 1, not all 1');
    assert.ok(
      f32Values(model, 'joint.enc.bias').some((v) => v !== 0),
      'biases are not all 0',
    );
    const h = model.hparams;
    const bias = f32Values(model, 'joint.joint_net.2.bias');
    const tokens = bias.subarray(3, h.n_vocab);
    assert.ok(
      bias.subarray(0, 3).every((v) => v < -5),
      'the control pieces never win',
    );
    assert.ok(bias[h.n_vocab]! > Math.max(...tokens) + 1, 'the blank above every token');
    const durations = bias.subarray(h.n_vocab + 1);
    assert.ok(durations[0]! < Math.min(...durations.subarray(1)), 'advancing is favoured over staying');
  });

  it('is deterministic for a seed and differs between seeds', async () => {
    const gen = await generator();
    const again = await gen.writeParakeetTestModel(path.join(tmp, 'again.bin'), { size: 'tiny', seed: 1 });
    const other = await gen.writeParakeetTestModel(path.join(tmp, 'other.bin'), { size: 'tiny', seed: 2 });
    assert.ok(fs.readFileSync(again).equals(model.buf));
    const otherFile = fs.readFileSync(other);
    assert.equal(otherFile.length, model.buf.length);
    assert.ok(!otherFile.equals(model.buf));
  });

  it('gives the realistic size the released 0.6B shapes', async () => {
    const gen = await generator();
    const h = gen.parakeetTestModelHparams({ size: 'realistic' });
    assert.deepEqual(
      [h.n_vocab, h.n_audio_state, h.n_audio_head, h.n_audio_layer, h.n_subsampling_channels, h.n_pred_dim, h.n_pred_layers],
      [8192, 1024, 8, 24, 256, 640, 2],
    );
    assert.equal(gen.parakeetTestModelHparams({ size: 'realistic', en: true }).n_vocab, 1024);
  });

  it('caches by options and reuses the cached file', async () => {
    const gen = await generator();
    const saved = process.env.VOXD_TEST_MODELS_DIR;
    process.env.VOXD_TEST_MODELS_DIR = path.join(tmp, 'cache');
    try {
      const file = gen.parakeetTestModelPath({ size: 'tiny', en: true, seed: 3 });
      assert.match(path.basename(file), /^ggml-parakeet-tdt-tiny\.en-random-s3-v\d+\.bin$/);
      assert.equal(await gen.makeParakeetTestModel({ size: 'tiny', en: true, seed: 3 }), file);
      const mtime = fs.statSync(file).mtimeMs;
      assert.equal(await gen.makeParakeetTestModel({ size: 'tiny', en: true, seed: 3 }), file);
      assert.equal(fs.statSync(file).mtimeMs, mtime);
      const others = [gen.parakeetTestModelPath({ size: 'tiny', seed: 3 }), gen.parakeetTestModelPath({ size: 'realistic', en: true, seed: 3 })];
      assert.equal(new Set([file, ...others]).size, 3);
    } finally {
      if (saved === undefined) delete process.env.VOXD_TEST_MODELS_DIR;
      else process.env.VOXD_TEST_MODELS_DIR = saved;
    }
  });

  it('rejects unknown options', async () => {
    const gen = await generator();
    await assert.rejects(gen.writeParakeetTestModel(path.join(tmp, 'x.bin'), { size: 'huge' as 'tiny' }), /unknown size/);
    await assert.rejects(gen.writeParakeetTestModel(path.join(tmp, 'x.bin'), { seed: 1.5 }), /seed/);
    assert.ok(!fs.existsSync(path.join(tmp, 'x.bin')));
  });
});
