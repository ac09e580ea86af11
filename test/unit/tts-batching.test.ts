/**
 * The three TTS paths (continuous batching, fixed-window batching, serial; docs/architecture.md), proven with
 * engine doubles: each double records the calls the synthesizer makes, and its audio encodes the request so
 * every result can be checked to belong to its request.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type { SynthesisOptions, SynthesisRequest, TtsBatchSession, TtsModel } from '../../src/engines/types.js';
import { ApiError } from '../../src/errors.js';
import { Metrics } from '../../src/services/metrics.js';
import { AbortedError, Scheduler } from '../../src/services/scheduler.js';
import { Synthesizer, type SpeakOptions } from '../../src/services/tts/synthesizer.js';

/** Audio that names its request: one sample per character, each the character's code. */
function audioOf(request: SynthesisRequest): Float32Array {
  return Float32Array.from(request.text, (c) => c.charCodeAt(0));
}

function textOf(samples: Float32Array): string {
  return String.fromCharCode(...samples);
}

function request(text: string, voice = 'a'): SynthesisRequest {
  return { text, voice, speed: 1 };
}

/** A model with neither batching hook: the serial path. */
class SerialDouble implements TtsModel {
  readonly task = 'tts' as const;
  readonly engine = 'double';
  readonly sampleRate = 16000;
  readonly voices = [
    { id: 'a', name: 'A' },
    { id: 'b', name: 'B' },
  ];
  readonly defaultVoice = 'a';
  readonly capabilities = { cloning: false, instructions: false, sampling: false, languages: null };
  readonly calls: string[] = [];
  constructor(
    readonly id: string,
    readonly concurrency = 1,
  ) {}
  async synthesize(req: SynthesisRequest, options: SynthesisOptions = {}): Promise<Float32Array> {
    this.calls.push(req.text);
    const audio = audioOf(req);
    for (let i = 0; i < audio.length; i++) {
      await sleep(1);
      if (options.signal?.aborted) throw new AbortedError();
      options.onAudio?.(audio.subarray(i, i + 1));
    }
    return audio;
  }
  async dispose(): Promise<void> {}
}

/** A model with a batch call: the fixed-window path. */
class FixedWindowDouble extends SerialDouble {
  readonly batches: string[][] = [];
  async synthesizeBatch(requests: SynthesisRequest[]): Promise<Float32Array[]> {
    this.batches.push(requests.map((r) => r.text));
    await sleep(20);
    return requests.map(audioOf);
  }
}

/** A model with a batch session whose step produces one character of every active request. */
class ContinuousDouble extends SerialDouble {
  readonly steps: string[][] = [];
  readonly cancelled: string[] = [];
  sessionsOpened = 0;
  sessionsClosed = 0;
  supportsBatchSession(req: SynthesisRequest): boolean {
    return req.voice !== 'b'; // a request the hook does not take goes another way
  }
  createBatchSession(maxBatchSize: number): TtsBatchSession {
    this.sessionsOpened++;
    const slots = new Map<number, { req: SynthesisRequest; done: number }>();
    let next = 0;
    return {
      add: (req) => {
        assert.ok(slots.size < maxBatchSize, 'never more than the batch size');
        slots.set(next, { req, done: 0 });
        return next++;
      },
      cancel: (slot) => {
        this.cancelled.push(slots.get(slot)?.req.text ?? '?');
        slots.delete(slot);
      },
      step: async () => {
        await sleep(2);
        this.steps.push([...slots.values()].map((s) => s.req.text));
        const finished: { slot: number; samples: Float32Array }[] = [];
        for (const [slot, state] of slots) {
          if (++state.done >= state.req.text.length) {
            slots.delete(slot);
            finished.push({ slot, samples: audioOf(state.req) });
          }
        }
        return finished;
      },
      get active() {
        return slots.size;
      },
      close: async () => {
        this.sessionsClosed++;
      },
    };
  }
}

function synthesizer(maxBatchSize = 8, metrics = new Metrics(), jobTimeoutMs = 0): Synthesizer {
  return new Synthesizer({ scheduler: new Scheduler({ maxQueue: 64, concurrency: 4, metrics, jobTimeoutMs }), metrics, maxBatchSize });
}

/** One request of one piece, as the speech route sends a one-sentence input. */
async function speakOne(synth: Synthesizer, model: TtsModel, piece: SynthesisRequest, options: SpeakOptions = {}): Promise<Float32Array> {
  const [samples] = await synth.speak(model, [piece], options);
  return samples as Float32Array;
}

describe('TTS paths: continuous, fixed-window, serial', () => {
  it('serial: one request per call, the audio streamed to onAudio as it comes', async () => {
    const model = new SerialDouble('serial');
    const synth = synthesizer();
    assert.equal(synth.pathFor(model, request('x'), false), 'serial');
    const streamed: number[] = [];
    const results = await Promise.all(['one', 'two', 'three'].map((t) => speakOne(synth, model, request(t), { onAudio: (a) => streamed.push(...a) })));
    assert.deepEqual(results.map(textOf), ['one', 'two', 'three']);
    assert.deepEqual(model.calls, ['one', 'two', 'three']);
    assert.equal(String.fromCharCode(...streamed), 'onetwothree', 'concurrency 1: one after the other');
  });

  it('fixed-window: requests queued while the model is busy share one call, grouped by settings, up to the batch size', async () => {
    const model = new FixedWindowDouble('fixed');
    const metrics = new Metrics();
    const synth = synthesizer(3, metrics);
    assert.equal(synth.pathFor(model, request('x'), false), 'fixed-window');
    const texts = ['head', 'a1', 'a2', 'b1', 'a3', 'a4', 'b2'];
    const results = await Promise.all(texts.map((t) => speakOne(synth, model, request(t, t.startsWith('b') ? 'b' : 'a'))));
    assert.deepEqual(results.map(textOf), texts, 'every result belongs to its request');
    // 'head' runs alone; while it runs the rest queue up; then each free slot takes the oldest request and its
    // compatible companions, at most 3 per call
    assert.deepEqual(model.batches, [['head'], ['a1', 'a2', 'a3'], ['b1', 'b2'], ['a4']]);
    assert.match(metrics.render(), /voxd_tts_batch_size_count\{model="fixed",path="fixed-window"\} 4/);
  });

  it('continuous: requests join a running session between steps and leave it as they finish', async () => {
    const model = new ContinuousDouble('continuous');
    const metrics = new Metrics();
    const synth = synthesizer(2, metrics);
    assert.equal(synth.pathFor(model, request('x'), false), 'continuous');
    const long = speakOne(synth, model, request('a long request'));
    await sleep(8); // a few steps in
    const short = speakOne(synth, model, request('hi'));
    const third = speakOne(synth, model, request('yes')); // waits: the batch size is 2
    const order: string[] = [];
    await Promise.all([long, short, third].map((p) => p.then((audio) => order.push(textOf(audio)))));
    assert.deepEqual(order, ['hi', 'yes', 'a long request'], 'short requests joined and finished before the long one');
    assert.ok(
      model.steps.every((s) => s.length <= 2),
      'never more than the batch size',
    );
    assert.ok(
      model.steps.some((s) => s.includes('a long request') && s.includes('hi')),
      'the second request joined the running session',
    );
    assert.equal(model.sessionsOpened, 1, 'one session served all three');
    assert.equal(model.sessionsClosed, 1);
    assert.match(metrics.render(), /voxd_tts_batch_join_wait_seconds_count\{model="continuous"\} 3/);
  });

  it('continuous: a request whose client leaves is cancelled in the session, the others go on', async () => {
    const model = new ContinuousDouble('continuous');
    const synth = synthesizer();
    const controller = new AbortController();
    const gone = speakOne(synth, model, request('a request nobody waits for'), { signal: controller.signal });
    const kept = speakOne(synth, model, request('kept for sure'));
    await sleep(6);
    controller.abort();
    await assert.rejects(gone, AbortedError);
    assert.equal(textOf(await kept), 'kept for sure');
    assert.deepEqual(model.cancelled, ['a request nobody waits for']);
  });

  it('continuous: a request in the session longer than a job may run is taken out with 504 job_timeout, the others go on', async () => {
    const model = new ContinuousDouble('continuous');
    const metrics = new Metrics();
    const synth = synthesizer(8, metrics, 60);
    // a step makes one character every 2 ms or more: 400 characters take far longer than 60 ms, 3 far less
    const runaway = speakOne(synth, model, request('x'.repeat(400)));
    const quick = speakOne(synth, model, request('yes'));
    await assert.rejects(runaway, (error: unknown) => error instanceof ApiError && error.code === 'job_timeout' && error.status === 504);
    assert.equal(textOf(await quick), 'yes');
    assert.deepEqual(model.cancelled, ['x'.repeat(400)], 'its sequence was freed in the session');
    assert.match(metrics.render(), /voxd_jobs_total\{model="continuous",outcome="timeout"\} 1/);
  });

  it('streaming requests and requests the hook does not support take the other paths', async () => {
    const model = new ContinuousDouble('continuous');
    const synth = synthesizer();
    assert.equal(synth.pathFor(model, request('x'), true), 'serial');
    assert.equal(synth.pathFor(model, request('x', 'b'), false), 'serial');
    const streamed: number[] = [];
    assert.equal(textOf(await speakOne(synth, model, request('streamed'), { onAudio: (a) => streamed.push(...a) })), 'streamed');
    assert.equal(String.fromCharCode(...streamed), 'streamed');
    assert.equal(model.sessionsOpened, 0);
    assert.deepEqual(model.calls, ['streamed']);
  });
});
