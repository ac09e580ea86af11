/**
 * The built-in separator `spectral` (native STFT masks): separation quality on mixtures built here from
 * ../shared/audio with known gains, complements, shapes and rates, block joins, abort, bad arguments and the
 * description matcher.
 *
 * Quality is plain SDR = 10·log10(‖s‖² / ‖s − ŝ‖²) of an estimate ŝ against the true stem s, over all channels
 * and samples, without the scale-invariant projection: a target that is too quiet or too loud is penalised. The
 * unprocessed mixture scores the stem-to-rest ratio, so "target ≥ mixture + 3 dB" means the separator removed a
 * real part of the interference.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { before, describe, it } from 'node:test';
import { decodeAudioNative } from '../../src/services/audio/decode.js';
import { loadSeparatorModel, SEPARATOR_ENGINE, SEPARATOR_MODEL_ID } from '../../src/engines/separator.js';
import type { SeparationTarget, SeparatorModel } from '../../src/engines/types.js';
import type { NativeSeparationMethod } from '../../src/native/addon.js';
import { loadNative } from '../../src/native/load.js';
import { StreamResampler } from '../../src/services/audio/resample.js';
import { nativeRejection } from '../helpers/native.js';
import { SHARED } from '../helpers/paths.js';
import { readWavMono } from '../helpers/wav.js';

const RATE = 44100;
const MUSIC = path.join(SHARED, 'audio', 'music');
const SPEECH = path.join(SHARED, 'audio', 'speech');
const LOOPS = ['loop_amen', 'ambi_piano', 'bass_woodsy_c', 'loop_tabla'] as const;
/** Speech sits this far below the loop (RMS), voice buried in music: the case a separator is for. */
const SPEECH_TO_LOOP_DB = -3;
/** Drums and piano at equal RMS. */
const DRUMS_TO_PIANO_DB = 0;

// ---- helpers ----

function energy(channels: Float32Array[]): number {
  let sum = 0;
  for (const c of channels) for (const x of c) sum += x * x;
  return sum;
}

/** Plain SDR in dB (see the file comment). */
function sdr(stem: Float32Array[], estimate: Float32Array[]): number {
  let error = 0;
  stem.forEach((s, c) => {
    const e = estimate[c]!;
    for (let i = 0; i < s.length; i++) error += (s[i]! - e[i]!) ** 2;
  });
  return 10 * Math.log10(energy(stem) / error);
}

function scaled(channels: Float32Array[], gain: number): Float32Array[] {
  return channels.map((c) => c.map((x) => x * gain));
}

function sum(a: Float32Array[], b: Float32Array[]): Float32Array[] {
  return a.map((c, i) => c.map((x, j) => x + b[i]![j]!));
}

/** `loop` repeated to `n` samples. */
function tile(loop: Float32Array, n: number): Float32Array {
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = loop[i % loop.length]!;
  return out;
}

/** `background` scaled so that the stem is `db` above it (RMS over all channels). */
function atLevel(stem: Float32Array[], background: Float32Array[], db: number): Float32Array[] {
  return scaled(background, Math.sqrt(energy(stem) / energy(background)) * 10 ** (-db / 20));
}

async function loopAt44k(name: string): Promise<Float32Array> {
  const decoded = await decodeAudioNative(fs.readFileSync(path.join(MUSIC, `${name}.flac`)), { sampleRate: RATE });
  return decoded.samples;
}

function speechAt44k(file: string): Float32Array {
  const wav = readWavMono(path.join(SPEECH, file));
  const resampler = new StreamResampler(wav.sampleRate, RATE);
  const head = resampler.process(wav.samples);
  const tail = resampler.flush();
  const out = new Float32Array(head.length + tail.length);
  out.set(head);
  out.set(tail, head.length);
  return out;
}

/** A second channel of `x`: a little quieter and one sample later, as a near-centre stereo source. */
function otherSide(x: Float32Array, gain: number, delay: number): Float32Array {
  const out = new Float32Array(x.length);
  for (let i = delay; i < x.length; i++) out[i] = gain * x[i - delay]!;
  return out;
}

function sine(freq: number, rate: number, seconds: number, amplitude = 0.5): Float32Array {
  const out = new Float32Array(Math.round(rate * seconds));
  for (let i = 0; i < out.length; i++) out[i] = amplitude * Math.sin((2 * Math.PI * freq * i) / rate);
  return out;
}

function noise(n: number, seed: number): Float32Array {
  let state = seed >>> 0 || 1;
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    out[i] = ((state >>> 0) / 4294967296 - 0.5) * 0.5;
  }
  return out;
}

function separate(channels: Float32Array[], sampleRate: number, method: NativeSeparationMethod): Promise<Float32Array[]> {
  return loadNative().separate(channels, { sampleRate, method });
}

function maxAbsDiff(a: Float32Array, b: Float32Array): number {
  let max = 0;
  for (let i = 0; i < a.length; i++) max = Math.max(max, Math.abs(a[i]! - b[i]!));
  return max;
}

function targetNamed(model: SeparatorModel, name: string): SeparationTarget {
  const target = model.targets.find((t) => t.name === name);
  assert.ok(target, `no target ${name}`);
  return target;
}

async function report(label: string, stem: Float32Array[], mixture: Float32Array[], estimate: Float32Array[]): Promise<void> {
  const mixtureSdr = sdr(stem, mixture);
  const targetSdr = sdr(stem, estimate);
  console.log(`# ${label}: mixture SDR ${mixtureSdr.toFixed(2)} dB, target SDR ${targetSdr.toFixed(2)} dB (+${(targetSdr - mixtureSdr).toFixed(2)})`);
  assert.ok(targetSdr >= mixtureSdr + 3, `${label}: target ${targetSdr.toFixed(2)} dB is not 3 dB above the mixture's ${mixtureSdr.toFixed(2)} dB`);
}

// ---- tests ----

describe('separator: quality on known mixtures', () => {
  let model: SeparatorModel;
  const loops = new Map<string, Float32Array>();
  let speech: Float32Array;

  before(async () => {
    model = await loadSeparatorModel(SEPARATOR_MODEL_ID);
    for (const name of LOOPS) loops.set(name, await loopAt44k(name));
    speech = speechAt44k('librivox-0870.wav');
  });

  for (const loop of LOOPS) {
    it(`speech over ${loop} (mono, speech ${SPEECH_TO_LOOP_DB} dB): the voice target beats the mixture by 3 dB`, async () => {
      const stem = [speech];
      const background = atLevel(stem, [tile(loops.get(loop)!, speech.length)], SPEECH_TO_LOOP_DB);
      const mixture = sum(stem, background);
      const target = await model.separate({ channels: mixture, sampleRate: RATE }, targetNamed(model, 'voice'));
      await report(`voice / ${loop} mono`, stem, mixture, target);
    });
  }

  it('speech over loop_amen (stereo, near-centre loop): the voice target beats the mixture by 3 dB', async () => {
    const loop = tile(loops.get('loop_amen')!, speech.length);
    const stem = [speech, speech];
    const background = atLevel(stem, [loop, otherSide(loop, 0.9, 1)], SPEECH_TO_LOOP_DB);
    const mixture = sum(stem, background);
    const target = await model.separate({ channels: mixture, sampleRate: RATE }, targetNamed(model, 'voice'));
    await report('voice / loop_amen stereo', stem, mixture, target);
  });

  it(`drums over piano (mono, drums ${DRUMS_TO_PIANO_DB} dB): the percussive target beats the mixture by 3 dB`, async () => {
    const n = 8 * RATE;
    const stem = [tile(loops.get('loop_amen')!, n)];
    const background = atLevel(stem, [tile(loops.get('ambi_piano')!, n)], DRUMS_TO_PIANO_DB);
    const mixture = sum(stem, background);
    const target = await model.separate({ channels: mixture, sampleRate: RATE }, targetNamed(model, 'percussive'));
    await report('percussive / amen over piano mono', stem, mixture, target);
  });

  it('drums over piano (stereo): the percussive target beats the mixture by 3 dB', async () => {
    const n = 8 * RATE;
    const drums = tile(loops.get('loop_amen')!, n);
    const piano = tile(loops.get('ambi_piano')!, n);
    const stem = [drums, otherSide(drums, 0.8, 0)];
    const background = atLevel(stem, [otherSide(piano, 0.8, 0), piano], DRUMS_TO_PIANO_DB);
    const mixture = sum(stem, background);
    const target = await model.separate({ channels: mixture, sampleRate: RATE }, targetNamed(model, 'percussive'));
    await report('percussive / amen over piano stereo', stem, mixture, target);
  });
});

describe('separator: shapes, rates and complements', () => {
  const methods: NativeSeparationMethod[] = ['percussive', 'harmonic', 'voice', 'accompaniment', 'bass'];

  for (const rate of [8000, 16000, 48000]) {
    for (const channels of [1, 2]) {
      it(`${rate} Hz, ${channels} channel(s): every method returns the input's channels and length`, async () => {
        const n = Math.round(rate * 2.3) + 7; // not a whole number of hops
        const input = Array.from({ length: channels }, (_, c) => noise(n, 11 + c));
        for (const method of methods) {
          const out = await separate(input, rate, method);
          assert.equal(out.length, channels, method);
          for (const c of out) {
            assert.ok(c instanceof Float32Array, method);
            assert.equal(c.length, n, method);
            assert.ok(c.every(Number.isFinite), `${method}: non-finite output`);
          }
        }
      });
    }
  }

  it('voice + accompaniment and percussive + harmonic reconstruct the input to float precision', async () => {
    const speech = speechAt44k('librivox-0890.wav');
    const loop = tile(await loopAt44k('loop_tabla'), speech.length);
    const input = [speech.map((x, i) => x + loop[i]!), speech.map((x, i) => 0.8 * x + 0.6 * loop[i]!)];
    for (const [a, b] of [
      ['voice', 'accompaniment'],
      ['percussive', 'harmonic'],
    ] as const) {
      const [ta, tb] = await Promise.all([separate(input, RATE, a), separate(input, RATE, b)]);
      const rebuilt = ta.map((c, i) => c.map((x, j) => x + tb[i]![j]!));
      const snr = 10 * Math.log10(energy(input) / energy(input.map((c, i) => c.map((x, j) => x - rebuilt[i]![j]!))));
      console.log(`# ${a} + ${b}: reconstruction SNR ${snr.toFixed(1)} dB`);
      assert.ok(snr >= 100, `${a} + ${b}: reconstruction SNR ${snr.toFixed(1)} dB`);
    }
  });

  it('a short input (shorter than one frame) and an empty one', async () => {
    const tiny = noise(100, 3);
    for (const method of methods) {
      const [out] = await separate([tiny], 16000, method);
      assert.equal(out!.length, 100);
      const [empty] = await separate([new Float32Array(0)], 16000, method);
      assert.equal(empty!.length, 0);
    }
  });

  it('60 s processed in blocks: a steady tone passes the harmonic target without a step at the block joins', async () => {
    const tone = sine(440, RATE, 60, 0.5);
    const [out] = await separate([tone], RATE, 'harmonic');
    // error per 50 ms window, away from the file's ends; block joins lie every ~12 s
    const win = Math.round(0.05 * RATE);
    let worst = 0;
    let typical = 0;
    let count = 0;
    for (let start = RATE; start + win <= tone.length - RATE; start += win) {
      const a = tone.subarray(start, start + win);
      const b = out!.subarray(start, start + win);
      const err = maxAbsDiff(a, b);
      worst = Math.max(worst, err);
      typical += err;
      count++;
    }
    typical /= count;
    console.log(`# steady tone through 60 s of blocks: max error ${worst.toExponential(2)}, mean window max ${typical.toExponential(2)}`);
    assert.ok(worst < 0.01, `error ${worst} at some window (tone amplitude 0.5)`);
    assert.ok(worst < typical * 3 + 1e-6, `a window stands out: ${worst} against a typical ${typical}`);
  });
});

describe('separator: abort and arguments', () => {
  it('an aborted flag rejects with `aborted`', async () => {
    const native = loadNative();
    const flag = new native.AbortFlag();
    flag.abort();
    const error = await nativeRejection(native.separate([noise(RATE * 5, 1)], { sampleRate: RATE, method: 'voice' }, flag));
    assert.equal(error.code, 'aborted');
  });

  it('an AbortSignal fired while the job runs rejects it with `aborted`', async () => {
    const model = await loadSeparatorModel(SEPARATOR_MODEL_ID);
    const controller = new AbortController();
    const job = model.separate({ channels: [noise(RATE * 60, 2)], sampleRate: RATE }, targetNamed(model, 'voice'), controller.signal);
    controller.abort();
    const error = await nativeRejection(job);
    assert.equal(error.code, 'aborted');
  });

  it('bad arguments are `invalid_argument`', async () => {
    const native = loadNative();
    const ok = noise(1000, 5);
    const cases: [unknown, unknown, unknown?][] = [
      [[], { sampleRate: RATE, method: 'voice' }],
      [[ok, ok, ok], { sampleRate: RATE, method: 'voice' }],
      [[ok, noise(999, 6)], { sampleRate: RATE, method: 'voice' }],
      [[new Float64Array(10)], { sampleRate: RATE, method: 'voice' }],
      [ok, { sampleRate: RATE, method: 'voice' }],
      [[ok], { sampleRate: 7999, method: 'voice' }],
      [[ok], { sampleRate: 192001, method: 'voice' }],
      [[ok], { sampleRate: 44100.5, method: 'voice' }],
      [[ok], { sampleRate: RATE, method: 'vocals' }],
      [[ok], { sampleRate: RATE }],
      [[ok], null],
      [[ok], { sampleRate: RATE, method: 'voice' }, {}],
    ];
    const separateAny = native.separate as (...args: unknown[]) => Promise<Float32Array[]>;
    for (const args of cases) {
      let error: unknown;
      try {
        await separateAny(...args);
      } catch (e) {
        error = e;
      }
      assert.equal((error as { code?: string } | undefined)?.code, 'invalid_argument', `accepted ${String(args[1] && JSON.stringify(args[1]))}`);
    }
  });

  it('NaN and infinite samples are silence', async () => {
    const input = noise(RATE, 9);
    input[100] = Number.NaN;
    input[200] = Number.POSITIVE_INFINITY;
    const [out] = await separate([input], RATE, 'voice');
    assert.ok(out!.every(Number.isFinite));
  });
});

describe('separator: the model and description matching', () => {
  let model: SeparatorModel;
  before(async () => {
    model = await loadSeparatorModel(SEPARATOR_MODEL_ID);
  });

  it('is the built-in spectral model', () => {
    assert.equal(model.id, 'spectral');
    assert.equal(model.task, 'separation');
    assert.equal(model.engine, SEPARATOR_ENGINE);
    assert.deepEqual(model.targets.map((t) => t.name).sort(), ['accompaniment', 'bass', 'harmonic', 'percussive', 'voice']);
    for (const t of model.targets) assert.ok(t.method.length > 20 && t.synonyms.length > 0, t.name);
  });

  const cases: [string, string | null][] = [
    ['drums', 'percussive'],
    ['Drum', 'percussive'],
    ['the drums', 'percussive'],
    ['PERCUSSION', 'percussive'],
    ['beats', 'percussive'],
    ['hits', 'percussive'],
    ['drum kit', 'percussive'],
    ['hi-hats', 'percussive'],
    ['bass drum', 'percussive'],
    ['speech', 'voice'],
    ['Vocals', 'voice'],
    ['lead vocals', 'voice'],
    ['background vocals', 'voice'],
    ['the singer', 'voice'],
    ['singing', 'voice'],
    ['dialogue', 'voice'],
    ['speakers', 'voice'],
    ['a man speaking', 'voice'],
    ['piano', 'harmonic'],
    ['guitars', 'harmonic'],
    ['strings', 'harmonic'],
    ['the melody', 'harmonic'],
    ['melodies', 'harmonic'],
    ['instruments', 'harmonic'],
    ['music', 'accompaniment'],
    ['background music', 'accompaniment'],
    ['Instrumental', 'accompaniment'],
    ['backing track', 'accompaniment'],
    ['accompaniment', 'accompaniment'],
    ['bass', 'bass'],
    ['the bassline', 'bass'],
    ['bass guitar', 'bass'],
    ['basses', 'bass'],
    ['a cat meowing', null],
    ['', null],
    ['   ', null],
  ];
  for (const [description, name] of cases) {
    it(`match(${JSON.stringify(description)}) is ${name ?? 'null'}`, () => {
      assert.equal(model.match(description)?.name ?? null, name);
    });
  }
});
