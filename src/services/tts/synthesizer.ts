/**
 * Runs TTS requests on a model by one of the three paths of the seed's rule 3:
 *  - continuous batching, for non-streaming requests the model's batch-session hook supports: requests join a
 *    running session between its steps and leave it when done, at most --tts-max-batch-size at a time;
 *  - fixed-window batching, for models with a batch call: requests queued while the model is busy are grouped
 *    (same settings) into one call by the scheduler;
 *  - serial: one request per scheduler job, audio streamed out as the engine produces it.
 * Streaming requests always take the serial path: only it hands out audio before a request finishes.
 */
import { ApiError } from '../../http/errors.js';
import type { SynthesisOptions, SynthesisRequest, TtsBatchSession, TtsModel } from '../../engines/types.js';
import type { Metrics } from '../metrics.js';
import { AbortedError, type Scheduler } from '../scheduler.js';

export type SynthesisPath = 'continuous' | 'fixed-window' | 'serial';

export interface SynthesizerOptions {
  scheduler: Scheduler;
  metrics: Metrics;
  /** Requests per batch (fixed window) or per session (continuous): --tts-max-batch-size. */
  maxBatchSize: number;
  /** Requests that may wait to join a batch session before new ones get 503: --max-queue. */
  maxQueue: number;
}

export class Synthesizer {
  private readonly sessions = new WeakMap<TtsModel, ContinuousBatch>();

  constructor(private readonly options: SynthesizerOptions) {}

  pathFor(model: TtsModel, request: SynthesisRequest, streaming: boolean): SynthesisPath {
    if (streaming) return 'serial';
    if (model.createBatchSession && (model.supportsBatchSession?.(request) ?? true)) return 'continuous';
    if (model.synthesizeBatch) return 'fixed-window';
    return 'serial';
  }

  /** Speaks one request; `onAudio` (streaming) gets audio as it is produced. */
  synthesize(model: TtsModel, request: SynthesisRequest, { signal, onAudio }: SynthesisOptions = {}): Promise<Float32Array> {
    const { scheduler, maxBatchSize } = this.options;
    switch (this.pathFor(model, request, onAudio !== undefined)) {
      case 'continuous':
        return this.sessionOf(model).submit(request, signal);
      case 'fixed-window': {
        const batchCall = (model.synthesizeBatch as NonNullable<TtsModel['synthesizeBatch']>).bind(model);
        return scheduler.runBatched(model.id, request, { key: settingsKey(request), maxSize: maxBatchSize, run: batchCall }, signal, model.concurrency);
      }
      case 'serial':
        return scheduler.run(
          model.id,
          (jobSignal) => model.synthesize(request, { signal: jobSignal, ...(onAudio ? { onAudio } : {}) }),
          signal,
          model.concurrency,
        );
    }
  }

  private sessionOf(model: TtsModel): ContinuousBatch {
    let batch = this.sessions.get(model);
    if (!batch) {
      batch = new ContinuousBatch(model, this.options);
      this.sessions.set(model, batch);
    }
    return batch;
  }
}

/** Requests may share a fixed-window batch when everything but their text is equal. */
function settingsKey({ text: _text, reference, ...settings }: SynthesisRequest): string {
  // a request that clones a voice gets a batch of its own: two uploads are two voices to an engine
  return reference ? `reference#${uniqueKeys++}` : JSON.stringify(settings);
}
let uniqueKeys = 0;

interface Member {
  request: SynthesisRequest;
  signal: AbortSignal | undefined;
  enqueuedAt: number;
  slot: number | null;
  resolve: (samples: Float32Array) => void;
  reject: (error: unknown) => void;
}

/**
 * One model's continuous batch. While requests exist, one scheduler job of the model runs a session loop:
 * admit waiting requests up to the batch size, step, hand out finished audio, repeat.
 */
class ContinuousBatch {
  private readonly waiting: Member[] = [];
  private readonly active = new Map<number, Member>();
  private session: TtsBatchSession | null = null;
  private running = false;

  constructor(
    private readonly model: TtsModel,
    private readonly options: SynthesizerOptions,
  ) {}

  submit(request: SynthesisRequest, signal: AbortSignal | undefined): Promise<Float32Array> {
    if (signal?.aborted) return Promise.reject(new AbortedError());
    if (this.waiting.length >= this.options.maxQueue) {
      this.options.metrics.rejected.inc({ model: this.model.id });
      return Promise.reject(
        new ApiError('queue_full', `the batch queue for model ${this.model.id} is full (${this.options.maxQueue} waiting); retry later`, {
          headers: { 'Retry-After': '1' },
        }),
      );
    }
    return new Promise((resolve, reject) => {
      const member: Member = { request, signal, enqueuedAt: performance.now(), slot: null, resolve, reject };
      signal?.addEventListener('abort', () => this.cancel(member), { once: true });
      this.waiting.push(member);
      this.ensureRunning();
    });
  }

  private cancel(member: Member): void {
    const waitingAt = this.waiting.indexOf(member);
    if (waitingAt >= 0) this.waiting.splice(waitingAt, 1);
    if (member.slot !== null && this.active.delete(member.slot)) this.session?.cancel(member.slot);
    this.options.metrics.jobs.inc({ model: this.model.id, outcome: 'cancelled' });
    member.reject(new AbortedError());
  }

  private ensureRunning(): void {
    if (this.running) return;
    this.running = true;
    // the loop holds one of the model's scheduler slots, so other work on the model queues behind it
    this.options.scheduler
      .run(this.model.id, () => this.loop(), undefined, this.model.concurrency)
      .catch((error: unknown) => {
        for (const member of [...this.active.values(), ...this.waiting.splice(0)]) member.reject(error);
        this.active.clear();
      })
      .finally(() => {
        this.running = false;
        if (this.waiting.length > 0) this.ensureRunning();
      });
  }

  private async loop(): Promise<void> {
    const { metrics, maxBatchSize } = this.options;
    const model = this.model.id;
    const session = (this.model.createBatchSession as NonNullable<TtsModel['createBatchSession']>)(maxBatchSize);
    this.session = session;
    try {
      for (;;) {
        while (this.waiting.length > 0 && this.active.size < maxBatchSize) {
          const member = this.waiting.shift() as Member;
          try {
            member.slot = session.add(member.request);
          } catch (error) {
            // a request the engine refuses fails alone
            metrics.jobs.inc({ model, outcome: 'error' });
            member.reject(error);
            continue;
          }
          this.active.set(member.slot, member);
          metrics.batchJoinWait.observe({ model }, (performance.now() - member.enqueuedAt) / 1000);
        }
        if (this.active.size === 0) return;
        metrics.batchSize.observe({ model, path: 'continuous' }, this.active.size);
        for (const result of await session.step()) {
          const member = this.active.get(result.slot);
          if (!member) continue; // cancelled while the step ran
          this.active.delete(result.slot);
          if ('error' in result) {
            metrics.jobs.inc({ model, outcome: 'error' });
            member.reject(result.error);
          } else {
            metrics.jobs.inc({ model, outcome: 'ok' });
            member.resolve(result.samples);
          }
        }
      }
    } finally {
      this.session = null;
      await session.close();
    }
  }
}
