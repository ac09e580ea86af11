/**
 * Per-model work queues in front of the native thread pool. Each model runs at most `concurrency` jobs at a
 * time (each job is one or more native calls on libuv workers); the rest wait in a FIFO bounded by `maxQueue`,
 * past which callers get 503 with a Retry-After estimate. A job whose client goes away while it waits is
 * dropped without running; a running job sees the same AbortSignal and cancels its native work.
 *
 * Fixed-window batching (`runBatched`): items queued while the model's slots are busy are grouped when a slot
 * frees: the head item takes every waiting item with the same batch key along, up to the batch's size, and one
 * call runs them all.
 */
import { ApiError } from '../http/errors.js';
import { Gauge, type Metrics } from './metrics.js';

export interface SchedulerOptions {
  maxQueue: number;
  concurrency: number;
  metrics: Metrics;
}

/** How a batched item is grouped and run. Items of one model join a batch only when their keys are equal. */
export interface BatchSpec<I, R> {
  key: string;
  maxSize: number;
  /** Runs the items together; resolves with one result per item, in order. */
  run: (items: I[], signal: AbortSignal) => Promise<R[]>;
}

/** A queued unit: a single job or one item of a batch. */
interface Entry {
  signal: AbortSignal;
  enqueuedAt: number;
  onAbort: () => void;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
  /** A single job. */
  job?: (signal: AbortSignal) => Promise<unknown>;
  /** A batch item with its spec. */
  item?: unknown;
  batch?: BatchSpec<unknown, unknown>;
}

interface ModelQueue {
  running: number;
  /** Jobs that may run at once (the server's --model-concurrency, or less for the model). */
  limit: number;
  waiting: Entry[];
  /** Moving average of job run time, for Retry-After. */
  avgRunMs: number;
}

export class AbortedError extends Error {
  override name = 'AbortError';
  constructor() {
    super('the request was aborted');
  }
}

export class Scheduler {
  private readonly queues = new Map<string, ModelQueue>();
  private idleWaiters: (() => void)[] = [];

  constructor(private readonly options: SchedulerOptions) {
    options.metrics.add(
      new Gauge('voxd_queue_depth', 'Jobs waiting per model', () => [...this.queues].map(([model, q]) => ({ labels: { model }, value: q.waiting.length }))),
    );
    options.metrics.add(
      new Gauge('voxd_jobs_running', 'Jobs running per model', () => [...this.queues].map(([model, q]) => ({ labels: { model }, value: q.running }))),
    );
  }

  /**
   * Runs `job` for `model` when a slot is free. `modelConcurrency` lowers the server's per-model limit for engines
   * that use every core in one job. Rejects with 503 when the queue is full.
   */
  run<T>(model: string, job: (signal: AbortSignal) => Promise<T>, signal: AbortSignal = new AbortController().signal, modelConcurrency?: number): Promise<T> {
    return this.enqueue(model, { job: job as Entry['job'] }, signal, modelConcurrency) as Promise<T>;
  }

  /** Runs `item` in a batch with the compatible items waiting beside it (fixed-window batching); see `BatchSpec`. */
  runBatched<I, R>(model: string, item: I, batch: BatchSpec<I, R>, signal: AbortSignal = new AbortController().signal, modelConcurrency?: number): Promise<R> {
    return this.enqueue(model, { item, batch: batch as BatchSpec<unknown, unknown> }, signal, modelConcurrency) as Promise<R>;
  }

  /** Jobs running or waiting, across all models. */
  get pending(): number {
    let n = 0;
    for (const q of this.queues.values()) n += q.running + q.waiting.length;
    return n;
  }

  /** Resolves once no job runs or waits (graceful shutdown). */
  idle(): Promise<void> {
    if (this.pending === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private enqueue(model: string, work: Pick<Entry, 'job' | 'item' | 'batch'>, signal: AbortSignal, modelConcurrency?: number): Promise<unknown> {
    if (signal.aborted) return Promise.reject(new AbortedError());
    const queue = this.queueOf(model);
    queue.limit = Math.max(1, Math.min(this.options.concurrency, modelConcurrency ?? this.options.concurrency));
    if (queue.running >= queue.limit && queue.waiting.length >= this.options.maxQueue) {
      this.options.metrics.rejected.inc({ model });
      const retryAfter = Math.max(1, Math.ceil((queue.avgRunMs * (queue.waiting.length + 1)) / queue.limit / 1000));
      return Promise.reject(
        new ApiError('queue_full', `the queue for model ${model} is full (${this.options.maxQueue} waiting); retry later`, {
          headers: { 'Retry-After': String(retryAfter) },
        }),
      );
    }
    return new Promise((resolve, reject) => {
      const entry: Entry = {
        ...work,
        signal,
        enqueuedAt: performance.now(),
        resolve,
        reject,
        onAbort: () => {
          const i = queue.waiting.indexOf(entry);
          if (i < 0) return;
          queue.waiting.splice(i, 1);
          this.options.metrics.jobs.inc({ model, outcome: 'cancelled' });
          reject(new AbortedError());
          this.pump(model, queue);
        },
      };
      signal.addEventListener('abort', entry.onAbort, { once: true });
      queue.waiting.push(entry);
      this.pump(model, queue);
    });
  }

  private queueOf(model: string): ModelQueue {
    let queue = this.queues.get(model);
    if (!queue) {
      queue = { running: 0, limit: this.options.concurrency, waiting: [], avgRunMs: 0 };
      this.queues.set(model, queue);
    }
    return queue;
  }

  private pump(model: string, queue: ModelQueue): void {
    while (queue.running < queue.limit && queue.waiting.length > 0) {
      const head = queue.waiting.shift() as Entry;
      this.start(model, queue, head.batch ? [head, ...this.takeCompanions(queue, head.batch)] : [head]);
    }
    if (queue.running === 0 && queue.waiting.length === 0) this.queues.delete(model);
    this.notifyIfIdle();
  }

  /** Removes and returns the waiting items that may share the head's batch. */
  private takeCompanions(queue: ModelQueue, batch: BatchSpec<unknown, unknown>): Entry[] {
    const taken: Entry[] = [];
    for (let i = 0; i < queue.waiting.length && taken.length + 1 < batch.maxSize;) {
      const entry = queue.waiting[i] as Entry;
      if (entry.batch?.key === batch.key) {
        queue.waiting.splice(i, 1);
        taken.push(entry);
      } else {
        i++;
      }
    }
    return taken;
  }

  /** Runs a single job, or a batch of items with one call, in one slot. */
  private start(model: string, queue: ModelQueue, entries: Entry[]): void {
    queue.running += 1;
    const startedAt = performance.now();
    for (const entry of entries) {
      entry.signal.removeEventListener('abort', entry.onAbort);
      this.options.metrics.queueWait.observe({ model }, (startedAt - entry.enqueuedAt) / 1000);
    }
    const head = entries[0] as Entry;
    let work: Promise<unknown[]>;
    if (head.batch) {
      this.options.metrics.batchSize.observe({ model, path: 'fixed-window' }, entries.length);
      work = head.batch.run(
        entries.map((e) => e.item),
        whenAllAborted(entries.map((e) => e.signal)),
      );
    } else {
      work = (head.job as NonNullable<Entry['job']>)(head.signal).then((value) => [value]);
    }
    work
      .then(
        (values) => {
          if (values.length !== entries.length) throw new Error(`a batch of ${entries.length} returned ${values.length} results`);
          entries.forEach((entry, i) => {
            this.options.metrics.jobs.inc({ model, outcome: 'ok' });
            entry.resolve(values[i]);
          });
        },
        (error: unknown) => {
          for (const entry of entries) {
            this.options.metrics.jobs.inc({ model, outcome: entry.signal.aborted ? 'cancelled' : 'error' });
            entry.reject(entry.signal.aborted ? new AbortedError() : error);
          }
        },
      )
      .catch((error: unknown) => entries.forEach((entry) => entry.reject(error)))
      .finally(() => {
        const ranMs = performance.now() - startedAt;
        queue.avgRunMs = queue.avgRunMs === 0 ? ranMs : queue.avgRunMs * 0.8 + ranMs * 0.2;
        queue.running -= 1;
        this.pump(model, queue);
      });
  }

  private notifyIfIdle(): void {
    if (this.pending !== 0) return;
    const waiters = this.idleWaiters;
    this.idleWaiters = [];
    waiters.forEach((w) => w());
  }
}

/** A batch's signal: it fires once every member's client has gone (one leaving must not cancel the others). */
function whenAllAborted(signals: AbortSignal[]): AbortSignal {
  if (signals.length === 1) return signals[0] as AbortSignal;
  const controller = new AbortController();
  let left = signals.filter((s) => !s.aborted).length;
  if (left === 0) controller.abort();
  for (const signal of signals) {
    signal.addEventListener(
      'abort',
      () => {
        if (--left === 0) controller.abort();
      },
      { once: true },
    );
  }
  return controller.signal;
}
