/**
 * voxd's Kokoro against the upstream model (hexgrad/kokoro's own code on PyTorch) on the same random-weight
 * checkpoint, phonemes, voice and speed: the fixtures in test/fixtures/kokoro, made by scripts/make-kokoro-fixtures.mjs
 * (upstream's outputs, captured with hooks on its modules; no noise). What must agree, and how closely
 * (docs/models.md "Kokoro"):
 *   - the token ids, the style row and every duration: exactly;
 *   - every intermediate upstream's oracle writes (ALBERT, the duration encoder and head, the text encoder, the
 *     decoder's inputs): within 1e-4 of each tensor's largest value;
 *   - the generator on upstream's own F0 and energy: its harmonic source within 1e-6, the source's spectrum's
 *     magnitudes within 1e-5 and the phases of every bin above 1e-3 of the largest within 1e-3 radians; and given
 *     upstream's spectrum as well, its last convolution and the waveform within 1e-5;
 *   - the whole waveform from the phonemes alone: within 4 dB of log-spectral distance. Sample for sample it cannot
 *     agree: the harmonic source's phase is the running sum of F0 over the whole utterance, so a float rounding
 *     difference in F0 grows into a different waveform, in upstream too (a one-ulp change of its own F0 moves
 *     upstream's waveform as far from itself).
 * And a batch of the cases gives each the audio it gets alone, sample for sample, noise included.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { before, describe, it } from 'node:test';
import type { NativeKokoroInput, NativeKokoroModel } from '../../src/native/addon.js';
import { loadNative } from '../../src/native/load.js';
import { kokoroTestModel, type KokoroModelPaths } from '../helpers/kokoro.js';
import { ROOT } from '../helpers/paths.js';

const FIXTURES = path.join(ROOT, 'test', 'fixtures', 'kokoro');

interface Manifest {
  model: { size: 'tiny' | 'full'; seed: number };
  checkpointSha256: string;
  cases: { name: string; phonemes: string; voice: string; speed: number; full: boolean }[];
}

interface Case {
  input_ids: number[];
  style_row: number;
  speed: number;
  durations: number[];
  shapes: Record<string, number[]>;
}

function floats(file: string): Float32Array {
  const bytes = fs.readFileSync(file);
  return new Float32Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.length));
}

/** The largest |a - b| over the largest |b|. */
function relativeError(a: Float32Array, b: Float32Array): number {
  assert.equal(a.length, b.length);
  let diff = 0;
  let scale = 0;
  for (let i = 0; i < a.length; i++) {
    diff = Math.max(diff, Math.abs((a[i] as number) - (b[i] as number)));
    scale = Math.max(scale, Math.abs(b[i] as number));
  }
  return diff / scale;
}

/** Mean absolute difference of two waveforms' log-magnitude spectrograms (dB; 512-point frames, floor 60 dB down). */
function logSpectralDistance(a: Float32Array, b: Float32Array): number {
  const n = 512;
  const hop = 128;
  const window = Array.from({ length: n }, (_, t) => 0.5 - 0.5 * Math.cos((2 * Math.PI * t) / n));
  const cos = Array.from({ length: n }, (_, i) => Math.cos((2 * Math.PI * i) / n));
  const sin = Array.from({ length: n }, (_, i) => Math.sin((2 * Math.PI * i) / n));
  const spectrum = (x: Float32Array, at: number): number[] => {
    const out: number[] = [];
    for (let k = 0; k <= n / 2; k++) {
      let re = 0;
      let im = 0;
      for (let t = 0; t < n; t++) {
        const v = (x[at + t] ?? 0) * (window[t] as number);
        re += v * (cos[(k * t) % n] as number);
        im -= v * (sin[(k * t) % n] as number);
      }
      out.push(Math.hypot(re, im));
    }
    return out;
  };
  const frames: [number[], number[]][] = [];
  for (let at = 0; at + n <= b.length; at += hop) frames.push([spectrum(a, at), spectrum(b, at)]);
  const floor = Math.max(...frames.flatMap(([, y]) => y)) * 1e-3;
  let sum = 0;
  let count = 0;
  for (const [x, y] of frames) {
    for (let k = 0; k < x.length; k++) {
      sum += Math.abs(20 * Math.log10(Math.max(x[k] as number, floor)) - 20 * Math.log10(Math.max(y[k] as number, floor)));
      count++;
    }
  }
  return sum / count;
}

describe('kokoro engine against the upstream model', () => {
  const manifest = JSON.parse(fs.readFileSync(path.join(FIXTURES, 'manifest.json'), 'utf8')) as Manifest;
  const cases = manifest.cases.map((c) => ({ ...c, meta: JSON.parse(fs.readFileSync(path.join(FIXTURES, c.name, 'case.json'), 'utf8')) as Case }));
  let model: KokoroModelPaths;
  let native: NativeKokoroModel;
  const inputs = new Map<string, NativeKokoroInput>();
  /** Each case's audio from its own call, without noise (the batch test compares with it). */
  const aloneAudio = new Map<string, Float32Array>();
  const fixture = (name: string, stage: string): Float32Array => floats(path.join(FIXTURES, name, `${stage}.f32`));

  before(async () => {
    model = await kokoroTestModel(manifest.model);
    const sha256 = createHash('sha256').update(fs.readFileSync(model.checkpoint)).digest('hex');
    assert.equal(sha256, manifest.checkpointSha256, 'the fixtures were made from another checkpoint: run scripts/make-kokoro-fixtures.mjs');
    const config = JSON.parse(fs.readFileSync(model.config, 'utf8')) as { plbert: { num_hidden_layers: number; num_attention_heads: number } };
    native = await loadNative().KokoroModel.load({
      checkpoint: model.checkpoint,
      bertLayers: config.plbert.num_hidden_layers,
      bertHeads: config.plbert.num_attention_heads,
    });
    for (const c of cases) {
      const pack = (await loadNative().readTorchTensor(path.join(model.voices, `${c.voice}.pt`), '')).data;
      const row = c.meta.style_row;
      inputs.set(c.name, { ids: Int32Array.from(c.meta.input_ids), style: pack.slice(row * 256, (row + 1) * 256), speed: c.speed, seed: 1, noise: false });
    }
  });

  for (const name of ['short', 'question', 'slow']) {
    it(`${name}: durations exactly, every intermediate within 1e-4, the waveform within 4 dB`, async () => {
      const c = cases.find((x) => x.name === name);
      assert.ok(c);
      const [out] = await native.synthesize([inputs.get(name) as NativeKokoroInput], { stages: true });
      assert.ok(out?.stages);
      assert.deepEqual(Array.from(out.durations), c.meta.durations);
      const stages = ['bert', 'bert_encoder', 'predictor_text_encoder', 'duration_logits', 'text_encoder', 'decoder_in_asr', 'decoder_in_F0', 'decoder_in_N'];
      // the decoder's input is large: only the full case keeps it
      for (const stage of stages.filter((s) => s in c.meta.shapes)) {
        const error = relativeError(out.stages[stage] as Float32Array, fixture(name, stage));
        assert.ok(error < 1e-4, `${stage}: relative error ${error}`);
      }
      aloneAudio.set(name, out.audio);
      const expected = fixture(name, 'audio');
      assert.equal(out.audio.length, expected.length);
      const lsd = logSpectralDistance(out.audio, expected);
      assert.ok(lsd < 4, `log-spectral distance ${lsd.toFixed(2)} dB`);
    });
  }

  it("the generator on upstream's F0 and energy: its source and spectrum, then on upstream's spectrum its output and waveform", async () => {
    const name = 'short';
    const input = inputs.get(name) as NativeKokoroInput;
    const given = { decoder_in_F0: fixture(name, 'decoder_in_F0'), decoder_in_N: fixture(name, 'decoder_in_N') };
    const [fromF0] = await native.synthesize([{ ...input, given }], { stages: true });
    const stages = fromF0?.stages as Record<string, Float32Array>;
    assert.ok(relativeError(stages.generator_source as Float32Array, fixture(name, 'generator_source')) < 1e-6);
    const har = stages.generator_har as Float32Array;
    const expected = fixture(name, 'generator_har');
    const frames = expected.length / 22;
    let largest = 0;
    for (let i = 0; i < 11 * frames; i++) largest = Math.max(largest, expected[i] as number);
    for (let bin = 0; bin < 11; bin++) {
      for (let f = 0; f < frames; f++) {
        const at = bin * frames + f;
        assert.ok(Math.abs((har[at] as number) - (expected[at] as number)) < 1e-5 * largest, `magnitude of bin ${bin} at frame ${f}`);
        if ((expected[at] as number) < 1e-3 * largest) continue; // a vanishing bin's phase is rounding noise
        const d = Math.abs((har[at + 11 * frames] as number) - (expected[at + 11 * frames] as number));
        assert.ok(Math.min(d, 2 * Math.PI - d) < 1e-3, `phase of bin ${bin} at frame ${f}`);
      }
    }
    const [fromSpectrum] = await native.synthesize([{ ...input, given: { ...given, generator_har: expected } }], { stages: true });
    assert.ok(relativeError(fromSpectrum?.stages?.generator_post as Float32Array, fixture(name, 'generator_post')) < 1e-5);
    assert.ok(relativeError(fromSpectrum?.audio as Float32Array, fixture(name, 'audio')) < 1e-5);
  });

  it('a batch of inputs of different lengths, voices and speeds gives each its own audio, noise included', async () => {
    const noisy: NativeKokoroInput = { ...(inputs.get('short') as NativeKokoroInput), noise: true, seed: 7 };
    const [alone] = await native.synthesize([noisy]);
    const together = await native.synthesize([inputs.get('question') as NativeKokoroInput, noisy, inputs.get('slow') as NativeKokoroInput]);
    assert.deepEqual(
      together.map((o) => o.audio),
      [aloneAudio.get('question'), alone?.audio, aloneAudio.get('slow')],
    );
    // the noise is the seed's: another seed, other audio
    const [reseeded] = await native.synthesize([{ ...noisy, seed: 99 }]);
    assert.notDeepEqual(reseeded?.audio, alone?.audio);
  });
});
