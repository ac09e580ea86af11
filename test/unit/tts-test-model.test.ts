import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { pathToFileURL } from 'node:url';
import { F16, F32, type Gguf, assertLayout, readGguf, shape, tensorValues, type } from '../helpers/gguf.js';
import { ROOT } from '../helpers/paths.js';

// scripts/make-tts-test-model.mjs writes random-weight GGML TTS pairs (backbone + mmproj) for the engine's tests.
// These tests read what it wrote with a GGUF reader of their own (helpers/gguf.ts): the format, the metadata llama.cpp's loaders
// need, every tensor's shape and type, the vocabulary's special tokens, determinism and the cache.

interface TtsModelPaths {
  dir: string;
  model: string;
  mmproj: string;
}
interface TtsModelOptions {
  arch?: 'pockettts' | 'qwen3tts';
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

describe('random-weight Qwen3-TTS test models (scripts/make-tts-test-model.mjs --arch qwen3tts)', () => {
  let tmp: string;
  let pair: TtsModelPaths;
  let backbone: Gguf;
  let mmproj: Gguf;
  let d: Record<string, number>;

  before(async () => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'voxd-qwen3tts-model-'));
    const gen = await generator();
    pair = await gen.writeTtsTestModel(path.join(tmp, 'a'), { arch: 'qwen3tts', size: 'tiny', seed: 1 });
    backbone = readGguf(pair.model);
    mmproj = readGguf(pair.mmproj);
    d = gen.ttsTestModelDims({ arch: 'qwen3tts', size: 'tiny' });
  });
  after(() => fs.rmSync(tmp, { recursive: true, force: true }));

  it('writes valid GGUF v3 files under the hub layout names', () => {
    assert.equal(path.basename(pair.model), 'qwen3-tts-tiny-random-f16.gguf');
    assert.equal(path.basename(pair.mmproj), 'mmproj-qwen3-tts-tiny-random-f16.gguf');
    assertLayout(backbone);
    assertLayout(mmproj);
  });

  it('gives the backbone the qwen3tts hparams and every tensor llama.cpp loads', () => {
    const m = backbone.metadata;
    assert.equal(m.get('general.architecture'), 'qwen3tts');
    assert.equal(m.get('qwen3tts.embedding_length'), d.embd);
    assert.equal(m.get('qwen3tts.block_count'), d.layer);
    assert.equal(m.get('qwen3tts.attention.head_count'), d.head);
    assert.equal(m.get('qwen3tts.attention.head_count_kv'), d.headKv);
    assert.equal(m.get('qwen3tts.attention.key_length'), d.headDim);
    assert.equal(m.get('qwen3tts.feed_forward_length'), d.ff);
    assert.ok(m.has('qwen3tts.context_length') && m.has('qwen3tts.attention.layer_norm_rms_epsilon'));
    // llama.cpp wants exactly 4 M-RoPE sections, in rotary pairs that fit the head
    const sections = m.get('qwen3tts.rope.dimension_sections') as number[];
    assert.equal(sections.length, 4);
    assert.ok(sections.every((s) => Number.isInteger(s) && s >= 0));
    assert.ok(2 * sections.reduce((a, b) => a + b, 0) <= d.headDim!);
    // token_embd, output_norm, output, then per layer: 2 norms, q, k, v, output, q/k norms, gate, up, down
    assert.equal(backbone.tensors.size, 3 + 11 * d.layer!);
    const tokens = m.get('tokenizer.ggml.tokens') as string[];
    assert.deepEqual(shape(backbone, 'token_embd.weight'), [d.embd, tokens.length]);
    assert.deepEqual(shape(backbone, 'output.weight'), [d.embd, 3072]); // llama.cpp hardcodes the codec head
    assert.deepEqual(shape(backbone, 'blk.1.attn_q.weight'), [d.embd, d.head! * d.headDim!]);
    assert.deepEqual(shape(backbone, 'blk.1.attn_k.weight'), [d.embd, d.headKv! * d.headDim!]);
    assert.deepEqual(shape(backbone, 'blk.1.attn_output.weight'), [d.head! * d.headDim!, d.embd]);
    assert.deepEqual(shape(backbone, 'blk.1.attn_q_norm.weight'), [d.headDim]);
    assert.deepEqual(shape(backbone, 'blk.1.ffn_gate.weight'), [d.embd, d.ff]);
    assert.deepEqual(shape(backbone, 'blk.1.ffn_down.weight'), [d.ff, d.embd]);
  });

  it('carries a byte-level BPE vocabulary with the special tokens the audio helper looks up', () => {
    const m = backbone.metadata;
    assert.equal(m.get('tokenizer.ggml.model'), 'gpt2');
    assert.equal(m.get('tokenizer.ggml.pre'), 'qwen2');
    const tokens = m.get('tokenizer.ggml.tokens') as string[];
    const types = m.get('tokenizer.ggml.token_type') as number[];
    const merges = m.get('tokenizer.ggml.merges') as string[];
    assert.equal(types.length, tokens.length);
    assert.equal(tokens.length, d.textVocab! + 3072, 'text rows, then the codec rows');
    assert.equal(new Set(tokens).size, tokens.length, 'no duplicate token texts');
    // every byte has a token (so any text tokenizes), and every merge joins two tokens into a third
    assert.ok(tokens.includes('\u0120') && tokens.includes('\u010a') && tokens.includes('a') && tokens.includes('~'));
    const ids = new Map(tokens.map((t, i) => [t, i]));
    assert.ok(merges.length > 0);
    for (const merge of merges) {
      const [left, right] = merge.split(' ');
      assert.ok(ids.has(left!) && ids.has(right!) && ids.has(left! + right!), merge);
    }
    // the chat wrap's role line must be three tokens: <|im_start|>, "assistant", newline
    assert.ok(ids.has('assistant'));
    const specials = [
      '<|im_start|>',
      '<|im_end|>',
      '<tts_pad>',
      '<tts_text_bos>',
      '<tts_text_eod>',
      '<|codec_bos|>',
      '<|codec_eos_token|>',
      '<|codec_pad|>',
      '<|codec_think|>',
      '<|codec_think_bos|>',
      '<|codec_think_eos|>',
      ...['chinese', 'english', 'german', 'italian', 'portuguese', 'spanish', 'japanese', 'korean', 'french', 'russian'].map(
        (lang) => `<|codec_language_${lang}|>`,
      ),
    ];
    for (const t of specials) {
      assert.ok(ids.has(t), `${t} is in the vocabulary`);
      assert.equal(types[ids.get(t)!], 3, `${t} is a control token`);
    }
    // the codec rows: codebook-0 codes first and contiguous, as the helper computes code = token - codec_0
    const codec0 = ids.get('<|codec_0|>')!;
    assert.equal(codec0, d.textVocab);
    assert.equal(ids.get('<|codec_2047|>'), codec0 + 2047);
    assert.equal(ids.get('<|codec_eos_token|>'), codec0 + 2150);
    assert.equal(m.get('tokenizer.ggml.eos_token_id'), codec0 + 2150);
    // the backbone may only sample codes and codec_eos: the codec rows past the codebook are suppressed
    const suppressed = m.get('tokenizer.ggml.suppress_tokens') as number[];
    assert.equal(suppressed.length, 1023);
    assert.ok(suppressed.every((id) => id >= codec0 + 2048 && id < tokens.length && id !== codec0 + 2150));
  });

  it('gives the mmproj a speaker encoder, a code predictor and code2wav sized to the backbone', () => {
    const m = mmproj.metadata;
    assert.equal(m.get('general.architecture'), 'clip');
    assert.equal(m.get('clip.has_audio_encoder'), true);
    assert.equal(m.get('clip.has_gen_audio_encoder'), true);
    assert.equal(m.get('clip.audio.projector_type'), 'qwen3tts_spkenc');
    assert.equal(m.get('clip.gen.audio.projector_type'), 'qwen3tts_gen');
    assert.equal(m.get('clip.audio.projection_dim'), d.embd);
    assert.equal(m.get('clip.gen.audio.projection_dim'), d.embd);
    assert.equal(m.get('clip.audio.num_mel_bins'), 128);
    assert.equal(m.get('clip.audio.block_count'), 3);
    assert.equal(m.get('clip.gen.audio.embedding_length'), d.cpEmbd);
    assert.equal(m.get('clip.gen.audio.block_count'), d.cpLayer);
    assert.equal(m.get('clip.gen.audio.attention.head_count'), d.cpHead);
    assert.equal(m.get('clip.gen.audio.attention.head_count_kv'), d.cpHeadKv);
    assert.ok(!m.has('clip.projector_type'), 'a single projector type would override both sections');

    // speaker encoder: stem, 3 blocks x (2 pointwise + 7 Res2Net + 2 SE convs), aggregation, pooling (2), fc
    const encoder = 2 + 3 * 2 * 11 + 2 + 4 + 2;
    // code predictor: proj_in (weight, bias), embd, head, out_embd, output_norm, layers of 11
    const predictor = 2 + 4 + 11 * d.cpLayer!;
    // code2wav: quantizer (6), pre_conv, transformer in/out projections and norm, 8 layers of 11, 2 upsampling
    // blocks of 11, DAC entry, 4 blocks x (snake, transposed conv, 3 x (2 snakes, 2 convs)), post snake and conv
    const code2wav = 6 + 2 + 5 + 8 * 11 + 2 * 11 + 2 + 4 * (4 + 3 * 8) + 4;
    assert.equal(mmproj.tensors.size, encoder + predictor + code2wav);

    // the shapes the graphs tie together (ggml order, innermost first)
    assert.deepEqual(shape(mmproj, 'a.conv1d.0.weight'), [5, 128, d.spkChannels]);
    assert.deepEqual(shape(mmproj, 'a.blk.3.res2.6.weight'), [3, d.spkChannels! / 8, d.spkChannels! / 8]);
    assert.deepEqual(shape(mmproj, 'mm.a.fc.weight'), [1, 2 * d.spkMfa!, d.embd]); // ne[2] = backbone n_embd
    assert.deepEqual(shape(mmproj, 'a.gen.code.proj_in.weight'), [d.embd, d.cpEmbd]);
    assert.deepEqual(shape(mmproj, 'a.gen.code.embd.weight'), [d.embd, 2048, 15]);
    assert.deepEqual(shape(mmproj, 'a.gen.code.head.weight'), [d.cpEmbd, 2048, 15]);
    assert.deepEqual(shape(mmproj, 'a.gen.code.out_embd.weight'), [d.embd, 3072]); // ne[0] = backbone n_embd
    assert.deepEqual(shape(mmproj, `a.gen.code.blk.${d.cpLayer! - 1}.attn_q.weight`), [d.cpEmbd, d.cpHead! * d.cpHeadDim!]);
    assert.deepEqual(shape(mmproj, 'a.gen.wav.quant.rest.codebook.weight'), [d.wavCodeDim, 2048, 15]);
    assert.deepEqual(shape(mmproj, 'a.gen.wav.pre_conv.weight'), [3, d.wavDim, d.wavLatent]);
    assert.deepEqual(shape(mmproj, 'a.gen.wav.tfm.blk.7.attn_q.weight'), [d.wavTfm, 16 * d.wavHeadDim!]);
    assert.ok(!mmproj.tensors.has('a.gen.wav.tfm.blk.8.attn_q.weight'), 'clip.cpp hardcodes 8 decoder layers');
    assert.deepEqual(shape(mmproj, 'a.gen.wav.up.blk.1.conv.weight'), [2, d.wavLatent, d.wavLatent]);
    assert.deepEqual(shape(mmproj, 'a.gen.wav.up.blk.1.dwconv.weight'), [7, 1, d.wavLatent]);
    assert.deepEqual(shape(mmproj, 'a.gen.wav.dac.entry.weight'), [7, d.wavLatent, d.wavDac]);
    // the graph takes each DAC block's stride from its kernel (2 x stride): 8, 5, 4, 3
    assert.deepEqual(
      [0, 1, 2, 3].map((i) => shape(mmproj, `a.gen.wav.dac.blk.${i}.conv.weight`)),
      [8, 5, 4, 3].map((stride, i) => [2 * stride, d.wavDac! / 2 ** (i + 1), d.wavDac! / 2 ** i]),
    );
    assert.deepEqual(shape(mmproj, 'a.gen.wav.dac.post_conv.weight'), [7, d.wavDac! / 16, 1]);
    // ggml_conv_1d(_dw) needs f16 kernels; ggml has no f16 transposed conv; the converter keeps ffn_down in f32
    for (const name of [
      'a.gen.wav.pre_conv.weight',
      'a.gen.wav.dac.entry.weight',
      'a.gen.wav.dac.blk.2.res.1.conv1.weight',
      'a.gen.wav.up.blk.0.dwconv.weight',
    ]) {
      assert.equal(type(mmproj, name), F16, name);
    }
    for (const name of ['a.gen.wav.up.blk.0.conv.weight', 'a.gen.wav.dac.blk.0.conv.weight', 'a.gen.code.blk.0.ffn_down.weight']) {
      assert.equal(type(mmproj, name), F32, name);
    }
  });

  it('fills the weights with small finite values, unit norm gains and folded SnakeBeta parameters', () => {
    const head = tensorValues(backbone, 'output.weight');
    const std = Math.sqrt(head.reduce((a, v) => a + v * v, 0) / head.length);
    assert.ok(Math.abs(std * Math.sqrt(d.embd!) - 1) < 0.05, `codec head std ${std}`);
    assert.ok(head.every((v) => Number.isFinite(v)));
    assert.ok(tensorValues(backbone, 'blk.0.attn_q_norm.weight').every((v) => v === 1));
    assert.ok(tensorValues(mmproj, 'a.gen.wav.dac.blk.0.snake.alpha').every((v) => v === 1));
    assert.ok(tensorValues(mmproj, 'a.gen.wav.dac.post_conv.bias').every((v) => v === 0));
  });

  it('is deterministic for a seed and caches by arch', async () => {
    const gen = await generator();
    const again = await gen.writeTtsTestModel(path.join(tmp, 'b'), { arch: 'qwen3tts', size: 'tiny', seed: 1 });
    assert.ok(fs.readFileSync(again.model).equals(fs.readFileSync(pair.model)));
    assert.ok(fs.readFileSync(again.mmproj).equals(fs.readFileSync(pair.mmproj)));
    assert.match(path.basename(gen.ttsTestModelDir({ arch: 'qwen3tts', size: 'tiny', seed: 3 })), /^qwen3tts-tiny-random-s3-v\d+$/);
  });
});
