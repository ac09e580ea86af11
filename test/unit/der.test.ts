/**
 * The diarization error rate the diarization bench reports (test/helpers/der.ts): each kind of error counted as
 * md-eval counts it, the speaker mapping the best one rather than a greedy one, the collar and overlapped speech.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { bestAssignment, diarizationErrorRate, majoritySpeakers, speakerNaming, type LabelledSegment } from '../helpers/der.js';

const seg = (speaker: string, start: number, end: number): LabelledSegment => ({ speaker, start, end });
const NO_COLLAR = { collar: 0 };

function assertClose(actual: number, expected: number, what: string): void {
  assert.ok(Math.abs(actual - expected) < 1e-6, `${what}: ${actual}, expected ${expected}`);
}

/** A 0-10 s, B 10-20 s. */
const TWO_HALVES = [seg('A', 0, 10), seg('B', 10, 20)];

describe('diarization error rate', () => {
  it('scores a hypothesis equal to the reference 0, with the collar taken out of the scored time', () => {
    const reference = [seg('A', 0, 4), seg('B', 5, 9)];
    const result = diarizationErrorRate(reference, reference);
    assert.equal(result.der, 0);
    assert.deepEqual([result.miss, result.falseAlarm, result.confusion], [0, 0, 0]);
    // 0.25 s off each end of both 4 s turns
    assertClose(result.scoredSeconds, 7, 'scored seconds');
    assert.deepEqual(result.mapping, { A: 'A', B: 'B' });
  });

  it('scores the same turns under other labels 0 and maps the labels', () => {
    const result = diarizationErrorRate(TWO_HALVES, [seg('1', 0, 10), seg('0', 10, 20)]);
    assert.equal(result.der, 0);
    assert.deepEqual(result.mapping, { '1': 'A', '0': 'B' });
  });

  it('counts speech given to the wrong speaker as confusion', () => {
    // the second half of A's turn goes to the speaker that is mapped to B
    const hypothesis = [seg('x', 0, 5), seg('y', 5, 20)];
    const plain = diarizationErrorRate(TWO_HALVES, hypothesis, NO_COLLAR);
    assertClose(plain.confusion, 5, 'confusion');
    assertClose(plain.der, 0.25, 'DER');
    assert.deepEqual([plain.miss, plain.falseAlarm], [0, 0]);
    assert.deepEqual(plain.mapping, { x: 'A', y: 'B' });
    // a hypothesis boundary is no reference boundary: the collar trims only the reference turns' ends
    const collared = diarizationErrorRate(TWO_HALVES, hypothesis);
    assertClose(collared.confusion, 4.75, 'confusion with collar');
    assertClose(collared.scoredSeconds, 19, 'scored seconds with collar');
  });

  it('maps speakers for the largest total agreement, not greedily', () => {
    // x shares 5 s with A and 4 s with B, y 4 s with A: greedy pairs x-A (5) and leaves y-B (0), the best is x-B, y-A (8)
    const reference = [seg('A', 0, 9), seg('B', 9, 13)];
    const hypothesis = [seg('x', 0, 5), seg('y', 5, 9), seg('x', 9, 13)];
    const result = diarizationErrorRate(reference, hypothesis, NO_COLLAR);
    assert.deepEqual(result.mapping, { x: 'B', y: 'A' });
    assertClose(result.confusion, 5, 'confusion');
    assertClose(result.der, 5 / 13, 'DER');
  });

  it('counts speech the hypothesis leaves out as missed and speech it invents as false alarm', () => {
    const missing = diarizationErrorRate(TWO_HALVES, [seg('x', 0, 10), seg('y', 10, 15)], NO_COLLAR);
    assertClose(missing.miss, 5, 'miss');
    assertClose(missing.der, 0.25, 'DER');
    const invented = diarizationErrorRate(TWO_HALVES, [seg('x', 0, 10), seg('y', 10, 22)], NO_COLLAR);
    assertClose(invented.falseAlarm, 2, 'false alarm');
    assertClose(invented.der, 0.1, 'DER');
    assert.equal(diarizationErrorRate(TWO_HALVES, [], NO_COLLAR).der, 1);
  });

  it('does not score frames within the collar of a reference boundary', () => {
    const reference = [seg('A', 1, 5)];
    // 0.2 s early and late: inside the 0.25 s collar
    assert.equal(diarizationErrorRate(reference, [seg('x', 0.8, 5.2)]).der, 0);
    const plain = diarizationErrorRate(reference, [seg('x', 0.8, 5.2)], NO_COLLAR);
    assertClose(plain.falseAlarm, 0.4, 'false alarm without collar');
    // 0.3 s late: 0.05 s of it is past the collar
    assertClose(diarizationErrorRate(reference, [seg('x', 1, 5.3)]).falseAlarm, 0.05, 'false alarm past the collar');
    assertClose(diarizationErrorRate(reference, [seg('x', 1, 5.3)], { collar: 0.5 }).falseAlarm, 0, 'false alarm in a wider collar');
  });

  it('scores overlapped speech: one speaker where two talk misses one of them', () => {
    const reference = [seg('A', 0, 10), seg('B', 5, 10)];
    const single = diarizationErrorRate(reference, [seg('x', 0, 10)], NO_COLLAR);
    assertClose(single.scoredSeconds, 15, 'scored seconds');
    assertClose(single.miss, 5, 'miss');
    assertClose(single.der, 1 / 3, 'DER');
    assert.equal(diarizationErrorRate(reference, [seg('x', 0, 10), seg('y', 5, 10)], NO_COLLAR).der, 0);
    // two speakers where one talks: a false alarm, and the mapped speaker is right
    const doubled = diarizationErrorRate([seg('A', 0, 10)], [seg('x', 0, 10), seg('y', 0, 4)], NO_COLLAR);
    assertClose(doubled.falseAlarm, 4, 'false alarm');
    assertClose(doubled.confusion, 0, 'confusion');
  });

  it('joins a speaker’s touching and overlapping segments before placing the collar', () => {
    // A's 0-5 and 5-10 are one turn: no boundary, so no collar, at 5 s
    const result = diarizationErrorRate([seg('A', 0, 5), seg('A', 5, 10)], [seg('x', 0, 5), seg('y', 5, 10)]);
    assertClose(result.confusion, 4.75, 'confusion');
  });
});

describe('best assignment', () => {
  it('finds the best one-to-one pairing of any shape', () => {
    assert.deepEqual(
      bestAssignment([
        [5, 4],
        [4, 0],
      ]),
      { total: 8, pairs: [1, 0] },
    );
    assert.deepEqual(bestAssignment([[1, 7, 3]]), { total: 7, pairs: [1] });
    assert.deepEqual(bestAssignment([[2], [9], [4]]), { total: 9, pairs: [-1, 0, -1] });
    assert.deepEqual(bestAssignment([]), { total: 0, pairs: [] });
  });

  it('agrees with trying every permutation', () => {
    let state = 7;
    const random = (): number => (state = (state * 48271) % 2147483647) / 2147483647;
    const permutations = (items: number[]): number[][] =>
      items.length <= 1 ? [items] : items.flatMap((item, i) => permutations([...items.slice(0, i), ...items.slice(i + 1)]).map((rest) => [item, ...rest]));
    for (let trial = 0; trial < 50; trial++) {
      const weights = Array.from({ length: 5 }, () => Array.from({ length: 5 }, () => Math.floor(random() * 100)));
      const brute = Math.max(...permutations([0, 1, 2, 3, 4]).map((p) => p.reduce((sum, column, row) => sum + (weights[row]?.[column] as number), 0)));
      const { total, pairs } = bestAssignment(weights);
      assert.equal(total, brute);
      assert.equal(
        pairs.reduce((sum, column, row) => sum + (weights[row]?.[column] as number), 0),
        brute,
      );
    }
  });
});

describe('speaker naming', () => {
  const reference = [seg('alice', 0, 2), seg('bob', 2, 4), seg('carol', 4, 6), seg('alice', 6, 8)];

  it('names each reference segment by the hypothesis speaker that overlaps it longest', () => {
    assert.deepEqual(majoritySpeakers(reference, [seg('alice', 0, 2.8), seg('C', 2.8, 8)]), ['alice', 'C', 'C', 'C']);
    assert.deepEqual(majoritySpeakers([seg('alice', 10, 12)], [seg('alice', 0, 3)]), [null]);
  });

  it('counts known speakers named right and others given a known name', () => {
    const hypothesis = [seg('alice', 0, 2), seg('alice', 2, 4), seg('bob', 4, 6), seg('B', 6, 8)];
    assert.deepEqual(speakerNaming(reference, hypothesis, ['alice', 'bob']), { known: 3, knownRight: 1, others: 1, othersNamed: 1 });
  });
});
