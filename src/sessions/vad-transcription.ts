/**
 * One WS /v1/audio/transcriptions/realtime session (docs/api.md): a JSON configuration message, then binary PCM16
 * frames; the VAD cuts utterances and each one comes back as `delta` messages while it is decoded and a `complete`
 * message at its end. `{"action":"stop"}` finishes the utterance in progress and closes. Errors are
 * `{"error","status":"error"}`. Clients that send audio without a configuration get the defaults.
 */
import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import type { WsConnection } from '../http/websocket.js';
import type { Logger } from '../logger.js';
import type { ModelRegistry } from '../services/registry.js';
import { DEFAULT_TURN_DETECTION, LiveError, type CompletedTurn, type LiveTranscriber } from '../services/stt/live-transcriber.js';
import type { Transcriber } from '../services/stt/transcriber.js';
import { LiveSocketSession, type LiveSessions } from './live-sessions.js';

/** Largest binary frame: the vendor's limit for one append of audio. */
export const MAX_FRAME_BYTES = 15 * 1024 * 1024;

export interface VadTranscriptionContext {
  stt: Transcriber;
  /** Names the most recently loaded STT model, which serves when the client names none. */
  registry: ModelRegistry;
  sessions: LiveSessions;
  logger: Logger;
  /** --stt-model: serves when the client names no model and none has been loaded. */
  defaultModel: string | null;
}

const ConfigMessage = z
  .object({
    model: z.string().trim().min(1).optional(),
    language: z.string().trim().min(1).optional(),
    sample_rate: z.number().int().min(1000).max(384000).default(16000),
    streaming: z.boolean().default(true),
  })
  .passthrough();

type Phase = 'configuring' | 'transcribing' | 'stopping';

export class VadTranscriptionSession extends LiveSocketSession {
  private phase: Phase = 'configuring';
  private transcriber: LiveTranscriber | null = null;
  private streaming = true;
  /** The language reported in `complete`: the client's, or the model's only one. */
  private language: string | null = null;
  /** The model serving the session (named in `ready`). */
  private model: string | null = null;
  /** The first byte of a sample split between two frames. */
  private oddByte: Buffer | null = null;
  constructor(
    connection: WsConnection,
    private readonly context: VadTranscriptionContext,
  ) {
    super(connection, context.sessions, '/v1/audio/transcriptions/realtime', `vad_${randomUUID().replace(/-/g, '').slice(0, 20)}`);
  }

  protected get turnOpen(): boolean {
    return this.transcriber?.turnOpen ?? false;
  }

  protected async release(): Promise<void> {
    await this.transcriber?.close();
  }

  protected report(error: unknown): void {
    this.fail(error);
  }

  protected async handle(data: string | Buffer, isBinary: boolean): Promise<void> {
    if (this.closed || this.phase === 'stopping') return;
    if (isBinary) {
      if (this.phase === 'configuring') await this.configure({});
      return (this.transcriber as LiveTranscriber).append(this.wholeSamples(data as Buffer));
    }
    let message: unknown;
    try {
      message = JSON.parse(data as string);
    } catch {
      throw new LiveError('invalid_json', 'the message is not valid JSON');
    }
    if (typeof message === 'object' && message !== null && (message as { action?: unknown }).action === 'stop') return this.stop();
    if (this.phase === 'configuring') return this.configure(message);
    throw new LiveError('invalid_request_error', 'send audio as binary PCM16 frames, or {"action":"stop"} to finish; the configuration is set once, first');
  }

  /**
   * The frame's whole PCM16 samples: a client that cuts its stream into frames anywhere (a pipe read) may split a
   * sample between two frames, so an odd byte waits for the next frame instead of being dropped.
   */
  private wholeSamples(frame: Buffer): Buffer {
    const bytes = this.oddByte ? Buffer.concat([this.oddByte, frame]) : frame;
    const whole = bytes.length - (bytes.length % 2);
    this.oddByte = whole < bytes.length ? bytes.subarray(whole) : null;
    return bytes.subarray(0, whole);
  }

  private async configure(message: unknown): Promise<void> {
    const parsed = ConfigMessage.safeParse(message);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      throw new LiveError('invalid_request_error', `invalid configuration: ${issue?.path.join('.') || 'message'}: ${issue?.message ?? 'invalid'}`);
    }
    const config = parsed.data;
    const model = config.model ?? this.context.registry.latestLoaded('stt') ?? this.context.defaultModel;
    this.streaming = config.streaming;
    this.transcriber = this.context.stt.live(
      { model, language: config.language ?? null, prompt: null, rate: config.sample_rate, turnDetection: DEFAULT_TURN_DETECTION },
      {
        opened: () => undefined,
        delta: (delta) => {
          if (this.streaming) this.connection.send({ type: 'delta', delta });
        },
        stopped: () => undefined,
        committed: () => undefined,
        completed: (turn) => this.complete(turn),
      },
      this.abort.signal,
      'name one in the configuration message, load one with POST /v1/models, or start the server with --stt-model',
      this.moreWaiting,
    );
    this.phase = 'transcribing';
    // a model that cannot load is an API error: fatal, the session has nothing to do
    const loaded = await this.transcriber.prepare();
    this.model = loaded.id;
    const languages = loaded.capabilities.languages;
    this.language = config.language ?? (languages?.length === 1 ? (languages[0] ?? null) : null);
    this.connection.send({ status: 'ready', message: 'Ready to transcribe', model: this.model });
  }

  private complete(turn: CompletedTurn): void {
    const text = turn.transcript.trim();
    this.connection.send({
      type: 'complete',
      text,
      segments: [{ id: 0, start: turn.startMs / 1000, end: turn.endMs / 1000, text }],
      language: this.language,
      // every complete is final, the one flushed by a stop too: clients that keep finals must not drop it
      is_partial: false,
    });
    this.turnEnded();
  }

  protected override get leaving(): boolean {
    return this.phase === 'stopping';
  }

  private async stop(): Promise<void> {
    this.phase = 'stopping';
    await this.transcriber?.flush();
    this.connection.close(1000, 'stopped');
  }

  private fail(error: unknown): void {
    const known = LiveError.from(error);
    if (!known) this.context.logger.error({ err: error, session: this.id }, 'live transcription failed');
    this.connection.send({ error: known?.message ?? 'internal server error', status: 'error' });
    if (!known || known.fatal) this.connection.close(1011, known?.message ?? 'internal server error');
  }
}
