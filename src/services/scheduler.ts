/**
 * Per-model work queues in front of the native thread pool. Each model runs at most `concurrency` jobs at a
 * time (each job is one or more native calls on libuv workers); the rest wait in a FIFO bounded by `maxQueue`,
 * past which callers get 503 with a Retry-After estimate. A job whose client goes away while it waits is
 * dropped without running; a running job sees the same AbortSignal and cancels its native work.
 */
import { ApiError } from '../http/errors.js';
import { Gauge, type Metrics } from './metrics.js';

export interface SchedulerOptions {
  maxQueue: number;
  concurrency: number;
  metrics: Metrics;
}

interface Job {
  start: () => void;
}

interface ModelQueue {
  running: number;
  /** Jobs that may run at once (the server's --model-concurrency, or less for the model). */
  limit: number;
  waiting: Job[];
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
    const enqueuedAt = performance.now();
    return new Promise<T>((resolve, reject) => {
      const onAbort = (): void => {
        const i = queue.waiting.indexOf(entry);
        if (i >= 0) {
          queue.waiting.splice(i, 1);
          this.options.metrics.jobs.inc({ model, outcome: 'cancelled' });
          reject(new AbortedError());
          this.notifyIfIdle();
        }
      };
      const entry: Job = {
        start: () => {
          signal.removeEventListener('abort', onAbort);
          queue.running += 1;
          const startedAt = performance.now();
          this.options.metrics.queueWait.observe({ model }, (startedAt - enqueuedAt) / 1000);
          job(signal)
            .then(
              (value) => {
                this.options.metrics.jobs.inc({ model, outcome: 'ok' });
                resolve(value);
              },
              (error: unknown) => {
                this.options.metrics.jobs.inc({ model, outcome: signal.aborted ? 'cancelled' : 'error' });
                reject(error);
              },
            )
            .finally(() => {
              queue.avgRunMs = queue.avgRunMs === 0 ? performance.now() - startedAt : queue.avgRunMs * 0.8 + (performance.now() - startedAt) * 0.2;
              queue.running -= 1;
              this.pump(model, queue);
            });
        },
      };
      signal.addEventListener('abort', onAbort, { once: true });
      queue.waiting.push(entry);
      this.pump(model, queue);
    });
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
      queue.waiting.shift()?.start();
    }
    if (queue.running === 0 && queue.waiting.length === 0) this.queues.delete(model);
    this.notifyIfIdle();
  }

  private notifyIfIdle(): void {
    if (this.pending !== 0) return;
    const waiters = this.idleWaiters;
    this.idleWaiters = [];
    waiters.forEach((w) => w());
  }
}
