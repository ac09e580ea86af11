import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { pathToFileURL } from 'node:url';
import { ROOT } from './helpers/paths.js';

// scripts/make-tts-test-model.mjs writes random-weight GGML TTS pairs (backbone + mmproj) for the engine's tests.
// These tests read what it wrote with a GGUF reader of their own: the format, the metadata llama.cpp's loaders
// need, every tensor's shape and type, the vocabulary's special tokens, determinism and the cache.

interface TtsModelPaths {
  dir: string;
  model: string;
  mmproj: string;
}
interface TtsModelOptions {
  arch?: 'pockettts';
  size?: 'tiny' | 'realistic';
  seed?: number;
}
interface Generator {
  writeTtsTestModel(out: string, options?: TtsModelOptions): Promise<TtsModelPaths>;
  makeTtsTestModel(options?: TtsModelOptions): Promise<TtsModelPaths>;
  ttsTestModelDir(options?: TtsModelOptions): string;
  ttsTestModelDims(options?: TtsModelOptions): Record<string, number>;
}

async function generator(): Promise<Generator> {
  return (await import(pathToFileURL(path.join(ROOT, 'scripts', 'make-tts-test-model.mjs')).href)) as Generator;
}

type Value = number | bigint | boolean | string | Value[];
interface TensorInfo {
  name: string;
  ne: number[];
  type: number;
  offset: number;
}
interface Gguf {
  version: number;
  metadata: Map<string, Value>;
  tensors: Map<string, TensorInfo>;
  dataStart: number;
  buf: Buffer;
}

const F32 = 0;
const F16 = 1;

/** A minimal GGUF v3 reader (little-endian; the scalar types, strings and arrays llama.cpp writes). */
function readGguf(file: string): Gguf {
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

function tensorValues(g: Gguf, name: string): number[] {
  const t = g.tensors.get(name);
  assert.ok(t, `tensor ${name}`);
  const start = g.dataStart + t.offset;
  const n = t.ne.reduce((a, b) => a * b, 1);
  return Array.from({ length: n }, (_, i) => (t.type === F16 ? halfToFloat(g.buf.readUInt16LE(start + 2 * i)) : g.buf.readFloatLE(start + 4 * i)));
}

/** The layout every GGUF must have: tensors back to back in info order, each aligned, data to the end of the file. */
function assertLayout(g: Gguf): void {
  assert.equal(g.version, 3);
  let expected = 0;
  for (const t of g.tensors.values()) {
    assert.ok(t.type === F32 || t.type === F16, `${t.name}: type ${t.type}`);
    assert.equal(t.offset, expected, `${t.name} offset`);
    expected += Math.ceil(nbytes(t) / 32) * 32;
  }
  assert.equal(g.buf.length, g.dataStart + expected, 'file ends with the last tensor');
}

function shape(g: Gguf, name: string): number[] {
  const t = g.tensors.get(name);
  assert.ok(t, `missing tensor ${name}`);
  return t.ne;
}

describe('random-weight TTS test models (scripts/make-tts-test-model.mjs)', () => {
  let tmp: string;
  let pair: TtsModelPaths;
  let backbone: Gguf;
  let mmproj: Gguf;

  before(async () => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'voxd-tts-model-'));
    pair = await (await generator()).writeTtsTestModel(path.join(tmp, 'a'), { size: 'tiny', seed: 1 });
    backbone = readGguf(pair.model);
    mmproj = readGguf(pair.mmproj);
  });
  after(() => fs.rmSync(tmp, { recursive: true, force: true }));

  it('writes the pair under the hub layout names', () => {
    assert.equal(path.basename(pair.model), 'pocket-tts-tiny-random-f16.gguf');
    assert.equal(path.basename(pair.mmproj), 'mmproj-pocket-tts-tiny-random-f16.gguf');
    assert.deepEqual(fs.readdirSync(pair.dir).sort(), [path.basename(pair.mmproj), path.basename(pair.model)].sort());
  });

  it('writes valid GGUF v3 files', () => {
    assertLayout(backbone);
    assertLayout(mmproj);
  });

  it('gives the backbone the pockettts hparams and every tensor llama.cpp loads', async () => {
    const d = (await generator()).ttsTestModelDims({ size: 'tiny' });
    const m = backbone.metadata;
    assert.equal(m.get('general.architecture'), 'pockettts');
    assert.equal(m.get('pockettts.embedding_length'), d.embd);
    assert.equal(m.get('pockettts.block_count'), d.layer);
    assert.equal(m.get('pockettts.attention.head_count'), d.head);
    assert.equal(m.get('pockettts.feed_forward_length'), d.ff);
    assert.ok(m.has('pockettts.context_length') && m.has('pockettts.attention.layer_norm_epsilon'));
    // token_embd, output_norm (weight, bias), then per layer: 2 norms x (weight, bias), q, k, v, output, up, down
    assert.equal(backbone.tensors.size, 3 + 10 * d.layer!);
    const tokens = m.get('tokenizer.ggml.tokens') as string[];
    assert.deepEqual(shape(backbone, 'token_embd.weight'), [d.embd, tokens.length]);
    assert.deepEqual(shape(backbone, 'blk.1.ffn_up.weight'), [d.embd, d.ff]);
    assert.deepEqual(shape(backbone, 'blk.1.ffn_down.weight'), [d.ff, d.embd]);
    assert.deepEqual(shape(backbone, 'blk.0.attn_q.weight'), [d.embd, d.embd]);
  });

  it('carries a unigram vocabulary with the special tokens the audio helper looks up', () => {
    const m = backbone.metadata;
    assert.equal(m.get('tokenizer.ggml.model'), 't5');
    const tokens = m.get('tokenizer.ggml.tokens') as string[];
    const types = m.get('tokenizer.ggml.token_type') as number[];
    assert.equal((m.get('tokenizer.ggml.scores') as number[]).length, tokens.length);
    assert.equal(types.length, tokens.length);
    // the learned input vectors are the last rows, as the converter appends them
    assert.deepEqual(tokens.slice(-3), ['<|pad|>', '<|bos_before_voice|>', '<|audio_bos|>']);
    for (const t of tokens.slice(-3)) assert.equal(types[tokens.indexOf(t)], 3, `${t} is a control token`);
    // the helper drops the dummy-prefix token when it tokenizes punctuation: a bare space piece, no "space + mark"
    assert.ok(tokens.includes('\u2581'));
    assert.ok(!tokens.some((t) => /^\u2581[.,!?;:]/.test(t)));
    assert.equal(m.get('tokenizer.ggml.add_space_prefix'), true);
  });

  it('gives the mmproj a speaker encoder and a generator sized to the backbone', async () => {
    const d = (await generator()).ttsTestModelDims({ size: 'tiny' });
    const m = mmproj.metadata;
    assert.equal(m.get('general.architecture'), 'clip');
    assert.equal(m.get('clip.has_audio_encoder'), true);
    assert.equal(m.get('clip.has_gen_audio_encoder'), true);
    assert.equal(m.get('clip.audio.projector_type'), 'pockettts_spkenc');
    assert.equal(m.get('clip.gen.audio.projector_type'), 'pockettts_gen');
    assert.equal(m.get('clip.audio.projection_dim'), d.embd);
    assert.equal(m.get('clip.gen.audio.projection_dim'), d.embd);
    assert.equal(m.get('clip.audio.num_mel_bins'), 1);
    assert.equal(m.get('clip.gen.audio.model_variant'), 'english');
    assert.ok(!m.has('clip.projector_type'), 'a single projector type would override both sections');

    // speaker encoder: SEANet (conv_in, 3 stages x 3 convs, conv_out: 2 tensors each), mimi layers (12 each),
    // downsample, speaker projection
    const encoder = 2 + 3 * 6 + 2 + 12 * d.mimiLayer! + 2;
    // flow net (input_proj, cond_embd, 2 timestep embedders of 6, blocks of 8, final ada + proj), eos head,
    // input_linear, latent mean and std; mimi decoder: quant_out, upsample, mimi layers, SEANet
    const generatorCount = 2 + 2 + 2 * 6 + 8 * d.flowBlocks! + 4 + 2 + 3 + (2 + 12 * d.mimiLayer! + 2 + 3 * 6 + 2);
    assert.equal(mmproj.tensors.size, encoder + generatorCount);

    // the shapes the graphs tie together (ggml order, innermost first)
    const top = d.filters! * 8;
    assert.deepEqual(shape(mmproj, 'a.speaker_proj.weight'), [d.mimiEmbd, d.embd]); // ne[1] = backbone n_embd
    assert.deepEqual(shape(mmproj, 'a.gen.input_linear.weight'), [32, d.embd]);
    assert.deepEqual(shape(mmproj, 'a.gen.out_eos.weight'), [d.embd, 1]);
    assert.deepEqual(shape(mmproj, 'a.seanet.conv_in.weight'), [7, 1, d.filters]);
    assert.deepEqual(shape(mmproj, 'a.seanet.blk.2.scale_conv.weight'), [12, top / 2, top]);
    assert.deepEqual(shape(mmproj, 'a.downsample.conv.weight'), [32, d.mimiEmbd, d.mimiEmbd]);
    assert.deepEqual(shape(mmproj, 'a.gen.wav.upsample.weight'), [32, 1, d.mimiEmbd]);
    assert.deepEqual(shape(mmproj, 'a.gen.wav.seanet.blk.0.scale_conv.weight'), [12, top / 2, top]);
    assert.deepEqual(shape(mmproj, 'a.gen.wav.seanet.conv_out.weight'), [3, d.filters, 1]);
    assert.deepEqual(shape(mmproj, 'a.gen.flow.time.0.up.weight'), [2 * d.freqHalf!, d.flowCh]);
    assert.deepEqual(shape(mmproj, `a.gen.flow.blk.${d.flowBlocks! - 1}.ada.weight`), [d.flowCh, 3 * d.flowCh!]);
    assert.ok(!mmproj.tensors.has(`a.gen.flow.blk.${d.flowBlocks}.norm.weight`), 'the loader counts blocks until one is missing');
    // ggml_conv_1d needs f16 kernels
    for (const t of mmproj.tensors.values()) {
      if (t.name.includes('seanet') && t.name.endsWith('.weight')) assert.equal(t.type, F16, t.name);
    }
  });

  it('fills the weights with small finite values, unit norm gains and zero biases', () => {
    const up = tensorValues(backbone, 'blk.0.ffn_up.weight');
    const e = up.length / Number(backbone.metadata.get('pockettts.feed_forward_length'));
    const std = Math.sqrt(up.reduce((a, v) => a + v * v, 0) / up.length);
    assert.ok(Math.abs(std * Math.sqrt(e) - 1) < 0.05, `std ${std} for fan-in ${e}`);
    assert.ok(up.every((v) => Number.isFinite(v) && Math.abs(v) < 1));
    assert.ok(tensorValues(backbone, 'output_norm.weight').every((v) => v === 1));
    assert.ok(tensorValues(backbone, 'blk.0.attn_norm.bias').every((v) => v === 0));
    assert.ok(tensorValues(mmproj, 'a.gen.emb_std').every((v) => v === 1));
    assert.ok(
      tensorValues(mmproj, 'a.gen.out_eos.bias').every((v) => v < -4),
      'the end-of-speech head never fires',
    );
  });

  it('is deterministic for a seed and differs between seeds', async () => {
    const gen = await generator();
    const again = await gen.writeTtsTestModel(path.join(tmp, 'b'), { size: 'tiny', seed: 1 });
    const other = await gen.writeTtsTestModel(path.join(tmp, 'c'), { size: 'tiny', seed: 2 });
    assert.ok(fs.readFileSync(again.model).equals(fs.readFileSync(pair.model)));
    assert.ok(fs.readFileSync(again.mmproj).equals(fs.readFileSync(pair.mmproj)));
    assert.ok(!fs.readFileSync(other.model).equals(fs.readFileSync(pair.model)));
  });

  it('caches by options and reuses the cached pair', async () => {
    const gen = await generator();
    const saved = process.env.VOXD_TEST_MODELS_DIR;
    process.env.VOXD_TEST_MODELS_DIR = path.join(tmp, 'cache');
    try {
      const dir = gen.ttsTestModelDir({ size: 'tiny', seed: 3 });
      assert.match(path.basename(dir), /^pockettts-tiny-random-s3-v\d+$/);
      const first = await gen.makeTtsTestModel({ size: 'tiny', seed: 3 });
      assert.equal(first.dir, dir);
      const mtime = fs.statSync(first.model).mtimeMs;
      const second = await gen.makeTtsTestModel({ size: 'tiny', seed: 3 });
      assert.deepEqual(second, first);
      assert.equal(fs.statSync(second.model).mtimeMs, mtime);
      assert.notEqual(gen.ttsTestModelDir({ size: 'realistic', seed: 3 }), dir);
    } finally {
      if (saved === undefined) delete process.env.VOXD_TEST_MODELS_DIR;
      else process.env.VOXD_TEST_MODELS_DIR = saved;
    }
  });

  it('rejects unknown options', async () => {
    const gen = await generator();
    await assert.rejects(gen.writeTtsTestModel(path.join(tmp, 'x'), { size: 'huge' as 'tiny' }), /unknown size/);
    await assert.rejects(gen.writeTtsTestModel(path.join(tmp, 'x'), { arch: 'vits' as 'pockettts' }), /unknown arch/);
    await assert.rejects(gen.writeTtsTestModel(path.join(tmp, 'x'), { seed: -1 }), /seed/);
  });
});
