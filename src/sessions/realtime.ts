/**
 * One WS /v1/realtime transcription session (the vendor's realtime protocol, docs/api.md): session snapshots,
 * audio appends resampled from the declared rate to the model's, turns opened by the first append (manual mode)
 * or by the Silero VAD (`server_vad`), deltas from the model's streaming session as the text stabilises, and
 * `completed` when a turn is committed. Engine work goes through the scheduler on worker threads; the session
 * handles its events one at a time, in order.
 */
import { randomUUID } from 'node:crypto';
import type { WsConnection } from '../http/websocket.js';
import type { Logger } from '../logger.js';
import {
  DEFAULT_TURN_DETECTION,
  LiveError,
  type CompletedTurn,
  type LiveSettings,
  type LiveTranscriber,
  type TurnDetection,
  type TurnListener,
} from '../services/stt/live-transcriber.js';
import type { Transcriber } from '../services/stt/transcriber.js';
import { LiveSocketSession, type LiveSessions } from './live-sessions.js';

/** The rate of `audio/pcm` input when the client declares none (the vendor's). */
export const DEFAULT_INPUT_RATE = 24000;

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** Error codes that are the server's doing, not the client's (the event's `type` says which). */
const SERVER_SIDE_CODES = new Set(['server_error', 'server_shutting_down']);

/** The vendor's limit for the audio of one append. */
export const MAX_APPEND_BYTES = 15 * 1024 * 1024;

export interface RealtimeContext {
  stt: Transcriber;
  sessions: LiveSessions;
  logger: Logger;
  /** --realtime-model, used when neither the query nor session.update names one. */
  defaultModel: string | null;
}

/** GA event names, or the beta API's (`transcription_session.*`). */
export type Family = 'ga' | 'beta';

interface ClientEvent {
  type?: unknown;
  event_id?: unknown;
  [key: string]: unknown;
}

function eventId(): string {
  return `event_${randomUUID().replace(/-/g, '').slice(0, 20)}`;
}

export class RealtimeSession extends LiveSocketSession {
  private family: Family;
  private readonly transcriber: LiveTranscriber;
  /** The open turn's item. */
  private itemId: string | null = null;
  private previousItemId: string | null = null;

  constructor(
    connection: WsConnection,
    private readonly context: RealtimeContext,
    queryModel: string | null,
    /** The family the client announced on connect (the beta header or subprotocol); its events may switch it. */
    family: Family,
  ) {
    super(connection, context.sessions, '/v1/realtime', `sess_${randomUUID().replace(/-/g, '').slice(0, 20)}`);
    this.family = family;
    const settings: LiveSettings = { model: queryModel ?? context.defaultModel, language: null, prompt: null, rate: DEFAULT_INPUT_RATE, turnDetection: null };
    this.transcriber = context.stt.live(
      settings,
      this.turnEvents(),
      this.abort.signal,
      'pass ?model=, set it with session.update, or start the server with --realtime-model',
      this.moreWaiting,
    );
    this.emit(family === 'ga' ? 'session.created' : 'transcription_session.created', { session: this.snapshot() });
  }

  protected get turnOpen(): boolean {
    return this.transcriber.turnOpen;
  }

  protected async release(): Promise<void> {
    await this.transcriber.close();
  }

  protected report(error: unknown): void {
    this.fail(error, {});
  }

  protected async handle(data: string | Buffer, isBinary: boolean): Promise<void> {
    if (this.closed) return;
    let event: ClientEvent = {};
    try {
      if (isBinary)
        throw new LiveError(
          'invalid_request_error',
          'binary frames are not part of the protocol: send JSON events (audio as base64 in input_audio_buffer.append)',
        );
      let parsed: unknown;
      try {
        parsed = JSON.parse(data as string);
      } catch {
        throw new LiveError('invalid_json', 'the message is not valid JSON');
      }
      // kept for the error's event_id only once it is an object (`null` is valid JSON)
      if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
        throw new LiveError('invalid_request_error', 'an event must be a JSON object');
      event = parsed as ClientEvent;
      await this.dispatch(event);
    } catch (error) {
      if (!this.closed) this.fail(error, event); // once closed, nobody to tell; its engine work was aborted with it
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
        return this.transcriber.commit();
      case 'input_audio_buffer.clear':
        await this.transcriber.clear();
        this.itemId = null;
        this.emit('input_audio_buffer.cleared', {});
        return this.turnEnded();
      default:
        throw new LiveError('invalid_request_error', `unknown event type ${JSON.stringify(event.type)}`, 'type');
    }
  }

  private fail(error: unknown, event: ClientEvent): void {
    const known = LiveError.from(error);
    if (!known) this.context.logger.error({ err: error, session: this.id }, 'realtime session failed');
    const reported = known ?? new LiveError('server_error', 'internal server error', null, true);
    this.emit('error', {
      error: {
        type: SERVER_SIDE_CODES.has(reported.code) ? 'server_error' : 'invalid_request_error',
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
    if (typeof session !== 'object' || session === null) throw new LiveError('invalid_request_error', 'session must be an object', 'session');
    const input = family === 'ga' ? (((session.audio as Record<string, unknown>)?.input ?? {}) as Record<string, unknown>) : session;
    const transcription =
      family === 'ga'
        ? objectField(input.transcription, 'session.audio.input.transcription')
        : objectField(session.input_audio_transcription, 'session.input_audio_transcription');
    const turnDetection = input.turn_detection;
    const format = family === 'ga' ? objectField(input.format, 'session.audio.input.format') : undefined;

    const next = { ...this.transcriber.settings };
    const model = (typeof session.model === 'string' && session.model) || (typeof transcription?.model === 'string' && transcription.model) || null;
    if (model) next.model = model;
    if (transcription && 'language' in transcription)
      next.language = typeof transcription.language === 'string' && transcription.language ? transcription.language : null;
    if (transcription && 'prompt' in transcription)
      next.prompt = typeof transcription.prompt === 'string' && transcription.prompt ? transcription.prompt : null;
    if (format && 'rate' in format) {
      const rate = format.rate;
      if (typeof rate !== 'number' || !Number.isInteger(rate) || rate < 1000 || rate > 384000) {
        throw new LiveError('invalid_request_error', 'audio.input.format.rate must be an integer from 1000 to 384000', 'session.audio.input.format.rate');
      }
      next.rate = rate;
    }
    if (turnDetection !== undefined) next.turnDetection = parseTurnDetection(turnDetection);
    await this.transcriber.configure(next);
    this.emit(family === 'ga' ? 'session.updated' : 'transcription_session.updated', { session: this.snapshot() });
  }

  private snapshot(): Record<string, unknown> {
    const { model, rate, language, prompt, turnDetection } = this.transcriber.settings;
    return {
      id: this.id,
      object: 'realtime.transcription_session',
      type: 'transcription',
      model,
      audio: {
        input: {
          format: { type: 'audio/pcm', rate },
          transcription: { model, language, prompt },
          noise_reduction: null,
          turn_detection: turnDetection,
        },
      },
    };
  }

  // ---- audio ----

  private async append(event: ClientEvent): Promise<void> {
    if (typeof event.audio !== 'string') throw new LiveError('invalid_request_error', 'input_audio_buffer.append needs audio: base64 PCM16', 'audio');
    // Node's decoder skips what is not base64; audio the client thinks it sent must not vanish unnoticed
    if (event.audio.length % 4 !== 0 || !BASE64.test(event.audio)) throw new LiveError('invalid_value', 'audio is not valid base64', 'audio');
    const audio = Buffer.from(event.audio, 'base64');
    if (audio.length % 2 !== 0)
      throw new LiveError('invalid_value', `audio has ${audio.length} bytes: PCM16 takes two bytes a sample, so an append has an even number`, 'audio');
    if (audio.length > MAX_APPEND_BYTES)
      throw new LiveError('input_audio_buffer_append_too_large', `one append may carry at most 15 MiB of audio; this one has ${audio.length} bytes`, 'audio');
    await this.transcriber.append(audio);
  }

  /** The transcriber's turns as the vendor's item events. */
  private turnEvents(): TurnListener {
    const item = (): string => this.itemId as string;
    return {
      opened: (audioStartMs) => {
        this.itemId = `item_${randomUUID().replace(/-/g, '').slice(0, 20)}`;
        this.emit('conversation.item.added', {
          previous_item_id: this.previousItemId,
          item: {
            id: item(),
            type: 'message',
            object: 'realtime.item',
            role: 'user',
            status: 'in_progress',
            content: [{ type: 'input_audio', transcript: null }],
          },
        });
        if (audioStartMs !== null) this.emit('input_audio_buffer.speech_started', { audio_start_ms: audioStartMs, item_id: item() });
      },
      delta: (text) => this.emit('conversation.item.input_audio_transcription.delta', { item_id: item(), content_index: 0, delta: text }),
      stopped: (audioEndMs) => this.emit('input_audio_buffer.speech_stopped', { audio_end_ms: audioEndMs, item_id: item() }),
      committed: () => this.emit('input_audio_buffer.committed', { previous_item_id: this.previousItemId, item_id: item() }),
      completed: (turn: CompletedTurn) => {
        this.emit('conversation.item.input_audio_transcription.completed', {
          item_id: item(),
          content_index: 0,
          transcript: turn.transcript,
          usage: { type: 'duration', seconds: turn.seconds },
        });
        this.previousItemId = item();
        this.itemId = null;
        this.turnEnded();
      },
    };
  }

  private emit(type: string, payload: Record<string, unknown>): void {
    this.connection.send({ event_id: eventId(), type, ...payload });
  }
}

/** A settings object of the event (absent or null as it is), or an error naming it when it is no object. */
function objectField(value: unknown, param: string): Record<string, unknown> | null | undefined {
  if (value === undefined || value === null) return value;
  if (typeof value !== 'object' || Array.isArray(value)) throw new LiveError('invalid_request_error', `${param} must be an object`, param);
  return value as Record<string, unknown>;
}

function parseTurnDetection(value: unknown): TurnDetection | null {
  if (value === null) return null;
  const v = value as Record<string, unknown>;
  if (typeof v !== 'object' || typeof v.type !== 'string')
    throw new LiveError('invalid_request_error', 'turn_detection must be null or an object with a type', 'session.audio.input.turn_detection');
  if (v.type === 'semantic_vad')
    throw new LiveError('unsupported_turn_detection', 'semantic_vad is not supported; use server_vad or null', 'session.audio.input.turn_detection.type');
  if (v.type !== 'server_vad')
    throw new LiveError('invalid_request_error', `unknown turn_detection type ${JSON.stringify(v.type)}`, 'session.audio.input.turn_detection.type');
  const number = (key: string, fallback: number, min: number, max: number): number => {
    const x = v[key] ?? fallback;
    if (typeof x !== 'number' || !Number.isFinite(x) || x < min || x > max)
      throw new LiveError('invalid_request_error', `turn_detection.${key} must be a number from ${min} to ${max}`, `session.audio.input.turn_detection.${key}`);
    return x;
  };
  return {
    type: 'server_vad',
    threshold: number('threshold', DEFAULT_TURN_DETECTION.threshold, 0, 1),
    prefix_padding_ms: number('prefix_padding_ms', DEFAULT_TURN_DETECTION.prefix_padding_ms, 0, 10000),
    silence_duration_ms: number('silence_duration_ms', DEFAULT_TURN_DETECTION.silence_duration_ms, 0, 10000),
  };
}
