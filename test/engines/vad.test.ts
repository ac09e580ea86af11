import assert from 'node:assert/strict';
import { describe, it, before } from 'node:test';
import { sileroVadEngine } from '../../src/engines/silero-vad.js';
import type { VadModel } from '../../src/engines/types.js';
import { JFK_WAV, SILERO_V5, SILERO_V6 } from '../helpers/paths.js';
import { readWavMono } from '../helpers/wav.js';

// whisper.cpp's VAD with ggml-silero-v6.2.0.bin on jfk.wav (../shared/models/README.md)
const JFK_SEGMENTS = [
  [0.32, 2.27],
  [3.27, 4.41],
  [5.38, 7.68],
  [8.16, 10.62],
];

describe('Silero VAD engine', () => {
  let model: VadModel;
  const { sampleRate, samples } = readWavMono(JFK_WAV);

  before(async () => {
    assert.equal(sampleRate, 16000);
    model = await sileroVadEngine.load({ id: 'silero', path: SILERO_V6, projector: null });
  });

  it('detects the ggml Silero format from the file content', async () => {
    assert.equal(await sileroVadEngine.detect(SILERO_V6), true);
    assert.equal(await sileroVadEngine.detect(SILERO_V5), true);
    assert.equal(await sileroVadEngine.detect(JFK_WAV), false);
    assert.equal(await sileroVadEngine.detect('/nonexistent/file.bin'), false);
  });

  it('finds the four speech segments of jfk.wav within 50 ms', async () => {
    const segments = await model.segments(samples);
    assert.equal(segments.length, JFK_SEGMENTS.length, JSON.stringify(segments));
    segments.forEach((segment, i) => {
      const [start, end] = JFK_SEGMENTS[i] as [number, number];
      assert.ok(Math.abs(segment.start - start) <= 0.05, `segment ${i} start ${segment.start} vs ${start}`);
      assert.ok(Math.abs(segment.end - end) <= 0.05, `segment ${i} end ${segment.end} vs ${end}`);
    });
  });

  it('runs concurrent whole-clip detections with identical results', async () => {
    const runs = await Promise.all(Array.from({ length: 6 }, () => model.segments(samples)));
    for (const run of runs) assert.deepEqual(run, runs[0]);
  });

  it('streams one probability per 512-sample frame, carrying state across calls of any size', async () => {
    const oneShot = await model.openStream();
    const whole = await oneShot.process(samples);
    await oneShot.close();
    assert.equal(whole.length, Math.floor(samples.length / 512));

    const stream = await model.openStream();
    const pieces: number[] = [];
    const sizes = [1, 100, 511, 512, 513, 1600, 4096, 7];
    for (let offset = 0, i = 0; offset < samples.length; i++) {
      const size = sizes[i % sizes.length] as number;
      pieces.push(...(await stream.process(samples.subarray(offset, offset + size))));
      offset += size;
    }
    assert.equal(pieces.length, whole.length);
    pieces.forEach((p, i) => assert.ok(Math.abs(p - (whole[i] as number)) < 1e-5, `frame ${i}: ${p} vs ${whole[i]}`));

    // speech frames are where the segments say
    const frameAt = (seconds: number): number => Math.floor((seconds * 16000) / 512);
    assert.ok((whole[frameAt(1.0)] as number) > 0.5, 'speech at 1.0 s');
    assert.ok((whole[frameAt(0.1)] as number) < 0.5, 'silence at 0.1 s');

    // reset clears the carried state: the same audio gives the same probabilities again
    await stream.reset();
    const again = await stream.process(samples.subarray(0, 512 * 20));
    again.forEach((p, i) => assert.ok(Math.abs(p - (whole[i] as number)) < 1e-5));
    await stream.close();
    await assert.rejects(stream.process(samples.subarray(0, 512)), /closed/);
  });

  it('keeps streams independent', async () => {
    const [a, b] = await Promise.all([model.openStream(), model.openStream()]);
    const [pa, pb] = await Promise.all([a.process(samples), b.process(samples)]);
    assert.deepEqual(Array.from(pa), Array.from(pb));
    await Promise.all([a.close(), b.close()]);
  });

  it('stops before work when the signal is already aborted', async () => {
    const controller = new AbortController();
    controller.abort();
    await assert.rejects(model.segments(samples, {}, controller.signal), (error: Error & { code?: string }) => error.code === 'aborted');
  });

  it('rejects a file that is not a VAD model with a coded error', async () => {
    await assert.rejects(sileroVadEngine.load({ id: 'bad', path: JFK_WAV, projector: null }), (error: Error & { code?: string }) => {
      return error.code === 'model_load_failed' && /Silero VAD/.test(error.message);
    });
  });
});
