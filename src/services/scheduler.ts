/**
 * Per-model work queues in front of the native thread pool. Each model runs at most `concurrency` jobs at a
 * time (each job is one or more native calls on libuv workers); the rest wait.
 *
 * Admission is per request, not per job: `admit` takes a request in whole (all the jobs it will run) or refuses it
 * whole with 503 and a Retry-After estimate, before any of its work is queued. A model holds at most its running
 * capacity plus `maxQueue` admitted requests. Waiting jobs are served round-robin across requests, so a request
 * of a hundred sentences does not make a one-sentence request behind it wait for all of them. A job whose client
 * goes away while it waits is dropped without running; a running job sees the same AbortSignal and cancels its
 * native work.
 *
 * Fixed-window batching (`runBatched`): items queued while the model's slots are busy are grouped when a slot
 * frees: the head item takes every waiting item with the same batch key along, up to the batch's size, and one
 * call runs them all.
 *
 * A running job has a time limit (--job-timeout-s; a job may ask for more, a transcription as long as its audio):
 * past it, its signal fires as if the client had left, and its requests are answered 504 `job_timeout` at once; the
 * slot frees when the work has actually stopped.
 */
import type { LoadedModel } from '../engines/types.js';
import { ApiError } from '../errors.js';
import { Gauge, type Metrics } from './metrics.js';

/** What the scheduler reads of a model: its queue's name and how many of its jobs may run at once. */
export type ScheduledModel = Pick<LoadedModel, 'id' | 'concurrency' | 'batchSize'>;

export interface SchedulerOptions {
  maxQueue: number;
  concurrency: number;
  metrics: Metrics;
  /** --job-timeout-s, in milliseconds: the longest a job may run; 0 for no limit. */
  jobTimeoutMs?: number;
}

/** What a job asks of the time limit. */
export interface JobLimits {
  /** The job may run at least this long, whatever --job-timeout-s says (a transcription: its audio's duration). */
  minTimeoutMs?: number;
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
  minTimeoutMs?: number;
  /** Work admitted exempt (a batch loop): its members have limits of their own, the loop has none. */
  unlimited?: boolean;
  /** A batch item with its spec. */
  item?: unknown;
  batch?: BatchSpec<unknown, unknown>;
}

/** The waiting jobs of one admitted request. */
interface Lane {
  entries: Entry[];
}

interface ModelQueue {
  running: number;
  /** Jobs that may run at once (the server's --model-concurrency, or less for the model). */
  limit: number;
  /** Lanes with waiting jobs, in the order they are served (round-robin). */
  lanes: Lane[];
  /** Requests admitted and not yet released (what --max-queue bounds). */
  admitted: number;
  /** Admissions not yet released, exempt ones included: the queue lives while any exists. */
  holders: number;
  /** Moving average of job run time, for Retry-After. */
  avgRunMs: number;
}

/** The longest delay setTimeout takes (2^31 - 1 ms). */
const MAX_TIMER_MS = 2 ** 31 - 1;

export class AbortedError extends Error {
  override name = 'AbortError';
  constructor() {
    super('the request was aborted');
  }
}

/** The answer to a request whose job ran past its time limit. */
export function jobTimeoutError(model: string, limitMs: number): ApiError {
  return new ApiError(
    'job_timeout',
    `model ${model} took more than ${Math.round(limitMs / 1000)} s on one job of this request, so it was stopped (--job-timeout-s)`,
    // the same request would most likely run as long again: the vendor's SDK retries a 5xx unless told not to
    { headers: { 'x-should-retry': 'false' } },
  );
}

/** One admitted request of a model: its jobs never meet a full queue. Release it once the request is over. */
export interface Admission {
  run<T>(job: (signal: AbortSignal) => Promise<T>, signal?: AbortSignal, limits?: JobLimits): Promise<T>;
  runBatched<I, R>(item: I, batch: BatchSpec<I, R>, signal?: AbortSignal): Promise<R>;
  release(): void;
}

export class Scheduler {
  private readonly queues = new Map<string, ModelQueue>();
  private idleWaiters: (() => void)[] = [];

  constructor(private readonly options: SchedulerOptions) {
    options.metrics.add(
      new Gauge('voxd_queue_depth', 'Jobs waiting per model', () => [...this.queues].map(([model, q]) => ({ labels: { model }, value: waitingJobs(q) }))),
    );
    options.metrics.add(
      new Gauge('voxd_jobs_running', 'Jobs running per model', () => [...this.queues].map(([model, q]) => ({ labels: { model }, value: q.running }))),
    );
    // an autoscaler's target: 1 means every slot of the busiest model is taken, 2 that as many jobs again wait
    options.metrics.add(
      new Gauge('voxd_saturation', 'Jobs running and waiting per running slot, for the busiest model (0 when idle)', () => [
        { value: Math.max(0, ...[...this.queues.values()].map((q) => (q.running + waitingJobs(q)) / q.limit)) },
      ]),
    );
  }

  /**
   * Admits one request of `model`, or throws 503 `queue_full` when the model already holds its running capacity
   * plus --max-queue requests. A model's own `concurrency` lowers the server's per-model limit for engines that use
   * every core in one job; a model that batches runs its `batchSize` at once. `exempt` admits work the server owes to requests already admitted (a batch loop): it is
   * never refused, not counted and not timed.
   */
  admit({ id: model, concurrency: modelConcurrency, batchSize }: ScheduledModel, { exempt = false } = {}): Admission {
    const queue = this.queueOf(model, modelConcurrency, batchSize);
    if (!exempt && queue.admitted >= queue.limit + this.options.maxQueue) {
      if (queue.holders === 0 && queue.running === 0) this.queues.delete(model);
      this.options.metrics.rejected.inc({ model });
      const waitingRequests = queue.admitted - queue.limit + 1;
      const retryAfter = Math.max(1, Math.ceil((queue.avgRunMs * waitingRequests) / queue.limit / 1000));
      throw new ApiError('queue_full', `the queue for model ${model} is full (${this.options.maxQueue} requests waiting); retry later`, {
        headers: { 'Retry-After': String(retryAfter) },
      });
    }
    if (!exempt) queue.admitted += 1;
    queue.holders += 1;
    const lane: Lane = { entries: [] };
    let released = false;
    return {
      run: (job, signal = new AbortController().signal, limits = {}) =>
        this.enqueue(model, queue, lane, { job: job as Entry['job'], minTimeoutMs: limits.minTimeoutMs ?? 0, unlimited: exempt }, signal) as Promise<never>,
      runBatched: (item, batch, signal = new AbortController().signal) =>
        this.enqueue(model, queue, lane, { item, batch: batch as BatchSpec<unknown, unknown> }, signal) as Promise<never>,
      release: () => {
        if (released) return;
        released = true;
        if (!exempt) queue.admitted -= 1;
        queue.holders -= 1;
        this.pump(model, queue);
      },
    };
  }

  /** Runs `job` for `model` as a request of its own when a slot is free; see `admit`. */
  async run<T>(model: ScheduledModel, job: (signal: AbortSignal) => Promise<T>, signal?: AbortSignal, limits?: JobLimits): Promise<T> {
    if (signal?.aborted) throw new AbortedError();
    const admission = this.admit(model);
    try {
      return await admission.run(job, signal, limits);
    } finally {
      admission.release();
    }
  }

  /** How long a job may run before it is stopped (0: no limit), given what it asks for. */
  jobTimeoutMs(minTimeoutMs = 0): number {
    const limit = this.options.jobTimeoutMs ?? 0;
    // past what a timer holds (about 24.8 days), Node would fire it at once
    return limit > 0 ? Math.min(Math.max(limit, minTimeoutMs), MAX_TIMER_MS) : 0;
  }

  /** Jobs running or waiting, across all models. */
  get pending(): number {
    let n = 0;
    for (const q of this.queues.values()) n += q.running + waitingJobs(q);
    return n;
  }

  /** Resolves once no job runs or waits (graceful shutdown). */
  idle(): Promise<void> {
    if (this.pending === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private enqueue(
    model: string,
    queue: ModelQueue,
    lane: Lane,
    work: Pick<Entry, 'job' | 'item' | 'batch' | 'minTimeoutMs' | 'unlimited'>,
    signal: AbortSignal,
  ): Promise<unknown> {
    if (signal.aborted) return Promise.reject(new AbortedError());
    return new Promise((resolve, reject) => {
      const entry: Entry = {
        ...work,
        signal,
        enqueuedAt: performance.now(),
        resolve,
        reject,
        onAbort: () => {
          const i = lane.entries.indexOf(entry);
          if (i < 0) return;
          lane.entries.splice(i, 1);
          if (lane.entries.length === 0) queue.lanes.splice(queue.lanes.indexOf(lane), 1);
          this.options.metrics.jobs.inc({ model, outcome: 'cancelled' });
          reject(new AbortedError());
          this.pump(model, queue);
        },
      };
      signal.addEventListener('abort', entry.onAbort, { once: true });
      if (lane.entries.length === 0) queue.lanes.push(lane);
      lane.entries.push(entry);
      this.pump(model, queue);
    });
  }

  private queueOf(model: string, modelConcurrency: number | undefined, batchSize: number | undefined): ModelQueue {
    let queue = this.queues.get(model);
    if (!queue) {
      queue = { running: 0, limit: this.options.concurrency, lanes: [], admitted: 0, holders: 0, avgRunMs: 0 };
      this.queues.set(model, queue);
    }
    queue.limit = Math.max(1, batchSize ?? Math.min(this.options.concurrency, modelConcurrency ?? this.options.concurrency));
    return queue;
  }

  private pump(model: string, queue: ModelQueue): void {
    while (queue.running < queue.limit && queue.lanes.length > 0) {
      const lane = queue.lanes[0] as Lane;
      const head = lane.entries.shift() as Entry;
      const companions = head.batch ? this.takeCompanions(queue, head.batch) : [];
      // the lane goes to the back: the next slot serves another request's job first
      queue.lanes = [...queue.lanes.filter((l) => l !== lane && l.entries.length > 0), ...(lane.entries.length > 0 ? [lane] : [])];
      this.start(model, queue, [head, ...companions]);
    }
    if (queue.running === 0 && queue.lanes.length === 0 && queue.holders === 0) this.queues.delete(model);
    this.notifyIfIdle();
  }

  /** Removes and returns the waiting items, of any request, that may share the head's batch. */
  private takeCompanions(queue: ModelQueue, batch: BatchSpec<unknown, unknown>): Entry[] {
    const taken: Entry[] = [];
    for (const lane of queue.lanes) {
      for (let i = 0; i < lane.entries.length && taken.length + 1 < batch.maxSize;) {
        const entry = lane.entries[i] as Entry;
        if (entry.batch?.key === batch.key) {
          lane.entries.splice(i, 1);
          taken.push(entry);
        } else {
          i++;
        }
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
    const signal = head.batch ? whenAllAborted(entries.map((e) => e.signal)) : head.signal;
    // past the time limit the work is told to stop, and its requests are answered now: work that stops late (a
    // native step in flight) still holds the slot until it has
    let settled = false;
    const settle = (outcome: (entry: Entry, i: number) => void): void => {
      if (settled) return;
      settled = true;
      entries.forEach(outcome);
    };
    const limitMs = head.unlimited ? 0 : this.jobTimeoutMs(Math.max(...entries.map((e) => e.minTimeoutMs ?? 0)));
    const deadline = limitMs > 0 ? new AbortController() : null;
    const timer = deadline
      ? setTimeout(() => {
          deadline.abort();
          settle((entry) => {
            this.options.metrics.jobs.inc({ model, outcome: 'timeout' });
            entry.reject(jobTimeoutError(model, limitMs));
          });
        }, limitMs)
      : undefined;
    const jobSignal = deadline ? AbortSignal.any([signal, deadline.signal]) : signal;
    let work: Promise<unknown[]>;
    if (head.batch) {
      this.options.metrics.batchSize.observe({ model, path: 'fixed-window' }, entries.length);
      work = head.batch.run(
        entries.map((e) => e.item),
        jobSignal,
      );
    } else {
      work = (head.job as NonNullable<Entry['job']>)(jobSignal).then((value) => [value]);
    }
    work
      .then(
        (values) => {
          if (values.length !== entries.length) throw new Error(`a batch of ${entries.length} returned ${values.length} results`);
          settle((entry, i) => {
            this.options.metrics.jobs.inc({ model, outcome: 'ok' });
            entry.resolve(values[i]);
          });
        },
        (error: unknown) =>
          settle((entry) => {
            this.options.metrics.jobs.inc({ model, outcome: entry.signal.aborted ? 'cancelled' : 'error' });
            entry.reject(entry.signal.aborted ? new AbortedError() : error);
          }),
      )
      .catch((error: unknown) => settle((entry) => entry.reject(error)))
      .finally(() => {
        clearTimeout(timer);
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

function waitingJobs(queue: ModelQueue): number {
  return queue.lanes.reduce((sum, lane) => sum + lane.entries.length, 0);
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
