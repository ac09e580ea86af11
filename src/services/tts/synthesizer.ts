/**
 * Runs TTS requests on a model by one of three paths (docs/architecture.md, "Text-to-speech paths"):
 *  - continuous batching, for non-streaming requests the model's batch-session hook supports: requests join a
 *    running session between its steps and leave it when done, at most --tts-max-batch-size at a time;
 *  - fixed-window batching, for models with a batch call: requests queued while the model is busy are grouped
 *    (same settings) into one call by the scheduler;
 *  - serial: one request per scheduler job, audio streamed out as the engine produces it.
 * Streaming requests always take the serial path: only it hands out audio before a request finishes.
 *
 * A client's request is admitted whole: its pieces (sentences) count as one request in the model's queue, or it
 * is refused whole with 503 before any piece is queued; when one piece fails, the others are cancelled.
 */
import type { SynthesisOptions, SynthesisRequest, TtsBatchSession, TtsModel } from '../../engines/types.js';
import { observeRealTimeFactor, type Metrics } from '../metrics.js';
import { AbortedError, jobTimeoutError, type Admission, type Scheduler } from '../scheduler.js';

export type SynthesisPath = 'continuous' | 'fixed-window' | 'serial';

export interface SynthesizerOptions {
  scheduler: Scheduler;
  metrics: Metrics;
  /** Requests per batch (fixed window) or per session (continuous): --tts-max-batch-size. */
  maxBatchSize: number;
}

export interface SpeakOptions extends SynthesisOptions {
  /** Called when piece `index` has been spoken in full (streaming: its audio all went to `onAudio`). */
  onPieceEnd?: (index: number) => void;
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

  /**
   * Speaks the pieces of one client request: with `onAudio` (streaming) one after another, each piece's audio as
   * it is produced; otherwise all at once through the model's path. Resolves with each piece's samples, in order.
   * Throws 503 `queue_full` before any work when the model's queue holds no room for another request.
   */
  async speak(model: TtsModel, pieces: SynthesisRequest[], { signal, onAudio, onPieceEnd }: SpeakOptions = {}): Promise<Float32Array[]> {
    if (signal?.aborted) throw new AbortedError();
    const started = performance.now();
    const admission = this.options.scheduler.admit(model);
    // one failed piece ends the request: the pieces still waiting must not run for nobody
    const failed = new AbortController();
    const speakPiece = async (request: SynthesisRequest, index: number): Promise<Float32Array> => {
      // a signal per piece: engines add a listener to the signal they get, and a request's would pile them up
      const pieceSignal = signal ? AbortSignal.any([signal, failed.signal]) : failed.signal;
      try {
        const samples = await this.synthesize(admission, model, request, { signal: pieceSignal, ...(onAudio ? { onAudio } : {}) });
        onPieceEnd?.(index);
        return samples;
      } catch (error) {
        failed.abort();
        throw error;
      }
    };
    try {
      const spoken = onAudio ? await this.inOrder(pieces, speakPiece) : await this.allAtOnce(pieces, speakPiece);
      const seconds = spoken.reduce((samples, piece) => samples + piece.length, 0) / model.sampleRate;
      observeRealTimeFactor(this.options.metrics, model.id, 'tts', performance.now() - started, seconds);
      return spoken;
    } finally {
      admission.release();
    }
  }

  /** Streaming: one piece after another, so their audio comes out in order. */
  private async inOrder(pieces: SynthesisRequest[], speakPiece: (request: SynthesisRequest, index: number) => Promise<Float32Array>): Promise<Float32Array[]> {
    const spoken: Float32Array[] = [];
    for (const [index, request] of pieces.entries()) spoken.push(await speakPiece(request, index));
    return spoken;
  }

  /** Whole: every piece at once through the model's path; the first real failure, not the cancellations it caused. */
  private async allAtOnce(
    pieces: SynthesisRequest[],
    speakPiece: (request: SynthesisRequest, index: number) => Promise<Float32Array>,
  ): Promise<Float32Array[]> {
    const settled = await Promise.allSettled(pieces.map(speakPiece));
    const failure = settled.find((s) => s.status === 'rejected' && !(s.reason instanceof AbortedError)) ?? settled.find((s) => s.status === 'rejected');
    if (failure) throw (failure as PromiseRejectedResult).reason;
    return settled.map((s) => (s as PromiseFulfilledResult<Float32Array>).value);
  }

  /** Speaks one piece by its path, under the request's admission. */
  private synthesize(admission: Admission, model: TtsModel, request: SynthesisRequest, { signal, onAudio }: SynthesisOptions): Promise<Float32Array> {
    const { maxBatchSize } = this.options;
    switch (this.pathFor(model, request, onAudio !== undefined)) {
      case 'continuous':
        return this.sessionOf(model).submit(request, signal);
      case 'fixed-window': {
        const batchCall = (model.synthesizeBatch as NonNullable<TtsModel['synthesizeBatch']>).bind(model);
        const key = model.mixedBatches ? 'any' : settingsKey(request);
        return admission.runBatched(request, { key, maxSize: maxBatchSize, run: batchCall }, signal);
      }
      case 'serial':
        return admission.run((jobSignal) => model.synthesize(request, { signal: jobSignal, ...(onAudio ? { onAudio } : {}) }), signal);
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

/** Requests may share a fixed-window batch when everything but their text is equal (unless the model mixes them). */
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
  /** Ends the member when it has been in the session for longer than a job may run (--job-timeout-s). */
  deadline: NodeJS.Timeout | undefined;
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

  /** Adds a piece of an admitted request (the request's admission bounds how many wait). */
  submit(request: SynthesisRequest, signal: AbortSignal | undefined): Promise<Float32Array> {
    if (signal?.aborted) return Promise.reject(new AbortedError());
    return new Promise((resolve, reject) => {
      const member: Member = { request, signal, enqueuedAt: performance.now(), slot: null, deadline: undefined, resolve, reject };
      signal?.addEventListener('abort', () => this.cancel(member, new AbortedError(), 'cancelled'), { once: true });
      this.waiting.push(member);
      this.ensureRunning();
    });
  }

  /** Takes a member out, waiting or in the session, and fails it with `error` (a no-op once it has ended). */
  private cancel(member: Member, error: Error, outcome: 'cancelled' | 'timeout'): void {
    const waitingAt = this.waiting.indexOf(member);
    const active = member.slot !== null && this.active.get(member.slot) === member;
    if (waitingAt < 0 && !active) return;
    if (waitingAt >= 0) this.waiting.splice(waitingAt, 1);
    if (active) {
      this.active.delete(member.slot as number);
      this.session?.cancel(member.slot as number);
    }
    clearTimeout(member.deadline);
    this.options.metrics.jobs.inc({ model: this.model.id, outcome });
    member.reject(error);
  }

  private ensureRunning(): void {
    if (this.running) return;
    this.running = true;
    // the loop holds one of the model's scheduler slots, so other work on the model queues behind it; it serves
    // requests already admitted, so it is never refused
    const admission = this.options.scheduler.admit(this.model, { exempt: true });
    admission
      .run(() => this.loop())
      .catch((error: unknown) => {
        for (const member of [...this.active.values(), ...this.waiting.splice(0)]) {
          clearTimeout(member.deadline);
          member.reject(error);
        }
        this.active.clear();
      })
      .finally(() => {
        admission.release();
        this.running = false;
        if (this.waiting.length > 0) this.ensureRunning();
      });
  }

  private async loop(): Promise<void> {
    const { metrics, maxBatchSize, scheduler } = this.options;
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
          const limitMs = scheduler.jobTimeoutMs();
          if (limitMs > 0) member.deadline = setTimeout(() => this.cancel(member, jobTimeoutError(model, limitMs), 'timeout'), limitMs);
        }
        if (this.active.size === 0) return;
        metrics.batchSize.observe({ model, path: 'continuous' }, this.active.size);
        for (const result of await session.step()) {
          const member = this.active.get(result.slot);
          if (!member) continue; // cancelled while the step ran
          this.active.delete(result.slot);
          clearTimeout(member.deadline);
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
