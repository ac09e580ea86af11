import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { pathToFileURL } from 'node:url';
import { F16, F32, type Gguf, assertLayout, readGguf, shape, tensorValues, type } from '../helpers/gguf.js';
import { ROOT } from '../helpers/paths.js';

// scripts/make-asr-test-model.mjs writes random-weight audio language models (language model + mmproj) for the
// engine's tests. These tests read what it wrote with a GGUF reader of their own (helpers/gguf.ts): the format, the
// metadata and tensors llama.cpp's loaders need, the special tokens at their released ids, the word chain that makes
// greedy decoding decisive, determinism and the cache.

interface AsrModelPaths {
  dir: string;
  model: string;
  mmproj: string;
}
interface AsrModelOptions {
  arch?: 'qwen3asr' | 'voxtral';
  size?: 'tiny' | 'realistic';
  seed?: number;
}
interface Generator {
  writeAsrTestModel(out: string, options?: AsrModelOptions): Promise<AsrModelPaths>;
  makeAsrTestModel(options?: AsrModelOptions): Promise<AsrModelPaths>;
  asrTestModelDir(options?: AsrModelOptions): string;
  asrTestModelFiles(options?: AsrModelOptions): { model: string; mmproj: string };
  asrTestModelDims(options?: AsrModelOptions): Record<string, number>;
}

async function generator(): Promise<Generator> {
  return (await import(pathToFileURL(path.join(ROOT, 'scripts', 'make-asr-test-model.mjs')).href)) as Generator;
}

/** The words of the chain in order (scripts/test-model-vocab.mjs's bpeWords): "assistant", then " the", " of"... */
const FIRST_WORDS = ['assistant', '\u0120the', '\u0120of'];

/** A row of a [width, rows] matrix. */
function row(g: Gguf, name: string, index: number): number[] {
  const width = shape(g, name)[0]!;
  return tensorValues(g, name, index * width, width);
}

function rms(values: number[]): number {
  return Math.sqrt(values.reduce((a, v) => a + v * v, 0) / values.length);
}

/**
 * The word chain of the last block's FFN (asr-test-model/parts.mjs): each word's two neurons are keyed by its
 * embedding's signs and their negation, and write the next word's output row's signs and their negation.
 */
function assertWordChain(model: Gguf, layers: number, outputName: string): void {
  const tokens = model.metadata.get('tokenizer.ggml.tokens') as string[];
  const ids = FIRST_WORDS.map((w) => tokens.indexOf(w));
  assert.ok(ids.every((id) => id >= 0));
  const block = `blk.${layers - 1}`;
  const [embd, ff] = shape(model, `${block}.ffn_gate.weight`) as [number, number];
  const down = tensorValues(model, `${block}.ffn_down.weight`);
  const signs = (values: number[]) => values.map(Math.sign);
  const gate = (neuron: number) => signs(row(model, `${block}.ffn_gate.weight`, neuron));
  // the first word's twin, keyed by the negation, follows the last word's neuron
  const negated = gate(0).map((s) => -s);
  const words = Array.from({ length: ff }, (_, n) => n).find((n) => gate(n).every((s, j) => s === negated[j]));
  assert.ok(words !== undefined && words > 100, `the chain has a neuron pair per word (${words} words)`);
  for (const [k, id] of ids.slice(0, 2).entries()) {
    const key = signs(row(model, 'token_embd.weight', id));
    assert.deepEqual(gate(k), key, `${tokens[id]}'s neuron is keyed by its embedding`);
    assert.deepEqual(signs(row(model, `${block}.ffn_up.weight`, k)), key);
    assert.deepEqual(
      gate(k + words),
      key.map((s) => -s),
      'and its twin by the negation',
    );
    const written = Array.from({ length: embd }, (_, j) => Math.sign(down[j * ff + k]!));
    assert.deepEqual(written, signs(row(model, outputName, ids[k + 1]!)), `${tokens[id]} writes ${tokens[ids[k + 1]!]}`);
  }
  // the neurons past the words' pairs are silent
  assert.ok(row(model, `${block}.ffn_gate.weight`, ff - 1).every((v) => v === 0));
}

/** A tiny pair of `arch` written to a temporary directory (removed after the suite), read back. */
function tinyPair(arch: 'qwen3asr' | 'voxtral') {
  const fixture = { tmp: '', pair: { dir: '', model: '', mmproj: '' }, model: {} as Gguf, mmproj: {} as Gguf, d: {} as Record<string, number> };
  before(async () => {
    fixture.tmp = fs.mkdtempSync(path.join(os.tmpdir(), `voxd-${arch}-model-`));
    const gen = await generator();
    fixture.pair = await gen.writeAsrTestModel(path.join(fixture.tmp, 'a'), { arch, size: 'tiny', seed: 1 });
    fixture.model = readGguf(fixture.pair.model);
    fixture.mmproj = readGguf(fixture.pair.mmproj);
    fixture.d = gen.asrTestModelDims({ arch, size: 'tiny' });
  });
  after(() => fs.rmSync(fixture.tmp, { recursive: true, force: true }));
  return fixture;
}

describe('random-weight Qwen3-ASR test models (scripts/make-asr-test-model.mjs)', () => {
  const fixture = tinyPair('qwen3asr');

  it('writes valid GGUF v3 files under the hub layout names', () => {
    assert.equal(path.basename(fixture.pair.model), 'qwen3-asr-tiny-random-f16.gguf');
    assert.equal(path.basename(fixture.pair.mmproj), 'mmproj-qwen3-asr-tiny-random-f16.gguf');
    assert.deepEqual(fs.readdirSync(fixture.pair.dir).sort(), [path.basename(fixture.pair.mmproj), path.basename(fixture.pair.model)].sort());
    assertLayout(fixture.model);
    assertLayout(fixture.mmproj);
  });

  it('gives the language model the qwen3vl hparams and tensors, the output tied to the embeddings', () => {
    const m = fixture.model.metadata;
    assert.equal(m.get('general.architecture'), 'qwen3vl');
    assert.equal(m.get('qwen3vl.embedding_length'), fixture.d.embd);
    assert.equal(m.get('qwen3vl.block_count'), fixture.d.layer);
    assert.equal(m.get('qwen3vl.attention.head_count'), fixture.d.head);
    assert.equal(m.get('qwen3vl.attention.head_count_kv'), fixture.d.headKv);
    assert.equal(m.get('qwen3vl.attention.key_length'), fixture.d.headDim);
    assert.equal(m.get('qwen3vl.feed_forward_length'), fixture.d.ff);
    assert.equal(m.get('qwen3vl.n_deepstack_layers'), 0);
    assert.ok(m.has('qwen3vl.context_length') && m.has('qwen3vl.attention.layer_norm_rms_epsilon'));
    const sections = m.get('qwen3vl.rope.dimension_sections') as number[];
    assert.equal(sections.length, 4);
    assert.ok(2 * sections.reduce((a, b) => a + b, 0) <= fixture.d.headDim!);
    // token_embd, output_norm, then per layer: 2 norms, q, k, v, output, q/k norms, gate, up, down
    assert.equal(fixture.model.tensors.size, 2 + 11 * fixture.d.layer!);
    assert.ok(!fixture.model.tensors.has('output.weight'), 'tied, as the released models');
    assert.deepEqual(shape(fixture.model, 'token_embd.weight'), [fixture.d.embd, 151936]);
    assert.deepEqual(shape(fixture.model, 'blk.1.attn_q.weight'), [fixture.d.embd, fixture.d.head! * fixture.d.headDim!]);
    assert.deepEqual(shape(fixture.model, 'blk.1.attn_k.weight'), [fixture.d.embd, fixture.d.headKv! * fixture.d.headDim!]);
    assert.deepEqual(shape(fixture.model, 'blk.1.attn_q_norm.weight'), [fixture.d.headDim]);
    assert.deepEqual(shape(fixture.model, 'blk.1.ffn_down.weight'), [fixture.d.ff, fixture.d.embd]);
  });

  it("carries Qwen2's byte-level BPE vocabulary with the released special token ids and the converter's chat template", () => {
    const m = fixture.model.metadata;
    assert.equal(m.get('tokenizer.ggml.model'), 'gpt2');
    assert.equal(m.get('tokenizer.ggml.pre'), 'qwen2');
    const tokens = m.get('tokenizer.ggml.tokens') as string[];
    const types = m.get('tokenizer.ggml.token_type') as number[];
    assert.equal(tokens.length, 151936);
    assert.equal(types.length, tokens.length);
    assert.equal(new Set(tokens).size, tokens.length, 'no duplicate token texts');
    const ids = new Map(tokens.map((t, i) => [t, i]));
    for (const merge of m.get('tokenizer.ggml.merges') as string[]) {
      const [left, right] = merge.split(' ');
      assert.ok(ids.has(left!) && ids.has(right!) && ids.has(left! + right!), merge);
    }
    const specials: [string, number, number][] = [
      ['<|endoftext|>', 151643, 3],
      ['<|im_start|>', 151644, 3],
      ['<|im_end|>', 151645, 3],
      ['<|audio_start|>', 151669, 3],
      ['<|audio_end|>', 151670, 3],
      ['<|audio_pad|>', 151676, 3],
      ['<asr_text>', 151704, 4], // user-defined: matched in text, printed in transcripts
    ];
    for (const [text, id, kind] of specials) {
      assert.equal(ids.get(text), id, text);
      assert.equal(types[id], kind, `${text}'s type`);
    }
    assert.equal(m.get('tokenizer.ggml.eos_token_id'), 151645);
    assert.equal(m.get('tokenizer.ggml.bos_token_id'), 151645);
    assert.equal(m.get('tokenizer.ggml.padding_token_id'), 151643);
    assert.equal(
      m.get('tokenizer.chat_template'),
      "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}" +
        "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}",
    );
  });

  it('makes greedy decoding a word chain and keeps end-of-turn out of reach', () => {
    assertWordChain(fixture.model, fixture.d.layer!, 'token_embd.weight');
    const tokens = fixture.model.metadata.get('tokenizer.ggml.tokens') as string[];
    const word = rms(row(fixture.model, 'token_embd.weight', tokens.indexOf('\u0120the')));
    assert.ok(Math.abs(rms(row(fixture.model, 'token_embd.weight', tokens.indexOf('a'))) / word - 0.1) < 0.01, 'other tokens a tenth as wide');
    assert.ok(rms(row(fixture.model, 'token_embd.weight', 151645)) / word < 0.05, '<|im_end|> far narrower');
  });

  it('gives the mmproj the qwen3a audio encoder and projector sized to the language model', () => {
    const m = fixture.mmproj.metadata;
    assert.equal(m.get('general.architecture'), 'clip');
    assert.equal(m.get('clip.has_audio_encoder'), true);
    assert.equal(m.get('clip.audio.projector_type'), 'qwen3a');
    assert.ok(!m.has('clip.projector_type'));
    assert.equal(m.get('clip.audio.projection_dim'), fixture.d.embd);
    assert.equal(m.get('clip.audio.embedding_length'), fixture.d.audioEmbd);
    assert.equal(m.get('clip.audio.feed_forward_length'), fixture.d.audioFf);
    assert.equal(m.get('clip.audio.block_count'), fixture.d.audioLayer);
    assert.equal(m.get('clip.audio.attention.head_count'), fixture.d.audioHead);
    assert.equal(m.get('clip.audio.num_mel_bins'), 128);
    // 3 convs (2 each), conv_out, positions, layers of 16, post norm (2), projector (4)
    assert.equal(fixture.mmproj.tensors.size, 6 + 1 + 1 + 16 * fixture.d.audioLayer! + 2 + 4);
    const c = fixture.d.audioConv!;
    assert.deepEqual(shape(fixture.mmproj, 'a.conv2d.1.weight'), [3, 3, 1, c]);
    assert.deepEqual(shape(fixture.mmproj, 'a.conv2d.3.weight'), [3, 3, c, c]);
    assert.deepEqual(shape(fixture.mmproj, 'a.conv2d.3.bias'), [1, 1, c]);
    assert.deepEqual(shape(fixture.mmproj, 'a.conv_out.weight'), [c * 16, fixture.d.audioEmbd]); // channels x 128 / 8 mel bins
    assert.ok(!fixture.mmproj.tensors.has('a.conv_out.bias'));
    assert.deepEqual(shape(fixture.mmproj, 'a.position_embd.weight'), [fixture.d.audioEmbd, 1500]);
    assert.deepEqual(shape(fixture.mmproj, `a.blk.${fixture.d.audioLayer! - 1}.attn_k.bias`), [fixture.d.audioEmbd]);
    assert.deepEqual(shape(fixture.mmproj, 'a.blk.0.ffn_up.weight'), [fixture.d.audioEmbd, fixture.d.audioFf]);
    assert.deepEqual(shape(fixture.mmproj, 'mm.a.mlp.1.weight'), [fixture.d.audioEmbd, fixture.d.audioEmbd]);
    assert.deepEqual(shape(fixture.mmproj, 'mm.a.mlp.2.weight'), [fixture.d.audioEmbd, fixture.d.embd]);
    // the converter's types: convolutions f16, biases and positions f32
    assert.equal(type(fixture.mmproj, 'a.conv2d.2.weight'), F16);
    assert.equal(type(fixture.mmproj, 'a.conv_out.weight'), F16);
    assert.equal(type(fixture.mmproj, 'a.conv2d.2.bias'), F32);
    assert.equal(type(fixture.mmproj, 'a.position_embd.weight'), F32);
    // Whisper's sinusoids: sin(0) = 0 over the first half of position 0, cos(0) = 1 over the second
    const first = tensorValues(fixture.mmproj, 'a.position_embd.weight', 0, fixture.d.audioEmbd);
    assert.deepEqual(first, [...Array(fixture.d.audioEmbd! / 2).fill(0), ...Array(fixture.d.audioEmbd! / 2).fill(1)]);
  });

  it('gives the realistic size the released Qwen3-ASR-0.6B shapes', async () => {
    assert.deepEqual((await generator()).asrTestModelDims({ size: 'realistic' }), {
      embd: 1024,
      head: 16,
      headKv: 8,
      headDim: 128,
      layer: 28,
      ff: 3072,
      audioEmbd: 896,
      audioHead: 14,
      audioLayer: 18,
      audioFf: 3584,
      audioConv: 480,
    });
  });

  it('is deterministic for a seed and differs between seeds', async () => {
    const gen = await generator();
    const again = await gen.writeAsrTestModel(path.join(fixture.tmp, 'b'), { size: 'tiny', seed: 1 });
    const other = await gen.writeAsrTestModel(path.join(fixture.tmp, 'c'), { size: 'tiny', seed: 2 });
    assert.ok(fs.readFileSync(again.model).equals(fs.readFileSync(fixture.pair.model)));
    assert.ok(fs.readFileSync(again.mmproj).equals(fs.readFileSync(fixture.pair.mmproj)));
    assert.ok(!fs.readFileSync(other.model).equals(fs.readFileSync(fixture.pair.model)));
    assert.ok(!fs.readFileSync(other.mmproj).equals(fs.readFileSync(fixture.pair.mmproj)));
  });

  it('caches by options and reuses the cached pair', async () => {
    const gen = await generator();
    const saved = process.env.VOXD_TEST_MODELS_DIR;
    process.env.VOXD_TEST_MODELS_DIR = path.join(fixture.tmp, 'cache');
    try {
      const dir = gen.asrTestModelDir({ seed: 3 });
      assert.match(path.basename(dir), /^qwen3asr-tiny-random-s3-v\d+$/);
      const first = await gen.makeAsrTestModel({ seed: 3 });
      assert.deepEqual(first, { dir, ...Object.fromEntries(Object.entries(gen.asrTestModelFiles()).map(([k, f]) => [k, path.join(dir, f)])) });
      const mtime = fs.statSync(first.model).mtimeMs;
      assert.deepEqual(await gen.makeAsrTestModel({ seed: 3 }), first);
      assert.equal(fs.statSync(first.model).mtimeMs, mtime);
      assert.match(path.basename(gen.asrTestModelDir({ arch: 'voxtral', size: 'realistic', seed: 3 })), /^voxtral-realistic-random-s3-v\d+$/);
    } finally {
      if (saved === undefined) delete process.env.VOXD_TEST_MODELS_DIR;
      else process.env.VOXD_TEST_MODELS_DIR = saved;
    }
  });

  it('rejects unknown options', async () => {
    const gen = await generator();
    await assert.rejects(gen.writeAsrTestModel(path.join(fixture.tmp, 'x'), { size: 'huge' as 'tiny' }), /unknown size/);
    await assert.rejects(gen.writeAsrTestModel(path.join(fixture.tmp, 'x'), { arch: 'whisper' as 'qwen3asr' }), /unknown arch/);
    await assert.rejects(gen.writeAsrTestModel(path.join(fixture.tmp, 'x'), { seed: 1.5 }), /seed/);
  });
});

describe('random-weight Voxtral test models (scripts/make-asr-test-model.mjs --arch voxtral)', () => {
  const fixture = tinyPair('voxtral');

  it('writes valid GGUF v3 files under the hub layout names', () => {
    assert.equal(path.basename(fixture.pair.model), 'voxtral-mini-tiny-random-f16.gguf');
    assert.equal(path.basename(fixture.pair.mmproj), 'mmproj-voxtral-mini-tiny-random-f16.gguf');
    assertLayout(fixture.model);
    assertLayout(fixture.mmproj);
  });

  it('gives the language model the llama hparams and tensors, with its own output head', () => {
    const m = fixture.model.metadata;
    assert.equal(m.get('general.architecture'), 'llama');
    assert.equal(m.get('llama.embedding_length'), fixture.d.embd);
    assert.equal(m.get('llama.block_count'), fixture.d.layer);
    assert.equal(m.get('llama.attention.head_count_kv'), fixture.d.headKv);
    assert.equal(m.get('llama.rope.dimension_count'), fixture.d.headDim);
    assert.equal(m.get('llama.vocab_size'), fixture.d.vocab);
    // token_embd, output_norm, output, then per layer: 2 norms, q, k, v, output, gate, up, down
    assert.equal(fixture.model.tensors.size, 3 + 9 * fixture.d.layer!);
    assert.deepEqual(shape(fixture.model, 'output.weight'), [fixture.d.embd, fixture.d.vocab]);
    assert.ok(!fixture.model.tensors.has('blk.0.attn_q_norm.weight'));
    assertWordChain(fixture.model, fixture.d.layer!, 'output.weight');
  });

  it("carries Tekken's special tokens at their released ids and Devstral's chat template, as the converter writes them", () => {
    const m = fixture.model.metadata;
    assert.equal(m.get('tokenizer.ggml.model'), 'gpt2');
    assert.equal(m.get('tokenizer.ggml.pre'), 'tekken');
    const tokens = m.get('tokenizer.ggml.tokens') as string[];
    const types = m.get('tokenizer.ggml.token_type') as number[];
    assert.equal(tokens.length, fixture.d.vocab);
    assert.equal((m.get('tokenizer.ggml.scores') as number[]).length, fixture.d.vocab);
    const specials: [string, number][] = [
      ['<s>', 1],
      ['</s>', 2],
      ['[INST]', 3],
      ['[/INST]', 4],
      ['[AUDIO]', 24],
      ['[BEGIN_AUDIO]', 25],
      ['[TRANSCRIBE]', 34],
    ];
    for (const [text, id] of specials) assert.equal(tokens[id], text);
    assert.ok(types.slice(0, 1000).every((t) => t === 3) && types[1000] === 1, 'the first 1000 are control tokens, then bytes');
    assert.equal(m.get('tokenizer.ggml.bos_token_id'), 1);
    assert.equal(m.get('tokenizer.ggml.eos_token_id'), 2);
    assert.equal(m.get('tokenizer.ggml.add_bos_token'), true);
    assert.equal(
      m.get('tokenizer.chat_template'),
      fs.readFileSync(path.join(ROOT, 'third_party', 'llama.cpp', 'models', 'templates', 'unsloth-mistral-Devstral-Small-2507.jinja'), 'utf8'),
    );
  });

  it('gives the mmproj a Whisper encoder without key biases and the stacking projector', () => {
    const m = fixture.mmproj.metadata;
    assert.equal(m.get('clip.projector_type'), 'voxtral');
    assert.equal(m.get('clip.audio.projector.stack_factor'), 4);
    assert.equal(m.get('clip.audio.projection_dim'), fixture.d.embd);
    assert.equal(m.get('clip.audio.embedding_length'), fixture.d.audioEmbd);
    assert.equal(m.get('clip.audio.num_mel_bins'), 128);
    // 2 convs (2 each), positions, layers of 15, post norm (2), projector (2)
    assert.equal(fixture.mmproj.tensors.size, 4 + 1 + 15 * fixture.d.audioLayer! + 2 + 2);
    assert.deepEqual(shape(fixture.mmproj, 'a.conv1d.1.weight'), [3, 128, fixture.d.audioEmbd]);
    assert.deepEqual(shape(fixture.mmproj, 'a.conv1d.2.bias'), [1, fixture.d.audioEmbd]);
    assert.ok(!fixture.mmproj.tensors.has('a.blk.0.attn_k.bias'), "Whisper's key projection has no bias");
    assert.deepEqual(shape(fixture.mmproj, 'mm.a.mlp.1.weight'), [4 * fixture.d.audioEmbd!, fixture.d.embd]);
    assert.deepEqual(shape(fixture.mmproj, 'mm.a.mlp.2.weight'), [fixture.d.embd, fixture.d.embd]);
    assert.ok(!fixture.mmproj.tensors.has('mm.a.mlp.1.bias'));
  });

  it('is deterministic for a seed', async () => {
    const again = await (await generator()).writeAsrTestModel(path.join(fixture.tmp, 'b'), { arch: 'voxtral', size: 'tiny', seed: 1 });
    assert.ok(fs.readFileSync(again.model).equals(fs.readFileSync(fixture.pair.model)));
    assert.ok(fs.readFileSync(again.mmproj).equals(fs.readFileSync(fixture.pair.mmproj)));
  });
});
