/**
 * Live transcription of one audio stream: the engine side that both WebSocket protocols share
 * (sessions/realtime.ts, sessions/vad-transcription.ts). PCM16 at the client's rate is resampled to the model's;
 * a turn opens at the first audio (manual mode) or at speech onset found by the streaming Silero VAD
 * (`server_vad`); the model's streaming session turns the turn's audio into deltas and a transcript. Models are
 * leased, checked and scheduled through the Transcriber, like file transcriptions. Callers make one call at a time
 * and await it.
 */
import type { SttModel, SttStreamingSession, VadModel, VadStream } from '../../engines/types.js';
import { ApiError } from '../../errors.js';
import { StreamResampler } from '../audio/resample.js';
import type { ModelLease } from '../registry.js';
import type { ScheduledModel } from '../scheduler.js';
import type { SttPlan, Transcriber } from './transcriber.js';

const VAD_RATE = 16000;
/** The Silero VAD's 512-sample frames at 16 kHz: the session clock ticks in these. */
const VAD_FRAME_MS = 32;

export interface TurnDetection {
  type: 'server_vad';
  /** Speech probability at or above which a frame counts as speech. */
  threshold: number;
  /** Audio before the onset that goes into the turn. */
  prefix_padding_ms: number;
  /** Silence that ends a turn. */
  silence_duration_ms: number;
}

export const DEFAULT_TURN_DETECTION: TurnDetection = { type: 'server_vad', threshold: 0.5, prefix_padding_ms: 300, silence_duration_ms: 500 };

export interface LiveSettings {
  model: string | null;
  language: string | null;
  prompt: string | null;
  /** Rate of the PCM16 input. */
  rate: number;
  /** null: manual mode, turns end at `commit()`. */
  turnDetection: TurnDetection | null;
}

/** A finished turn; times on the session clock (ms of audio since the session began). */
export interface CompletedTurn {
  transcript: string;
  /** Seconds of audio the model heard. */
  seconds: number;
  startMs: number;
  endMs: number;
}

/** What a turn reports, in this order: opened, deltas, stopped (server_vad), committed, deltas, completed. */
export interface TurnListener {
  /** The turn's first audio arrived (`audioStartMs` null) or the VAD found speech (onset − prefix padding). */
  opened(audioStartMs: number | null): void;
  delta(text: string): void;
  /** The VAD's silence ran out at `audioEndMs`. */
  stopped(audioEndMs: number): void;
  committed(): void;
  completed(turn: CompletedTurn): void;
}

/** A request the stream cannot serve; `fatal` ones end the session (no model, a model that cannot stream). */
export class LiveError extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly param: string | null = null,
    readonly fatal = false,
  ) {
    super(message);
  }

  /** `error` as the client should hear it: API errors (an unknown model, say) end the session; null when unknown. */
  static from(error: unknown): LiveError | null {
    if (error instanceof LiveError) return error;
    return error instanceof ApiError ? new LiveError(error.code, error.message, error.param, true) : null;
  }
}

export interface LiveOptions {
  /** Names the model-less remedy in the fatal error, e.g. "pass ?model=, … or start the server with --realtime-model". */
  noModelHint: string;
  /** --realtime-transcription-delay-ms, for models that declare it. */
  delayMs: number | null;
  /** True while more of the client's messages wait behind the one being handled (the session is behind). */
  moreWaiting: () => boolean;
}

interface Engine {
  model: SttModel;
  session: SttStreamingSession;
}

interface Turn {
  /** Model-rate samples the engine got. */
  samples: number;
  transcript: string;
  startMs: number;
}

export class LiveTranscriber {
  private current: LiveSettings;
  private lease: { lease: ModelLease<SttModel>; plan: SttPlan } | null = null;
  private stream: SttStreamingSession | null = null;
  private resampler: StreamResampler | null = null;
  private turn: Turn | null = null;
  /** Model-rate samples received since the session began: the clock of manual mode. */
  private received = 0;

  // server_vad state
  /** Model-rate audio since `historyStart` (absolute sample index): the lead-in and the open turn's audio. */
  private history = new Float32Array(0);
  private historyStart = 0;
  /** Absolute model-rate index up to which the open turn's audio went to the engine. */
  private fedUntil = 0;
  private vadFrames = 0;
  private speaking = false;
  private silentMs = 0;
  private vad: { lease: ModelLease<VadModel>; stream: VadStream; resampler: StreamResampler | null } | null = null;

  constructor(
    private readonly stt: Transcriber,
    private readonly options: LiveOptions,
    settings: LiveSettings,
    private readonly listener: TurnListener,
    /** The session's: aborts engine work when the client leaves. */
    private readonly signal: AbortSignal,
  ) {
    this.current = { ...settings };
  }

  get settings(): Readonly<LiveSettings> {
    return this.current;
  }

  get turnOpen(): boolean {
    return this.turn !== null;
  }

  /** Loads what the settings need (the model, its streaming session, the VAD) before any audio arrives. */
  async prepare(): Promise<SttModel> {
    const { model } = await this.engine();
    if (this.current.turnDetection) await this.vadFor(model.sampleRate);
    return model;
  }

  /** Applies new settings; the model, rate, language and prompt change only between turns. */
  async configure(next: LiveSettings): Promise<void> {
    const now = this.current;
    const changesAudio = next.model !== now.model || next.rate !== now.rate || next.language !== now.language || next.prompt !== now.prompt;
    if (changesAudio && this.turn)
      throw new LiveError('invalid_request_error', 'the model, rate, language and prompt can change only between turns (commit or clear first)', 'session');
    // the model was checked against the language when it was leased: a new language leases it anew
    if (next.model !== now.model || next.language !== now.language) await this.dropModel();
    else if (next.prompt !== now.prompt) await this.dropStream();
    if (next.rate !== now.rate) this.resampler = null;
    this.current = { ...next };
  }

  /** PCM16 LE mono at the configured rate. */
  async append(pcm16: Buffer): Promise<void> {
    const engine = await this.engine();
    const samples = this.resamplerFor(engine.model).processPcm16(pcm16);
    const clockMs = this.clockMs(engine.model);
    this.received += samples.length;
    if (this.current.turnDetection) return this.detectTurns(engine, samples, this.current.turnDetection);
    if (samples.length === 0) return;
    this.openTurn(clockMs, null);
    await this.feed(engine, samples);
  }

  /** Ends the open turn at what was appended so far. */
  async commit(): Promise<void> {
    if (!this.turn || this.turn.samples === 0)
      throw new LiveError('input_audio_buffer_commit_empty', 'the input audio buffer is empty: append audio before committing');
    await this.endTurn(await this.engine());
  }

  /** The stream stops: a turn in progress ends where the audio does. Resolves false when none was open. */
  async flush(): Promise<boolean> {
    if (!this.turn) return false;
    await this.endTurn(await this.engine());
    return true;
  }

  /** Drops the open turn's audio and text; the session clock runs on. */
  async clear(): Promise<void> {
    if (this.stream) await this.stream.reset();
    this.resampler?.reset();
    this.turn = null;
    this.speaking = false;
    this.fedUntil = this.historyStart + this.history.length;
  }

  async close(): Promise<void> {
    await this.dropModel();
    await this.vad?.stream.close().catch(() => undefined);
    this.vad?.lease.release();
    this.vad = null;
  }

  // ---- turns ----

  private openTurn(startMs: number, audioStartMs: number | null): void {
    if (this.turn) return;
    this.turn = { samples: 0, transcript: '', startMs };
    this.listener.opened(audioStartMs);
  }

  private async feed(engine: Engine, samples: Float32Array): Promise<void> {
    if (samples.length === 0) return;
    if (this.turn) this.turn.samples += samples.length;
    const more = this.options.moreWaiting();
    this.delta(await this.run(engine.model, (signal) => engine.session.feed(samples, signal, more)));
  }

  /** What is left of the turn's audio to the engine, then committed, the rest of the text, and completed. */
  private async endTurn(engine: Engine): Promise<void> {
    if (this.current.turnDetection) {
      await this.feed(engine, this.history.subarray(this.fedUntil - this.historyStart));
      this.fedUntil = this.historyStart + this.history.length;
      this.speaking = false;
      this.listener.committed();
    } else {
      const tail = this.resamplerFor(engine.model).flush();
      this.received += tail.length;
      this.listener.committed();
      await this.feed(engine, tail);
    }
    await this.completeTurn(engine, this.clockMs(engine.model));
  }

  private async completeTurn(engine: Engine, endMs: number): Promise<void> {
    const turn = this.turn as Turn;
    const { delta } = await this.run(engine.model, (signal) => engine.session.finish(signal));
    this.delta(delta);
    this.turn = null;
    this.listener.completed({
      transcript: turn.transcript,
      seconds: Math.round((turn.samples / engine.model.sampleRate) * 1000) / 1000,
      startMs: turn.startMs,
      endMs,
    });
  }

  private delta(text: string): void {
    if (!text || !this.turn) return;
    this.turn.transcript += text;
    this.listener.delta(text);
  }

  private clockMs(model: SttModel): number {
    return Math.round((this.received / model.sampleRate) * 1000);
  }

  // ---- server_vad: the Silero VAD opens and closes turns ----

  private async detectTurns(engine: Engine, samples: Float32Array, detection: TurnDetection): Promise<void> {
    const rate = engine.model.sampleRate;
    const vad = await this.vadFor(rate);
    const appended = new Float32Array(this.history.length + samples.length);
    appended.set(this.history);
    appended.set(samples, this.history.length);
    this.history = appended;
    const at16k = vad.resampler ? vad.resampler.process(samples) : samples;
    const probabilities = await this.run(vad.lease.model, () => vad.stream.process(at16k));
    const position = (ms: number): number => Math.round((ms * rate) / 1000);
    for (const probability of probabilities) {
      const frameStartMs = this.vadFrames * VAD_FRAME_MS;
      this.vadFrames++;
      if (!this.speaking) {
        if (probability < detection.threshold) continue;
        this.speaking = true;
        this.silentMs = 0;
        const audioStartMs = Math.max(0, frameStartMs - detection.prefix_padding_ms);
        this.fedUntil = Math.max(this.historyStart, position(audioStartMs));
        this.openTurn(audioStartMs, audioStartMs);
        continue;
      }
      this.silentMs = probability < detection.threshold ? this.silentMs + VAD_FRAME_MS : 0;
      if (this.silentMs < detection.silence_duration_ms) continue;
      const audioEndMs = frameStartMs + VAD_FRAME_MS;
      const end = Math.min(position(audioEndMs), this.historyStart + this.history.length);
      await this.feed(engine, this.history.subarray(this.fedUntil - this.historyStart, end - this.historyStart));
      this.fedUntil = end;
      this.speaking = false;
      this.listener.stopped(audioEndMs);
      this.listener.committed();
      await this.completeTurn(engine, audioEndMs);
    }
    if (this.speaking) {
      await this.feed(engine, this.history.subarray(this.fedUntil - this.historyStart));
      this.fedUntil = this.historyStart + this.history.length;
    }
    // keep only what a turn opening later can still need as lead-in
    const keepFrom = Math.max(
      this.historyStart,
      Math.min(this.fedUntil, this.historyStart + this.history.length - position(detection.prefix_padding_ms + VAD_FRAME_MS)),
    );
    this.history = this.history.slice(keepFrom - this.historyStart);
    this.historyStart = keepFrom;
  }

  private async vadFor(rate: number): Promise<NonNullable<typeof this.vad>> {
    if (!this.vad) {
      const lease = await this.stt.leaseVad(this.signal);
      this.vad = { lease, stream: await lease.model.openStream(), resampler: rate === VAD_RATE ? null : new StreamResampler(rate, VAD_RATE) };
    }
    return this.vad;
  }

  // ---- engines ----

  /**
   * A scheduler job on the session's behalf. Each job gets a signal of its own that follows the session's: engines
   * listen on the signal they are given, and listeners on the session's long-lived signal would pile up.
   */
  private async run<T>(model: ScheduledModel, job: (signal: AbortSignal) => Promise<T>): Promise<T> {
    const forJob = new AbortController();
    const follow = (): void => forJob.abort();
    if (this.signal.aborted) forJob.abort();
    this.signal.addEventListener('abort', follow, { once: true });
    try {
      return await this.stt.run(model, job, forJob.signal);
    } finally {
      this.signal.removeEventListener('abort', follow);
    }
  }

  private async engine(): Promise<Engine> {
    const { model: modelId, language, prompt } = this.current;
    if (!modelId) throw new LiveError('model_not_set', `no model: ${this.options.noModelHint}`, 'model', true);
    this.lease ??= await this.stt.lease(modelId, { language }, this.signal);
    const { lease, plan } = this.lease;
    const model = lease.model;
    if (!model.createStreamingSession) throw new LiveError('model_not_streaming', `model ${modelId} cannot transcribe live`, 'model', true);
    this.stream ??= await model.createStreamingSession({
      language: plan.language,
      prompt,
      ...(this.options.delayMs !== null && model.declaresDelay ? { delayMs: this.options.delayMs } : {}),
    });
    return { model, session: this.stream };
  }

  private resamplerFor(model: SttModel): StreamResampler {
    this.resampler ??= new StreamResampler(this.current.rate, model.sampleRate);
    return this.resampler;
  }

  private async dropStream(): Promise<void> {
    await this.stream?.close().catch(() => undefined);
    this.stream = null;
  }

  private async dropModel(): Promise<void> {
    await this.dropStream();
    this.lease?.lease.release();
    this.lease = null;
    this.resampler = null;
  }
}
