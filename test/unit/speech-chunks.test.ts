/**
 * Long uploads cut at the VAD's pauses (src/services/stt/speech-chunks.ts): on an engine that batches an upload's
 * chunks they are all transcribed at once, and whatever order they finish in, their text and segments are reported
 * in the clip's order, with ids in sequence and times on the clip's timeline.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { SpeechSegment, SttModel, TranscribeOptions, TranscriptionResult, VadModel } from '../../src/engines/types.js';
import { transcribeSpeechChunks } from '../../src/services/stt/speech-chunks.js';

const RATE = 16000;

/** Speech from 0-20 s, 40-60 s and 80-100 s: three chunks of at most 30 s. */
const vad = {
  async segments(): Promise<SpeechSegment[]> {
    return [
      { start: 0, end: 20 },
      { start: 40, end: 60 },
      { start: 80, end: 100 },
    ];
  },
} as unknown as VadModel;

/**
 * Transcribes a chunk as "c<length>-<start second>", streaming it in two pieces; the later a chunk, the sooner it
 * finishes. Decodes `batchSize` at once; a chunk starting at `failAt` seconds fails.
 */
function reverseFinishingModel(batchSize: number, failAt: number | null = null): { model: SttModel; running: () => number; aborted: () => number } {
  let aborted = 0;
  let running = 0;
  let most = 0;
  const model = {
    id: 'fake',
    engine: 'fake',
    sampleRate: RATE,
    batchSize,
    capabilities: { translate: false, wordTimestamps: false, languages: null, vadChunking: true, batchedChunks: true, streamsText: true },
    async transcribe(samples: Float32Array, options: TranscribeOptions): Promise<TranscriptionResult> {
      running++;
      most = Math.max(most, running);
      const length = samples.length / RATE;
      const name = `c${Math.round(length)}-${samples.byteOffset / 4 / RATE}`;
      options.onText?.(' c');
      const start = samples.byteOffset / 4 / RATE;
      await new Promise((resolve) => setTimeout(resolve, 300 - start));
      if (start === failAt) {
        running--;
        throw new Error('this chunk fails');
      }
      if (options.signal?.aborted) {
        aborted++;
        running--;
        throw options.signal.reason;
      }
      options.onText?.(name.slice(1));
      const segment = { id: 0, start: 0, end: length, text: ` ${name}`, tokens: [], temperature: 0, avgLogprob: 0, compressionRatio: 1, noSpeechProb: 0 };
      options.onSegment?.(segment, 'en');
      running--;
      return { text: name, language: 'en', duration: length, segments: [segment] };
    },
  } as unknown as SttModel;
  return { model, running: () => most, aborted: () => aborted };
}

describe('an upload cut at pauses, on an engine that batches its chunks', () => {
  it('transcribes the chunks at once and reports them in the clip’s order', async () => {
    const { model, running } = reverseFinishingModel(3);
    const events: string[] = [];
    const result = await transcribeSpeechChunks(model, vad, new Float32Array(110 * RATE), {
      onText: (delta) => events.push(`text${delta}`),
      onSegment: (segment) => events.push(`segment ${segment.id} ${segment.start.toFixed(1)}-${segment.end.toFixed(1)}${segment.text}`),
    });
    assert.equal(running(), 3, 'all three chunks ran at once');
    // chunk starts are padded by 0.2 s (the VAD's speech 0-20, 40-60, 80-100 s)
    const names = ['c20-0', 'c20-39.8', 'c20-79.8'];
    assert.deepEqual(
      events,
      names.flatMap((name, i) => [
        'text c',
        `text${name.slice(1)}`,
        `segment ${i} ${[0, 39.8, 79.8][i]?.toFixed(1)}-${[20.2, 60.2, 100.2][i]?.toFixed(1)} ${name}`,
      ]),
    );
    assert.equal(result.text, names.join(' '));
    assert.deepEqual(
      result.segments.map((s) => s.id),
      [0, 1, 2],
    );
  });

  it('runs no more chunks at once than the model batches, and stops the others when one fails', async () => {
    const limited = reverseFinishingModel(2);
    const result = await transcribeSpeechChunks(limited.model, vad, new Float32Array(110 * RATE), {});
    assert.equal(limited.running(), 2, 'two at a time');
    assert.equal(result.segments.length, 3);

    // the last chunk fails first (220 ms), while the two before it still run: they are told to stop
    const failing = reverseFinishingModel(3, 79.8);
    await assert.rejects(transcribeSpeechChunks(failing.model, vad, new Float32Array(110 * RATE), {}), /this chunk fails/);
    await new Promise((resolve) => setTimeout(resolve, 200));
    assert.equal(failing.aborted(), 2, 'the chunks still running saw their signal abort');
    const late = reverseFinishingModel(1, 0);
    await assert.rejects(transcribeSpeechChunks(late.model, vad, new Float32Array(110 * RATE), {}), /this chunk fails/);
    assert.equal(late.running(), 1, 'after the failure no other chunk started');
  });
});
