/**
 * The diarization test set's builder (test/helpers/dialogues.ts) on the real flite voices and recordings: a seed
 * gives one dialogue, its turns are speech inside the audio, and the options give what they say.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { buildDialogue, DIALOGUE_RATE, DIALOGUE_VOICES, diarizationSet, referenceClip, type Dialogue, type ReferenceTurn } from '../helpers/dialogues.js';

const overlapping = (a: ReferenceTurn, b: ReferenceTurn): boolean => a.speaker !== b.speaker && a.start < b.end && b.start < a.end;
const pairs = (turns: ReferenceTurn[]): [ReferenceTurn, ReferenceTurn][] =>
  turns.flatMap((a, i) => turns.slice(i + 1).map((b): [ReferenceTurn, ReferenceTurn] => [a, b]));

function rms(samples: Float32Array, start: number, end: number): number {
  let sum = 0;
  for (let i = Math.round(start * DIALOGUE_RATE); i < Math.round(end * DIALOGUE_RATE); i++) sum += (samples[i] as number) ** 2;
  return Math.sqrt(sum / (Math.round(end * DIALOGUE_RATE) - Math.round(start * DIALOGUE_RATE)));
}

function assertTurnsAreSpeech(dialogue: Dialogue): void {
  const seconds = dialogue.samples.length / DIALOGUE_RATE;
  for (const turn of dialogue.turns) {
    assert.ok(turn.start >= 0 && turn.end > turn.start && turn.end <= seconds, `turn ${JSON.stringify(turn)} outside the ${seconds} s of audio`);
    // speech is at about 0.05 rms; the start and end of a turn are not the silence around it
    assert.ok(rms(dialogue.samples, turn.start, turn.start + 0.1) > 0.003, `turn ${JSON.stringify(turn)} starts in silence`);
    assert.ok(rms(dialogue.samples, turn.end - 0.1, turn.end) > 0.003, `turn ${JSON.stringify(turn)} ends in silence`);
  }
}

describe('diarization dialogues', () => {
  it('builds the same dialogue from the same seed, and another from another', async () => {
    const options = { speakers: ['slt', 'jfk', 'rms'] as const, seed: 11, overlap: true, backchannels: true };
    const [first, again, other] = [await buildDialogue(options), await buildDialogue(options), await buildDialogue({ ...options, seed: 12 })];
    assert.deepEqual(again.turns, first.turns);
    assert.deepEqual(again.samples, first.samples);
    assert.notDeepEqual(other.turns, first.turns);
  });

  it('has every speaker speak, with turns of speech inside the audio and no overlap unless asked', async () => {
    const dialogue = await buildDialogue({ speakers: ['kal', 'reader', 'awb', 'slt'], seed: 3 });
    assert.deepEqual(new Set(dialogue.turns.map((turn) => turn.speaker)), new Set(['kal', 'reader', 'awb', 'slt']));
    assertTurnsAreSpeech(dialogue);
    assert.deepEqual(
      pairs(dialogue.turns).filter(([a, b]) => overlapping(a, b)),
      [],
    );
  });

  it('overlaps about 30 % of the turns with the one before when asked', async () => {
    const dialogue = await buildDialogue({ speakers: ['awb', 'rms'], seed: 5, overlap: true });
    assertTurnsAreSpeech(dialogue);
    const overlaps = pairs(dialogue.turns).filter(([a, b]) => overlapping(a, b));
    // 11 turns follow another: 3 overlap it (a turn split at a pause may overlap in two pieces)
    assert.ok(overlaps.length >= 3, `${overlaps.length} overlaps`);
    for (const [a, b] of overlaps) assert.ok(Math.min(a.end, b.end) - Math.max(a.start, b.start) <= 0.8 + 1e-9);
  });

  it('puts short turns of another speaker inside turns when asked for backchannels', async () => {
    const dialogue = await buildDialogue({ speakers: ['slt', 'reader', 'jfk'], seed: 8, backchannels: true });
    assertTurnsAreSpeech(dialogue);
    const inside = dialogue.turns.filter(
      (short) =>
        short.end - short.start <= 0.75 && dialogue.turns.some((long) => long.speaker !== short.speaker && long.start < short.start && short.end < long.end),
    );
    assert.ok(inside.length >= 4, `${inside.length} backchannels inside other turns`);
  });

  it('gives a 3-8 s reference clip of each voice', async () => {
    for (const voice of DIALOGUE_VOICES) {
      const seconds = (await referenceClip(voice, 1)).length / DIALOGUE_RATE;
      assert.ok(seconds >= 3 && seconds <= 8, `${voice}: ${seconds} s`);
    }
  });

  it('enumerates 24 dialogues a seed: 2, 3 and 4 distinct speakers in four conditions, two each', () => {
    const set = diarizationSet([1, 2]);
    assert.equal(set.length, 48);
    assert.equal(new Set(set.map((spec) => spec.name)).size, 48);
    for (const spec of set) assert.equal(new Set(spec.speakers).size, spec.speakers.length);
    const count = (speakers: number, condition: string): number =>
      set.filter((spec) => spec.speakers.length === speakers && spec.condition === condition).length;
    for (const speakers of [2, 3, 4]) for (const condition of ['clean', 'overlap', 'backchannels', 'both']) assert.equal(count(speakers, condition), 4);
    assert.deepEqual(diarizationSet([1]), set.slice(0, 24));
  });
});
