/**
 * A live Whisper session behind real time: the backlog says how many messages wait, and the streaming session
 * skips the re-decodes in between while more audio waits, decoding once it has caught up.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { pino } from 'pino';
import { RedecodingStreamingSession } from '../../src/engines/redecoding-streaming.js';
import type { SttModel, TranscriptionResult } from '../../src/engines/types.js';
import { Metrics } from '../../src/services/metrics.js';
import { LiveSessions } from '../../src/sessions/live-sessions.js';

/** A model whose every pass "hears" one word per second of the window; counts its passes. */
function countingModel(): { model: SttModel; passes: () => number } {
  let passes = 0;
  const model = {
    id: 'fake',
    task: 'stt',
    engine: 'fake',
    sampleRate: 16000,
    capabilities: { translate: false, wordTimestamps: false, languages: ['en'], vadChunking: false },
    async transcribe(samples: Float32Array): Promise<TranscriptionResult> {
      passes++;
      const text = Array.from({ length: Math.floor(samples.length / 16000) }, (_, i) => `w${i}`).join(' ');
      return { text, language: 'en', duration: samples.length / 16000, segments: [] };
    },
    async createStreamingSession() {
      throw new Error('unused');
    },
    async dispose() {},
  } as unknown as SttModel;
  return { model, passes: () => passes };
}

describe('a live Whisper session behind real time', () => {
  it('counts the messages waiting behind the one being handled', async () => {
    const sessions = new LiveSessions({ maxSessions: 1, idleTimeoutSeconds: 0 }, new Metrics(), pino({ level: 'silent' }));
    const backlog = sessions.backlog('/test', 's1', { onError: () => undefined, onIdle: () => undefined });
    const seen: number[] = [];
    for (let i = 0; i < 3; i++) backlog.push(1, async () => void seen.push(backlog.waitingMessages));
    await backlog.dispose();
    assert.deepEqual(seen, [2, 1, 0]);
  });

  it('skips the passes in between while more audio waits, and decodes once it has caught up', async () => {
    const { model, passes } = countingModel();
    const second = new Float32Array(16000);
    const onTime = new RedecodingStreamingSession(model, { delayMs: 1000 });
    for (let i = 0; i < 5; i++) await onTime.feed(second);
    assert.equal(passes(), 5, 'on time: one pass per second of audio');

    const { model: lateModel, passes: latePasses } = countingModel();
    const behind = new RedecodingStreamingSession(lateModel, { delayMs: 1000 });
    for (let i = 0; i < 4; i++) assert.equal(await behind.feed(second, undefined, true), '');
    assert.equal(latePasses(), 0, 'no pass while more audio waits');
    await behind.feed(second, undefined, false);
    assert.equal(latePasses(), 1, 'one pass over the whole window once caught up');
    const { transcript } = await behind.finish();
    assert.equal(transcript, 'w0 w1 w2 w3 w4');
  });

  it('commits a window of one segment whole once it is past its length, and starts a new one', async () => {
    const heard: number[] = [];
    const model = {
      ...countingModel().model,
      // one segment per pass, as an audio language model gives: a word per second of the window
      async transcribe(samples: Float32Array): Promise<TranscriptionResult> {
        heard.push(samples.length / 16000);
        const text = Array.from({ length: Math.floor(samples.length / 16000) }, (_, i) => `w${i}`).join(' ');
        const segment = {
          id: 0,
          start: 0,
          end: samples.length / 16000,
          text: ` ${text}`,
          tokens: [],
          temperature: 0,
          avgLogprob: 0,
          compressionRatio: 1,
          noSpeechProb: 0,
        };
        return { text, language: 'en', duration: samples.length / 16000, segments: [segment] };
      },
    } as SttModel;
    const session = new RedecodingStreamingSession(model, { delayMs: 1000 }, 4, { commitWhole: true });
    let deltas = '';
    for (let i = 0; i < 7; i++) deltas += await session.feed(new Float32Array(16000));
    const { delta, transcript } = await session.finish();
    deltas += delta;
    assert.deepEqual(heard, [1, 2, 3, 4, 5, 1, 2, 2], 'the window restarts after the 5 s pass that passed 4 s; finish decodes it once more');
    assert.equal(transcript, 'w0 w1 w2 w3 w4 w0 w1');
    assert.equal(deltas, transcript);
  });
});
