/**
 * One WS /v1/realtime transcription session (the vendor's realtime protocol, voxd-api.md): session snapshots,
 * audio appends resampled from the declared rate to the model's, turns opened by the first append (manual mode)
 * or by the Silero VAD (`server_vad`), deltas from the model's streaming session as the text stabilises, and
 * `completed` when a turn is committed. Engine work goes through the scheduler on worker threads; the session
 * handles its events one at a time, in order.
 */
import { randomUUID } from 'node:crypto';
import type { SttModel, SttStreamingSession, VadModel, VadStream } from '../engines/types.js';
import { ApiError } from '../http/errors.js';
import type { WsConnection } from '../http/websocket.js';
import type { Logger } from '../logger.js';
import { StreamResampler } from '../services/audio/resample.js';
import type { ModelLease, ModelRegistry } from '../services/registry.js';
import type { Scheduler } from '../services/scheduler.js';

/** The rate of `audio/pcm` input when the client declares none (the vendor's). */
export const DEFAULT_INPUT_RATE = 24000;
const VAD_RATE = 16000;
const VAD_FRAME_MS = 32;

/** The vendor's limit for the audio of one append. */
export const MAX_APPEND_BYTES = 15 * 1024 * 1024;

export interface RealtimeContext {
  registry: ModelRegistry;
  scheduler: Scheduler;
  logger: Logger;
  /** --realtime-model, used when neither the query nor session.update names one. */
  defaultModel: string | null;
  /** --vad-model: the streaming Silero VAD of server_vad turn detection. */
  vadModel: string;
  delayMs: number | null;
}

interface TurnDetection {
  type: 'server_vad';
  threshold: number;
  prefix_padding_ms: number;
  silence_duration_ms: number;
}

type Family = 'ga' | 'beta';

interface ClientEvent {
  type?: unknown;
  event_id?: unknown;
  [key: string]: unknown;
}

/** An `error` event's payload, echoing the client event that caused it. */
class SessionError extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly param: string | null = null,
    readonly fatal = false,
  ) {
    super(message);
  }
}

function eventId(): string {
  return `event_${randomUUID().replace(/-/g, '').slice(0, 20)}`;
}

export class RealtimeSession {
  readonly id = `sess_${randomUUID().replace(/-/g, '').slice(0, 20)}`;
  private family: Family = 'ga';
  private modelId: string | null;
  private language: string | null = null;
  private prompt: string | null = null;
  private inputRate = DEFAULT_INPUT_RATE;
  private turnDetection: TurnDetection | null = null;

  private lease: ModelLease<SttModel> | null = null;
  private stream: SttStreamingSession | null = null;
  private resampler: StreamResampler | null = null;
  /** The open turn: its item and what was appended to it. */
  private item: { id: string; samples: number; transcript: string } | null = null;
  private previousItemId: string | null = null;
  /** Events are handled one after another; engine calls inside them are awaited. */
  private queue: Promise<void> = Promise.resolve();
  private closed = false;
  private readonly abort = new AbortController();

  constructor(
    private readonly connection: WsConnection,
    private readonly context: RealtimeContext,
    queryModel: string | null,
  ) {
    this.modelId = queryModel ?? context.defaultModel;
    this.emit(this.family === 'ga' ? 'session.created' : 'transcription_session.created', { session: this.snapshot() });
  }

  /** A message from the client: queued behind the events before it. */
  receive(data: string | Buffer, isBinary: boolean): void {
    this.queue = this.queue
      .then(() => this.handle(data, isBinary))
      .catch((error: unknown) => this.context.logger.error({ err: error, session: this.id }, 'realtime event failed'));
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.abort.abort();
    await this.queue;
    await this.stream?.close().catch(() => undefined);
    await this.vad?.stream.close().catch(() => undefined);
    this.vad?.lease.release();
    this.lease?.release();
  }

  private async handle(data: string | Buffer, isBinary: boolean): Promise<void> {
    if (this.closed) return;
    let event: ClientEvent = {};
    try {
      if (isBinary)
        throw new SessionError(
          'invalid_request_error',
          'binary frames are not part of the protocol: send JSON events (audio as base64 in input_audio_buffer.append)',
        );
      try {
        event = JSON.parse(data as string) as ClientEvent;
      } catch {
        throw new SessionError('invalid_json', 'the message is not valid JSON');
      }
      if (typeof event !== 'object' || event === null || Array.isArray(event))
        throw new SessionError('invalid_request_error', 'an event must be a JSON object');
      await this.dispatch(event);
    } catch (error) {
      this.fail(error, event);
    }
  }

  private async dispatch(event: ClientEvent): Promise<void> {
    switch (event.type) {
      case 'session.update':
        return this.update(event, 'ga');
      case 'transcription_session.update':
        return this.update(event, 'beta');
      case 'input_audio_buffer.append':
        return this.append(event);
      case 'input_audio_buffer.commit':
        return this.commit();
      case 'input_audio_buffer.clear':
        return this.clear();
      default:
        throw new SessionError('invalid_request_error', `unknown event type ${JSON.stringify(event.type)}`, 'type');
    }
  }

  private fail(error: unknown, event: ClientEvent): void {
    const known = error instanceof SessionError ? error : error instanceof ApiError ? new SessionError(error.code, error.message, error.param, true) : null;
    if (!known) this.context.logger.error({ err: error, session: this.id }, 'realtime session failed');
    const reported = known ?? new SessionError('server_error', 'internal server error', null, true);
    this.emit('error', {
      error: {
        type: reported.code === 'server_error' ? 'server_error' : 'invalid_request_error',
        code: reported.code,
        message: reported.message,
        param: reported.param,
        event_id: typeof event.event_id === 'string' ? event.event_id : null,
      },
    });
    if (reported.fatal) this.connection.close(1011, reported.message);
  }

  // ---- session configuration ----

  private async update(event: ClientEvent, family: Family): Promise<void> {
    this.family = family;
    const session = (event.session ?? {}) as Record<string, unknown>;
    if (typeof session !== 'object' || session === null) throw new SessionError('invalid_request_error', 'session must be an object', 'session');
    const input = family === 'ga' ? (((session.audio as Record<string, unknown>)?.input ?? {}) as Record<string, unknown>) : session;
    const transcription = (family === 'ga' ? input.transcription : session.input_audio_transcription) as Record<string, unknown> | null | undefined;
    const turnDetection = input.turn_detection;
    const format = (family === 'ga' ? input.format : undefined) as Record<string, unknown> | undefined;

    const next = {
      model: this.modelId,
      language: this.language,
      prompt: this.prompt,
      rate: this.inputRate,
      turnDetection: this.turnDetection,
    };
    const model = (typeof session.model === 'string' && session.model) || (typeof transcription?.model === 'string' && transcription.model) || null;
    if (model) next.model = model;
    if (transcription && 'language' in transcription)
      next.language = typeof transcription.language === 'string' && transcription.language ? transcription.language : null;
    if (transcription && 'prompt' in transcription)
      next.prompt = typeof transcription.prompt === 'string' && transcription.prompt ? transcription.prompt : null;
    if (format && 'rate' in format) {
      const rate = format.rate;
      if (typeof rate !== 'number' || !Number.isInteger(rate) || rate < 1000 || rate > 384000) {
        throw new SessionError('invalid_request_error', 'audio.input.format.rate must be an integer from 1000 to 384000', 'session.audio.input.format.rate');
      }
      next.rate = rate;
    }
    if (turnDetection !== undefined) next.turnDetection = parseTurnDetection(turnDetection);

    const changesAudio = next.model !== this.modelId || next.rate !== this.inputRate || next.language !== this.language || next.prompt !== this.prompt;
    if (changesAudio && this.item)
      throw new SessionError('invalid_request_error', 'the model, rate, language and prompt can change only between turns (commit or clear first)', 'session');
    if (next.model !== this.modelId) await this.dropModel();
    if (next.rate !== this.inputRate) this.resampler = null;
    if (next.language !== this.language || next.prompt !== this.prompt) await this.dropStream();
    Object.assign(this, { modelId: next.model, language: next.language, prompt: next.prompt, inputRate: next.rate, turnDetection: next.turnDetection });
    this.emit(family === 'ga' ? 'session.updated' : 'transcription_session.updated', { session: this.snapshot() });
  }

  private snapshot(): Record<string, unknown> {
    return {
      id: this.id,
      object: 'realtime.transcription_session',
      type: 'transcription',
      model: this.modelId,
      audio: {
        input: {
          format: { type: 'audio/pcm', rate: this.inputRate },
          transcription: { model: this.modelId, language: this.language, prompt: this.prompt },
          noise_reduction: null,
          turn_detection: this.turnDetection,
        },
      },
    };
  }

  // ---- audio ----

  private async append(event: ClientEvent): Promise<void> {
    if (typeof event.audio !== 'string') throw new SessionError('invalid_request_error', 'input_audio_buffer.append needs audio: base64 PCM16', 'audio');
    const audio = Buffer.from(event.audio, 'base64');
    if (audio.length > MAX_APPEND_BYTES)
      throw new SessionError(
        'input_audio_buffer_append_too_large',
        `one append may carry at most 15 MiB of audio; this one has ${audio.length} bytes`,
        'audio',
      );
    const stream = await this.streamForTurn();
    const samples = this.resamplerFor(stream.model).processPcm16(audio);
    if (this.turnDetection) return this.detectTurns(stream, samples, this.turnDetection);
    this.openItem();
    await this.feed(stream, samples);
  }

  private async commit(): Promise<void> {
    const item = this.item;
    if (!item || item.samples === 0)
      throw new SessionError('input_audio_buffer_commit_empty', 'the input audio buffer is empty: append audio before committing');
    const stream = await this.streamForTurn();
    if (this.turnDetection) {
      // a manual commit in server_vad mode ends the open turn at what was appended so far
      await this.feed(stream, this.history.subarray(this.fedUntil - this.historyStart));
      this.fedUntil = this.historyStart + this.history.length;
      this.speaking = false;
      return this.endTurn(stream);
    }
    const tail = this.resamplerFor(stream.model).flush();
    this.emit('input_audio_buffer.committed', { previous_item_id: this.previousItemId, item_id: item.id });
    await this.feed(stream, tail);
    await this.completeTurn(stream, item);
  }

  /** The open turn's item, created (and announced) by the first audio of a turn. */
  private openItem(): { id: string; samples: number; transcript: string } {
    if (this.item) return this.item;
    this.item = { id: `item_${randomUUID().replace(/-/g, '').slice(0, 20)}`, samples: 0, transcript: '' };
    this.emit('conversation.item.added', {
      previous_item_id: this.previousItemId,
      item: {
        id: this.item.id,
        type: 'message',
        object: 'realtime.item',
        role: 'user',
        status: 'in_progress',
        content: [{ type: 'input_audio', transcript: null }],
      },
    });
    return this.item;
  }

  private async feed(stream: { model: SttModel; session: SttStreamingSession }, samples: Float32Array): Promise<void> {
    if (samples.length === 0) return;
    if (this.item) this.item.samples += samples.length;
    this.delta(await this.run(stream.model, (signal) => stream.session.feed(samples, signal)));
  }

  /** committed, then the rest of the text, then completed. */
  private async endTurn(stream: { model: SttModel; session: SttStreamingSession }): Promise<void> {
    const item = this.item as NonNullable<typeof this.item>;
    this.emit('input_audio_buffer.committed', { previous_item_id: this.previousItemId, item_id: item.id });
    await this.completeTurn(stream, item);
  }

  private async completeTurn(stream: { model: SttModel; session: SttStreamingSession }, item: NonNullable<typeof this.item>): Promise<void> {
    const { delta } = await this.run(stream.model, (signal) => stream.session.finish(signal));
    this.delta(delta);
    this.emit('conversation.item.input_audio_transcription.completed', {
      item_id: item.id,
      content_index: 0,
      transcript: item.transcript,
      usage: { type: 'duration', seconds: Math.round((item.samples / stream.model.sampleRate) * 1000) / 1000 },
    });
    this.previousItemId = item.id;
    this.item = null;
  }

  // ---- server_vad: the Silero VAD opens and closes turns ----

  /** Model-rate audio since `historyStart` (absolute sample index): the lead-in and the open turn's audio. */
  private history = new Float32Array(0);
  private historyStart = 0;
  /** Absolute model-rate index up to which the open turn's audio went to the engine. */
  private fedUntil = 0;
  /** 512-sample VAD frames seen: the session clock (32 ms each). */
  private vadFrames = 0;
  private speaking = false;
  private silentMs = 0;
  private vad: { lease: ModelLease<VadModel>; stream: VadStream; resampler: StreamResampler | null } | null = null;

  private async detectTurns(stream: { model: SttModel; session: SttStreamingSession }, samples: Float32Array, detection: TurnDetection): Promise<void> {
    const rate = stream.model.sampleRate;
    const vad = await this.vadFor(rate);
    const appended = new Float32Array(this.history.length + samples.length);
    appended.set(this.history);
    appended.set(samples, this.history.length);
    this.history = appended;
    const at16k = vad.resampler ? vad.resampler.process(samples) : samples;
    const probabilities = await this.scheduled(vad.lease.model.id, vad.lease.model.concurrency, () => vad.stream.process(at16k));
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
        const item = this.openItem();
        this.emit('input_audio_buffer.speech_started', { audio_start_ms: audioStartMs, item_id: item.id });
        continue;
      }
      this.silentMs = probability < detection.threshold ? this.silentMs + VAD_FRAME_MS : 0;
      if (this.silentMs < detection.silence_duration_ms) continue;
      const audioEndMs = frameStartMs + VAD_FRAME_MS;
      const end = Math.min(position(audioEndMs), this.historyStart + this.history.length);
      await this.feed(stream, this.history.subarray(this.fedUntil - this.historyStart, end - this.historyStart));
      this.fedUntil = end;
      this.speaking = false;
      this.emit('input_audio_buffer.speech_stopped', { audio_end_ms: audioEndMs, item_id: (this.item as NonNullable<typeof this.item>).id });
      await this.endTurn(stream);
    }
    if (this.speaking) {
      await this.feed(stream, this.history.subarray(this.fedUntil - this.historyStart));
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
      const lease = await this.context.registry.acquire<VadModel>(this.context.vadModel, 'vad');
      this.vad = { lease, stream: await lease.model.openStream(), resampler: rate === VAD_RATE ? null : new StreamResampler(rate, VAD_RATE) };
    }
    return this.vad;
  }

  private async clear(): Promise<void> {
    if (this.stream) await this.stream.reset();
    this.resampler?.reset();
    this.item = null;
    // the open turn's audio is gone; the VAD clock runs on
    this.speaking = false;
    this.fedUntil = this.historyStart + this.history.length;
    this.emit('input_audio_buffer.cleared', {});
  }

  private delta(text: string): void {
    if (!text || !this.item) return;
    this.item.transcript += text;
    this.emit('conversation.item.input_audio_transcription.delta', { item_id: this.item.id, content_index: 0, delta: text });
  }

  // ---- engines ----

  private run<T>(model: SttModel, job: (signal: AbortSignal) => Promise<T>): Promise<T> {
    return this.scheduled(model.id, model.concurrency, job);
  }

  /**
   * A scheduler job on the session's behalf. Each job gets a signal of its own that follows the session's: engines
   * listen on the signal they are given, and listeners on the session's long-lived signal would pile up.
   */
  private async scheduled<T>(modelId: string, concurrency: number | undefined, job: (signal: AbortSignal) => Promise<T>): Promise<T> {
    const forJob = new AbortController();
    const follow = (): void => forJob.abort();
    if (this.abort.signal.aborted) forJob.abort();
    this.abort.signal.addEventListener('abort', follow, { once: true });
    try {
      return await this.context.scheduler.run(modelId, job, forJob.signal, concurrency);
    } finally {
      this.abort.signal.removeEventListener('abort', follow);
    }
  }

  private async streamForTurn(): Promise<{ model: SttModel; session: SttStreamingSession }> {
    if (!this.modelId)
      throw new SessionError('model_not_set', 'no model: pass ?model=, set it with session.update, or start the server with --realtime-model', 'model', true);
    this.lease ??= await this.context.registry.acquire<SttModel>(this.modelId, 'stt');
    const model = this.lease.model;
    if (!model.createStreamingSession) throw new SessionError('model_not_streaming', `model ${this.modelId} cannot transcribe live`, 'model', true);
    this.stream ??= await model.createStreamingSession({
      language: this.language,
      prompt: this.prompt,
      ...(this.context.delayMs !== null && model.declaresDelay ? { delayMs: this.context.delayMs } : {}),
    });
    return { model, session: this.stream };
  }

  private resamplerFor(model: SttModel): StreamResampler {
    this.resampler ??= new StreamResampler(this.inputRate, model.sampleRate);
    return this.resampler;
  }

  private async dropStream(): Promise<void> {
    await this.stream?.close();
    this.stream = null;
  }

  private async dropModel(): Promise<void> {
    await this.dropStream();
    this.lease?.release();
    this.lease = null;
    this.resampler = null;
  }

  private emit(type: string, payload: Record<string, unknown>): void {
    this.connection.send({ event_id: eventId(), type, ...payload });
  }
}

function parseTurnDetection(value: unknown): TurnDetection | null {
  if (value === null) return null;
  const v = value as Record<string, unknown>;
  if (typeof v !== 'object' || typeof v.type !== 'string')
    throw new SessionError('invalid_request_error', 'turn_detection must be null or an object with a type', 'session.audio.input.turn_detection');
  if (v.type === 'semantic_vad')
    throw new SessionError('unsupported_turn_detection', 'semantic_vad is not supported; use server_vad or null', 'session.audio.input.turn_detection.type');
  if (v.type !== 'server_vad')
    throw new SessionError('invalid_request_error', `unknown turn_detection type ${JSON.stringify(v.type)}`, 'session.audio.input.turn_detection.type');
  const number = (key: string, fallback: number, min: number, max: number): number => {
    const x = v[key] ?? fallback;
    if (typeof x !== 'number' || !Number.isFinite(x) || x < min || x > max)
      throw new SessionError(
        'invalid_request_error',
        `turn_detection.${key} must be a number from ${min} to ${max}`,
        `session.audio.input.turn_detection.${key}`,
      );
    return x;
  };
  return {
    type: 'server_vad',
    threshold: number('threshold', 0.5, 0, 1),
    prefix_padding_ms: number('prefix_padding_ms', 300, 0, 10000),
    silence_duration_ms: number('silence_duration_ms', 500, 0, 10000),
  };
}
