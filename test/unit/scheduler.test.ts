import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { ApiError } from '../../src/errors.js';
import { Metrics } from '../../src/services/metrics.js';
import { AbortedError, Scheduler, type BatchSpec } from '../../src/services/scheduler.js';

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve = (): void => {};
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

describe('scheduler', () => {
  it('runs at most `concurrency` jobs per model and the rest in order', async () => {
    const scheduler = new Scheduler({ maxQueue: 10, concurrency: 2, metrics: new Metrics() });
    let running = 0;
    let peak = 0;
    const order: number[] = [];
    await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        scheduler.run({ id: 'm' }, async () => {
          running++;
          peak = Math.max(peak, running);
          order.push(i);
          await sleep(10);
          running--;
        }),
      ),
    );
    assert.equal(peak, 2);
    assert.deepEqual(order, [0, 1, 2, 3, 4, 5]);
  });

  it('runs one job at a time for a model that asks for it', async () => {
    const scheduler = new Scheduler({ maxQueue: 10, concurrency: 4, metrics: new Metrics() });
    let running = 0;
    let peak = 0;
    const job = async (): Promise<void> => {
      running++;
      peak = Math.max(peak, running);
      await sleep(5);
      running--;
    };
    await Promise.all(Array.from({ length: 4 }, () => scheduler.run({ id: 'm', concurrency: 1 }, job)));
    assert.equal(peak, 1);
  });

  it('keeps models independent', async () => {
    const scheduler = new Scheduler({ maxQueue: 0, concurrency: 1, metrics: new Metrics() });
    const gate = deferred();
    const a = scheduler.run({ id: 'a' }, () => gate.promise);
    const b = scheduler.run({ id: 'b' }, async () => 'b ran');
    assert.equal(await b, 'b ran');
    gate.resolve();
    await a;
  });

  it('answers 503 with Retry-After when the queue is full', async () => {
    const metrics = new Metrics();
    const scheduler = new Scheduler({ maxQueue: 1, concurrency: 1, metrics });
    const gate = deferred();
    const first = scheduler.run({ id: 'm' }, () => gate.promise);
    const second = scheduler.run({ id: 'm' }, async () => undefined);
    await assert.rejects(
      scheduler.run({ id: 'm' }, async () => undefined),
      (error: unknown) => {
        assert.ok(error instanceof ApiError);
        assert.equal(error.status, 503);
        assert.match(error.headers['Retry-After'] ?? '', /^\d+$/);
        return true;
      },
    );
    gate.resolve();
    await Promise.all([first, second]);
    assert.match(metrics.render(), /voxd_queue_rejected_total\{model="m"\} 1/);
  });

  it('drops a waiting job whose client went away, without running it', async () => {
    const scheduler = new Scheduler({ maxQueue: 5, concurrency: 1, metrics: new Metrics() });
    const gate = deferred();
    const first = scheduler.run({ id: 'm' }, () => gate.promise);
    const controller = new AbortController();
    let ran = false;
    const waiting = scheduler.run(
      { id: 'm' },
      async () => {
        ran = true;
      },
      controller.signal,
    );
    controller.abort();
    await assert.rejects(waiting, AbortedError);
    gate.resolve();
    await first;
    await scheduler.idle();
    assert.equal(ran, false);
  });

  it('passes the signal to a running job and reports idle when all work ended', async () => {
    const scheduler = new Scheduler({ maxQueue: 5, concurrency: 1, metrics: new Metrics() });
    const controller = new AbortController();
    const job = scheduler.run(
      { id: 'm' },
      (signal) => new Promise((_, reject) => signal.addEventListener('abort', () => reject(new AbortedError()))),
      controller.signal,
    );
    assert.equal(scheduler.pending, 1);
    controller.abort();
    await assert.rejects(job, AbortedError);
    await scheduler.idle();
    assert.equal(scheduler.pending, 0);
  });

  it('admits a request whole: its jobs never meet a full queue, and --max-queue counts requests', async () => {
    const scheduler = new Scheduler({ maxQueue: 1, concurrency: 1, metrics: new Metrics() });
    const gate = deferred();
    const running = scheduler.admit({ id: 'm' });
    const first = running.run(() => gate.promise);
    const many = scheduler.admit({ id: 'm' }); // waits: the one queue place
    const jobs = Array.from({ length: 10 }, (_, i) => many.run(async () => i));
    assert.throws(
      () => scheduler.admit({ id: 'm' }),
      (error: unknown) => error instanceof ApiError && error.code === 'queue_full',
    );
    gate.resolve();
    await first;
    running.release();
    assert.deepEqual(await Promise.all(jobs), [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    many.release();
    scheduler.admit({ id: 'm' }).release(); // room again
    await scheduler.idle();
  });

  it('serves waiting jobs round-robin across requests', async () => {
    const scheduler = new Scheduler({ maxQueue: 5, concurrency: 1, metrics: new Metrics() });
    const gate = deferred();
    const blocker = scheduler.run({ id: 'm' }, () => gate.promise);
    const order: string[] = [];
    const long = scheduler.admit({ id: 'm' });
    const short = scheduler.admit({ id: 'm' });
    const work = [...['a1', 'a2', 'a3'].map((name) => long.run(async () => void order.push(name))), short.run(async () => void order.push('b1'))];
    gate.resolve();
    await Promise.all([blocker, ...work]);
    assert.deepEqual(order, ['a1', 'b1', 'a2', 'a3'], 'the short request does not wait for all of the long one');
    long.release();
    short.release();
  });
  describe('job time limit (--job-timeout-s)', () => {
    /** A job that runs until its signal fires, then takes `stopMs` to stop; records when it stopped. */
    function stubborn(stopMs: number, stopped: { at: number | null }): (signal: AbortSignal) => Promise<never> {
      return (signal) =>
        new Promise((_, reject) =>
          signal.addEventListener('abort', () =>
            setTimeout(() => {
              stopped.at = performance.now();
              reject(new AbortedError());
            }, stopMs),
          ),
        );
    }
    const isTimeout = (error: unknown): boolean =>
      error instanceof ApiError && error.code === 'job_timeout' && error.status === 504 && error.headers['x-should-retry'] === 'false';

    it('stops a job past the limit and answers at once; the slot frees when the work has stopped', async () => {
      const metrics = new Metrics();
      const scheduler = new Scheduler({ maxQueue: 5, concurrency: 1, metrics, jobTimeoutMs: 50 });
      const stopped = { at: null as number | null };
      const runaway = scheduler.run({ id: 'm' }, stubborn(200, stopped));
      let nextStarted: number | null = null;
      const next = scheduler.run({ id: 'm' }, async () => void (nextStarted = performance.now()));
      await assert.rejects(runaway, isTimeout);
      assert.equal(stopped.at, null, 'answered before the work stopped');
      assert.equal(scheduler.pending, 2, 'the slot is still held by the work that is stopping');
      await next;
      assert.ok(stopped.at !== null && nextStarted !== null && nextStarted >= stopped.at, 'the next job ran once the runaway had stopped');
      assert.match(metrics.render(), /voxd_jobs_total\{model="m",outcome="timeout"\} 1/);
    });

    it('lets a job run as long as it asks for, and never times work admitted exempt', async () => {
      const scheduler = new Scheduler({ maxQueue: 5, concurrency: 2, metrics: new Metrics(), jobTimeoutMs: 20 });
      const long = scheduler.run({ id: 'm' }, () => sleep(80).then(() => 'long'), undefined, { minTimeoutMs: 1000 });
      const loop = scheduler.admit({ id: 'm' }, { exempt: true });
      const owed = loop.run(() => sleep(80).then(() => 'owed'));
      assert.deepEqual(await Promise.all([long, owed]), ['long', 'owed']);
      loop.release();
    });

    it('answers every member of a fixed-window batch that ran past the limit', async () => {
      const scheduler = new Scheduler({ maxQueue: 5, concurrency: 1, metrics: new Metrics(), jobTimeoutMs: 30 });
      const gate = deferred();
      const blocker = scheduler.run({ id: 'm' }, () => gate.promise);
      const stopped = { at: null as number | null };
      const batch: BatchSpec<string, string> = { key: 'k', maxSize: 4, run: (_items, signal) => stubborn(10, stopped)(signal) };
      const admissions = ['a', 'b', 'c'].map(() => scheduler.admit({ id: 'm' }));
      const members = admissions.map((admission, i) => admission.runBatched(String(i), batch));
      gate.resolve();
      await blocker;
      for (const member of members) await assert.rejects(member, isTimeout);
      admissions.forEach((admission) => admission.release());
    });

    it('sets no limit when --job-timeout-s is 0', async () => {
      const scheduler = new Scheduler({ maxQueue: 5, concurrency: 1, metrics: new Metrics(), jobTimeoutMs: 0 });
      assert.equal(scheduler.jobTimeoutMs(5000), 0);
      assert.equal(await scheduler.run({ id: 'm' }, () => sleep(30).then(() => 'done')), 'done');
    });

    it('takes a limit longer than a timer holds as the longest a timer holds, not as none', async () => {
      const scheduler = new Scheduler({ maxQueue: 5, concurrency: 1, metrics: new Metrics(), jobTimeoutMs: 99_999_999_000 });
      assert.equal(scheduler.jobTimeoutMs(), 2 ** 31 - 1);
      assert.equal(await scheduler.run({ id: 'm' }, () => sleep(30).then(() => 'done')), 'done');
    });
  });
});
