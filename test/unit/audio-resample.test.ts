/**
 * The streaming resampler (libswresample in the addon, synchronous): chunk-independent output, lengths, pass-band
 * amplitude and frequency, anti-aliasing, a speech round trip, PCM16 input and argument checks.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { NativeError } from '../../src/native/addon.js';
import { pcm16ToFloat, StreamResampler } from '../../src/services/audio/resample.js';
import { concatSamples } from '../../src/engines/samples.js';
import { JFK_WAV } from '../helpers/paths.js';
import { readWavMono } from '../helpers/wav.js';
import { correlation, rms } from '../helpers/signal.js';

// ---- helpers ----

function sine(freq: number, rate: number, seconds: number, amplitude = 0.5): Float32Array {
  const out = new Float32Array(Math.round(rate * seconds));
  for (let i = 0; i < out.length; i++) out[i] = amplitude * Math.sin((2 * Math.PI * freq * i) / rate);
  return out;
}

/** The middle half: away from the filter's start-up and the flushed tail. */
function middle(samples: Float32Array): Float32Array {
  return samples.subarray(Math.floor(samples.length / 4), Math.floor((3 * samples.length) / 4));
}

/** Frequency from the rate of upward zero crossings. */
function zeroCrossingFrequency(samples: Float32Array, rate: number): number {
  let first = -1;
  let last = -1;
  let count = 0;
  for (let i = 1; i < samples.length; i++) {
    if (samples[i - 1]! < 0 && samples[i]! >= 0) {
      if (first < 0) first = i;
      else count++;
      last = i;
    }
  }
  return (count * rate) / (last - first);
}

function oneShot(input: Float32Array | Int16Array, inRate: number, outRate: number): Float32Array {
  const r = new StreamResampler(inRate, outRate);
  return concatSamples([r.process(input), r.flush()]);
}

function chunked(input: Float32Array, inRate: number, outRate: number, sizes: () => number): Float32Array {
  const r = new StreamResampler(inRate, outRate);
  const parts: Float32Array[] = [];
  for (let at = 0; at < input.length;) {
    const n = Math.min(sizes(), input.length - at);
    parts.push(r.process(input.subarray(at, at + n)));
    at += n;
  }
  parts.push(r.flush());
  return concatSamples(parts);
}

/** A deterministic pseudo-random generator (tests must not flake). */
function lcg(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

function maxAbsDiff(a: Float32Array, b: Float32Array): number {
  assert.equal(a.length, b.length);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i]! - b[i]!));
  return m;
}

const PAIRS: [number, number][] = [
  [24000, 16000],
  [16000, 16000],
  [44100, 16000],
  [8000, 16000],
  [48000, 24000],
];

// ---- tests ----

describe('StreamResampler', () => {
  for (const [inRate, outRate] of PAIRS) {
    describe(`${inRate} -> ${outRate} Hz`, () => {
      // speech-like: a sweep of tones plus noise, 1.3 s (not a whole number of chunks)
      const random = lcg(inRate + outRate);
      const input = new Float32Array(Math.round(inRate * 1.3));
      for (let i = 0; i < input.length; i++) {
        input[i] = 0.3 * Math.sin((2 * Math.PI * 440 * i) / inRate) + 0.2 * Math.sin((2 * Math.PI * 2900 * i) / inRate) + 0.1 * (random() * 2 - 1);
      }
      const whole = oneShot(input, inRate, outRate);

      it('has round(n * out / in) samples in total (±1)', () => {
        const expected = Math.round((input.length * outRate) / inRate);
        assert.ok(Math.abs(whole.length - expected) <= 1, `${whole.length} samples, expected ${expected}`);
      });

      it('gives the same output for 100 ms chunks as in one call', () => {
        const out = chunked(input, inRate, outRate, () => inRate / 10);
        assert.ok(maxAbsDiff(out, whole) <= 1e-6);
      });

      it('gives the same output for random chunk sizes, single samples included', () => {
        const random = lcg(7);
        const out = chunked(input, inRate, outRate, () => (random() < 0.2 ? 1 : 1 + Math.floor(random() * 3000)));
        assert.ok(maxAbsDiff(out, whole) <= 1e-6);
        const ones = chunked(input.subarray(0, Math.floor(inRate / 20)), inRate, outRate, () => 1);
        assert.ok(maxAbsDiff(ones, oneShot(input.subarray(0, Math.floor(inRate / 20)), inRate, outRate)) <= 1e-6);
      });

      it('keeps the amplitude and frequency of a 1 kHz sine', () => {
        const tone = sine(1000, inRate, 1);
        const out = middle(oneShot(tone, inRate, outRate));
        const ratio = rms(out) / rms(middle(tone));
        assert.ok(Math.abs(ratio - 1) < 0.01, `RMS ratio ${ratio}`);
        const freq = zeroCrossingFrequency(out, outRate);
        assert.ok(Math.abs(freq - 1000) < 2, `frequency ${freq} Hz`);
      });

      it('takes Int16Array input exactly as the float path', () => {
        const pcm = new Int16Array(input.length);
        for (let i = 0; i < pcm.length; i++) pcm[i] = Math.max(-32768, Math.min(32767, Math.round(input[i]! * 32768)));
        const asFloat = new Float32Array(pcm.length);
        for (let i = 0; i < pcm.length; i++) asFloat[i] = pcm[i]! / 32768;
        assert.ok(maxAbsDiff(oneShot(pcm, inRate, outRate), oneShot(asFloat, inRate, outRate)) <= 1e-7);
      });
    });
  }

  it('copies through at equal rates', () => {
    const input = sine(440, 16000, 0.1);
    const r = new StreamResampler(16000, 16000);
    assert.deepEqual(r.process(input), input);
    assert.equal(r.flush().length, 0);
  });

  it('attenuates a tone above the output Nyquist rate by at least 40 dB', () => {
    const aboveNyquist: [frequency: number, inRate: number, outRate: number][] = [
      [10000, 24000, 16000],
      [8400, 24000, 16000],
      [12000, 44100, 16000],
      [20000, 48000, 24000],
    ];
    for (const [freq, inRate, outRate] of aboveNyquist) {
      const tone = sine(freq, inRate, 1);
      const out = middle(oneShot(tone, inRate, outRate));
      const db = 20 * Math.log10(rms(out) / rms(middle(tone)));
      console.log(`# ${freq} Hz tone, ${inRate} -> ${outRate} Hz: ${db.toFixed(1)} dB`);
      assert.ok(db <= -40, `${freq} Hz at ${inRate} -> ${outRate}: only ${db.toFixed(1)} dB`);
    }
  });

  it('round-trips speech 16 -> 24 -> 16 kHz (correlation > 0.99)', () => {
    const { sampleRate, samples } = readWavMono(JFK_WAV);
    assert.equal(sampleRate, 16000);
    const up = chunked(samples, 16000, 24000, () => 1600);
    const back = chunked(up, 24000, 16000, () => 2400);
    assert.ok(Math.abs(back.length - samples.length) <= 1);
    const c = correlation(samples, back);
    assert.ok(c > 0.99, `correlation ${c}`);
  });

  it('starts a new stream after flush() and reset()', () => {
    const input = sine(1000, 24000, 0.2);
    const r = new StreamResampler(24000, 16000);
    const first = concatSamples([r.process(input), r.flush()]);
    const second = concatSamples([r.process(input), r.flush()]);
    assert.deepEqual(second, first);
    r.process(sine(300, 24000, 0.05));
    r.reset();
    assert.deepEqual(concatSamples([r.process(input), r.flush()]), first);
  });

  it('turns NaN and infinities into silence', () => {
    const input = sine(1000, 24000, 0.1);
    input[100] = NaN;
    input[200] = Infinity;
    const out = oneShot(input, 24000, 16000);
    assert.ok(out.every((x) => Number.isFinite(x)));
  });

  it('decodes little-endian PCM16 bytes, keeping a sample split between messages', () => {
    const pcm = new Int16Array([0, 1, -1, 32767, -32768, 1234, -4321]);
    const bytes = Buffer.alloc(pcm.length * 2);
    pcm.forEach((v, i) => bytes.writeInt16LE(v, i * 2));
    assert.deepEqual(
      Array.from(pcm16ToFloat(bytes)),
      Array.from(pcm, (v) => v / 32768),
    );
    assert.equal(pcm16ToFloat(bytes.subarray(0, 3)).length, 1);

    const whole = new StreamResampler(16000, 16000).processPcm16(bytes);
    const split = new StreamResampler(16000, 16000);
    const parts = [split.processPcm16(bytes.subarray(0, 3)), split.processPcm16(bytes.subarray(3, 8)), split.processPcm16(bytes.subarray(8))];
    assert.deepEqual(concatSamples(parts), whole);
    assert.deepEqual(
      Array.from(whole),
      Array.from(pcm, (v) => v / 32768),
    );
  });

  it('throws invalid_argument for bad rates and inputs', () => {
    const badRates: [number, number][] = [
      [0, 16000],
      [24000, -1],
      [999, 16000],
      [16000, 384001],
      [24000.5, 16000],
      [NaN, 16000],
    ];
    for (const [inRate, outRate] of badRates) {
      assert.throws(
        () => new StreamResampler(inRate, outRate),
        (e: NativeError) => e.code === 'invalid_argument' && /Rate must be an integer/.test(e.message),
        `${inRate} -> ${outRate}`,
      );
    }
    const r = new StreamResampler(24000, 16000);
    for (const bad of [new Float64Array(4), new Uint8Array(4), [0.1, 0.2], undefined]) {
      assert.throws(
        () => r.process(bad as unknown as Float32Array),
        (e: NativeError) => e.code === 'invalid_argument' && /Float32Array or an Int16Array/.test(e.message),
      );
    }
  });
});
