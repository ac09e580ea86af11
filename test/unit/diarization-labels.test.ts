/** How a transcript's segments get their speakers (services/stt/diarization.ts). */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { SpeakerTurn, TranscriptionSegment } from '../../src/engines/types.js';
import { labelSegment, speakerLabels, speakerSpans } from '../../src/services/stt/diarization.js';

function segment(start: number, end: number, words?: [string, number, number][]): TranscriptionSegment {
  return {
    id: 0,
    start,
    end,
    text: words ? ' ' + words.map((w) => w[0]).join(' ') : ' some text',
    tokens: [1, 2, 3],
    temperature: 0,
    avgLogprob: 0,
    compressionRatio: 1,
    noSpeechProb: 0,
    words: words?.map(([word, s, e]) => ({ word, start: s, end: e })),
  };
}

const TURNS: SpeakerTurn[] = [
  { start: 0, end: 2, speaker: 0 },
  { start: 2.1, end: 4, speaker: 1 },
  { start: 5, end: 6, speaker: 0 },
];

describe('speaker labels', () => {
  it('names matched speakers, and letters the rest in order of first speech', () => {
    assert.deepEqual(speakerLabels({ turns: [], speakers: 3, references: [] }, []), ['A', 'B', 'C']);
    assert.deepEqual(speakerLabels({ turns: [], speakers: 3, references: [1, null] }, ['Ann', 'Bob']), ['A', 'Ann', 'B']);
    assert.equal(speakerLabels({ turns: [], speakers: 28, references: [] }, []).at(-1), 'AB');
  });

  it('splits a segment between words where the speaker changes, keeping its edges', () => {
    const pieces = labelSegment(
      segment(0.1, 3.9, [
        ['hello', 0.2, 0.6],
        ['there', 0.7, 1.9],
        ['hi', 2.2, 2.5],
        ['back', 2.6, 3.8],
      ]),
      TURNS,
      ['A', 'B'],
    );
    assert.deepEqual(
      pieces.map((p) => [p.speaker, p.text, p.start, p.end, p.tokens.length]),
      [
        ['A', ' hello there', 0.1, 1.9, 0],
        ['B', ' hi back', 2.2, 3.9, 0],
      ],
    );
  });

  it('gives a segment of one speaker, or without words, whole to the speaker who has most of it', () => {
    const one = labelSegment(segment(0, 1.5, [['hello', 0.2, 0.6]]), TURNS, ['A', 'B']);
    assert.deepEqual(
      one.map((p) => [p.speaker, p.tokens.length]),
      [['A', 3]],
    );
    assert.equal(labelSegment(segment(1.5, 4), TURNS, ['A', 'B'])[0]?.speaker, 'B');
    // in a pause between turns: the nearest turn's speaker
    assert.equal(labelSegment(segment(4.7, 4.9), TURNS, ['A', 'B'])[0]?.speaker, 'A');
    assert.equal(labelSegment(segment(0, 1), [], [])[0]?.speaker, undefined, 'no turns, no speaker');
  });

  it('groups each speaker’s turns into spans to transcribe, padded into silence only', () => {
    const spans = speakerSpans(
      [
        { start: 0.5, end: 2, speaker: 0 },
        { start: 2.3, end: 3, speaker: 0 },
        { start: 3, end: 4, speaker: 1 },
        { start: 6, end: 40, speaker: 1 },
      ],
      30,
      41,
    );
    assert.deepEqual(spans, [
      { start: 0.3, end: 3, speaker: 0 },
      { start: 3, end: 4.2, speaker: 1 },
      { start: 5.8, end: 40.2, speaker: 1 },
    ]);
  });
});
