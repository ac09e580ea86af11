import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { callbackStream } from '../../src/services/callback-stream.js';

/** Work that emits `count` numbers a millisecond apart, then resolves with their sum. */
function counting(count: number, log: string[] = []): (emit: (n: number) => void) => Promise<number> {
  return async (emit) => {
    let sum = 0;
    for (let n = 1; n <= count; n++) {
      await sleep(1);
      emit(n);
      sum += n;
    }
    log.push('work done');
    return sum;
  };
}

describe('callbackStream', () => {
  it('yields what the work emits, in order, and returns what it resolved with', async () => {
    const stream = callbackStream(counting(5));
    const seen: number[] = [];
    let step = await stream.next();
    while (!step.done) {
      seen.push(step.value);
      step = await stream.next();
    }
    assert.deepEqual(seen, [1, 2, 3, 4, 5]);
    assert.equal(step.value, 15);
  });

  it('keeps what is emitted before the consumer asks, even synchronously', async () => {
    const seen: string[] = [];
    for await (const item of callbackStream<string, void>(async (emit) => ['a', 'b', 'c'].forEach(emit))) seen.push(item);
    assert.deepEqual(seen, ['a', 'b', 'c']);
  });

  it('throws the work failure after the items emitted before it', async () => {
    const seen: number[] = [];
    const failing = callbackStream<number, void>(async (emit) => {
      emit(1);
      emit(2);
      await sleep(1);
      throw new Error('engine failed');
    });
    await assert.rejects(
      (async () => {
        for await (const n of failing) seen.push(n);
      })(),
      /engine failed/,
    );
    assert.deepEqual(seen, [1, 2]);
  });

  it('waits for the work to settle when the consumer stops early', async () => {
    const log: string[] = [];
    for await (const n of callbackStream(counting(5, log))) {
      if (n === 2) break;
    }
    log.push('consumer done');
    assert.deepEqual(log, ['work done', 'consumer done'], 'whatever the work uses is not released under it');
  });
});
