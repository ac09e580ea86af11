/**
 * What the live transcription sessions of both WebSocket endpoints share: admission under
 * --max-realtime-sessions, and each session's message backlog — messages handled one at a time in arrival order,
 * the bytes waiting bounded, the time audio waits for the engine reported (sessions falling behind real time show
 * in GET /metrics), and the --realtime-idle-timeout of a session that sends nothing; `LiveSocketSession` wires
 * one socket's session to them.
 */
import { ApiError } from '../errors.js';
import type { WsConnection } from '../http/websocket.js';
import type { Logger } from '../logger.js';
import { LiveError } from '../services/stt/live-transcriber.js';
import { Counter, Gauge, Histogram, type Metrics } from '../services/metrics.js';

/** Messages one session may have waiting for the engine: two of the largest appends (15 MiB of audio as base64). */
export const MAX_BACKLOG_BYTES = 48 * 1024 * 1024;
/** Close code of a session closed for --realtime-idle-timeout (4000–4999 are the application's; 408 as in HTTP). */
export const IDLE_CLOSE_CODE = 4408;
/** Audio that waited longer than this for the engine means the session no longer keeps up with real time. */
const BEHIND_SECONDS = 2;
const LAG_BUCKETS_S = [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30];
/** The WebSocket close code of an endpoint going away (RFC 6455). */
const GOING_AWAY = 1001;

/** What the server's drain asks of an open session. */
export interface DrainableSession {
  /** Lets the turn in progress complete (up to `deadline`, ms since the epoch), then tells the client and closes. */
  drain(deadline: number): Promise<void>;
}

export class LiveSessions {
  private readonly open = new Map<string, number>();
  private readonly sessions = new Set<DrainableSession>();
  private draining = false;
  private behind = 0;
  private readonly fellBehind: Counter;
  private readonly lag: Histogram;

  constructor(
    private readonly limits: { maxSessions: number; idleTimeoutSeconds: number },
    metrics: Metrics,
    private readonly logger: Logger,
  ) {
    metrics.add(
      new Gauge('voxd_realtime_sessions', 'Open live transcription sessions by endpoint', () =>
        [...this.open].map(([endpoint, value]) => ({ labels: { endpoint }, value })),
      ),
    );
    metrics.add(
      new Gauge('voxd_realtime_sessions_behind', `Live sessions whose messages waited more than ${BEHIND_SECONDS} s for the engine`, () => [
        { value: this.behind },
      ]),
    );
    this.fellBehind = metrics.add(new Counter('voxd_realtime_fell_behind_total', 'Times a live session fell behind real time, by endpoint'));
    this.lag = metrics.add(new Histogram('voxd_realtime_lag_seconds', 'Time a live session message waited before it was handled', LAG_BUCKETS_S));
  }

  /** Refuses the upgrade (503) while every session slot is taken, or once the server drains. */
  admit(): void {
    if (this.draining) throw new ApiError('shutting_down', 'The server is shutting down: open the session on another instance');
    const total = [...this.open.values()].reduce((sum, n) => sum + n, 0);
    if (total >= this.limits.maxSessions)
      throw new ApiError('too_many_sessions', `${total} realtime sessions are open, the limit (--max-realtime-sessions); retry later`, {
        headers: { 'Retry-After': '5' },
      });
  }

  /**
   * Counts a session in until its backlog is disposed. `onIdle` runs when the client sent nothing for
   * --realtime-idle-timeout seconds; it gets the timeout's description for its error.
   */
  backlog(endpoint: string, sessionId: string, hooks: { onError(error: unknown): void; onIdle(reason: string): void }): MessageBacklog {
    this.open.set(endpoint, (this.open.get(endpoint) ?? 0) + 1);
    const idleSeconds = this.limits.idleTimeoutSeconds;
    return new MessageBacklog(idleSeconds, {
      ...hooks,
      onIdle: () => hooks.onIdle(`no message for ${idleSeconds} s (--realtime-idle-timeout)`),
      waited: (seconds) => this.lag.observe({ endpoint }, seconds),
      behindChanged: (behind) => {
        this.behind += behind ? 1 : -1;
        if (!behind) return;
        this.fellBehind.inc({ endpoint });
        this.logger.warn({ session: sessionId, endpoint }, 'live session fell behind real time');
      },
      disposed: () => this.open.set(endpoint, (this.open.get(endpoint) ?? 1) - 1),
    });
  }

  /** Counts `session` among those a drain closes, until the returned function is called. */
  register(session: DrainableSession): () => void {
    this.sessions.add(session);
    return () => this.sessions.delete(session);
  }

  /** Server shutdown: no new sessions; each open one finishes its turn in progress (up to `deadline`) and is closed. */
  async drain(deadline: number): Promise<void> {
    this.draining = true;
    await Promise.all([...this.sessions].map((session) => session.drain(deadline)));
  }
}

interface BacklogHooks {
  waited(seconds: number): void;
  behindChanged(behind: boolean): void;
  disposed(): void;
  onError(error: unknown): void;
  onIdle(): void;
}

/** One session's messages, handled one at a time in arrival order. */
export class MessageBacklog {
  private tail: Promise<void> = Promise.resolve();
  private bytes = 0;
  private queued = 0;
  private behind = false;
  private disposed = false;
  private readonly idle: NodeJS.Timeout | null;

  constructor(
    idleSeconds: number,
    private readonly hooks: BacklogHooks,
  ) {
    // messages still being handled are not idleness
    this.idle = idleSeconds > 0 ? setTimeout(() => (this.bytes > 0 ? this.idle?.refresh() : hooks.onIdle()), idleSeconds * 1000).unref() : null;
  }

  /** Bytes of messages received and not yet handled. */
  get waitingBytes(): number {
    return this.bytes;
  }

  /** Messages received and not yet begun (behind the one being handled, if any). */
  get waitingMessages(): number {
    return this.queued;
  }

  /**
   * Queues `handle` behind the messages before it. Returns false, queueing nothing, when `bytes` more would pass
   * MAX_BACKLOG_BYTES: the client sends faster than the engine keeps up, and the caller tells it so.
   */
  push(bytes: number, handle: () => Promise<void>): boolean {
    this.idle?.refresh();
    if (this.bytes > 0 && this.bytes + bytes > MAX_BACKLOG_BYTES) return false;
    this.bytes += bytes;
    this.queued += 1;
    const arrived = performance.now();
    this.tail = this.tail.then(async () => {
      this.queued -= 1;
      const waited = (performance.now() - arrived) / 1000;
      this.hooks.waited(waited);
      this.setBehind(waited > BEHIND_SECONDS);
      try {
        await handle();
      } catch (error) {
        this.hooks.onError(error);
      } finally {
        this.bytes -= bytes;
        if (this.bytes === 0) this.setBehind(false);
      }
    });
    return true;
  }

  /** Settles once every message queued so far has been handled. */
  get settled(): Promise<void> {
    return this.tail;
  }

  /** Waits for every queued message, then stops counting the session. */
  async dispose(): Promise<void> {
    if (this.idle) clearTimeout(this.idle);
    await this.tail;
    if (this.disposed) return;
    this.disposed = true;
    this.setBehind(false);
    this.hooks.disposed();
  }

  private setBehind(behind: boolean): void {
    if (behind === this.behind || this.disposed) return;
    this.behind = behind;
    this.hooks.behindChanged(behind);
  }
}

/**
 * One live transcription socket: its messages go through a backlog of its own; a full backlog, an idle client and
 * failures are reported in the protocol's own words (`report`); closing stops the engine work and frees the session.
 */
export abstract class LiveSocketSession implements DrainableSession {
  protected closed = false;
  /** Aborts the session's engine work when the socket closes. */
  protected readonly abort = new AbortController();
  private readonly backlog: MessageBacklog;
  private readonly unregister: () => void;
  /** Set while a drain waits for the turn in progress to complete. */
  private completion: (() => void) | null = null;

  constructor(
    protected readonly connection: WsConnection,
    sessions: LiveSessions,
    endpoint: string,
    readonly id: string,
  ) {
    this.unregister = sessions.register(this);
    this.backlog = sessions.backlog(endpoint, id, {
      // once the socket closed (a drain, the client) there is nobody to tell, and engine work aborted with it
      onError: (error) => void (this.closed || this.report(error)),
      onIdle: (reason) => {
        this.report(new LiveError('idle_timeout', `session closed: ${reason}`));
        this.connection.close(IDLE_CLOSE_CODE, 'idle timeout');
      },
    });
  }

  /** A message from the client: handled after the ones before it. */
  receive(data: string | Buffer, isBinary: boolean): void {
    if (this.backlog.push(data.length, () => this.handle(data, isBinary))) return;
    const waiting = Math.round(this.backlog.waitingBytes / 1048576);
    this.report(new LiveError('session_backlog_full', `${waiting} MiB of messages wait for the engine; this one was dropped. Send audio at real-time pace`));
  }

  /** A message larger than the endpoint takes (`limitBytes`) was dropped unread: the client hears why, the session goes on. */
  refuseOversized(bytes: number, limitBytes: number): void {
    this.report(new LiveError('message_too_large', `a message may be at most ${limitBytes} bytes; this one had ${bytes} and was dropped`));
  }

  /**
   * Server shutdown: the turn in progress when the drain begins completes (what the client sent so far, handled even
   * when the session is behind, and what it sends until the turn's end),
   * then the client hears why and the socket closes with 1001, so it reconnects elsewhere having lost no finished
   * turn. The close follows that turn's transcript at once, not a pause in the audio: a client that talks on would
   * never leave one. Audio it sent after that turn is dropped, and the error says to send it again.
   */
  async drain(deadline: number): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const timeUp = new Promise<void>((resolve) => (timer = setTimeout(resolve, Math.max(0, deadline - Date.now()))));
    // what the client sent before the drain began belongs to its turn: a session behind real time still has it
    // queued (its turn may not even have opened yet), so that is handled first
    await Promise.race([this.backlog.settled, timeUp]);
    if (!this.closed && this.turnOpen) await Promise.race([new Promise<void>((resolve) => (this.completion = resolve)), timeUp]);
    clearTimeout(timer);
    this.completion = null;
    if (this.closed || this.leaving) return;
    this.report(
      new LiveError(
        'server_shutting_down',
        'the server is shutting down: reconnect to continue on another instance, and send again any audio sent after the last completed turn',
      ),
    );
    this.connection.close(GOING_AWAY, 'server shutting down');
  }

  /**
   * The protocol calls this when a turn ends: its transcript went to the client, or the client cleared it. A drain
   * waiting for it goes on.
   */
  protected turnEnded(): void {
    const completion = this.completion;
    this.completion = null;
    completion?.();
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.turnEnded(); // a drain waiting for the turn has nothing left to wait for
    this.unregister();
    this.abort.abort();
    await this.backlog.dispose();
    await this.release();
  }

  /** More of the client's messages wait behind the one being handled: the session is behind. */
  protected readonly moreWaiting = (): boolean => this.backlog.waitingMessages > 0;

  /** A turn has begun and not yet completed. */
  protected abstract get turnOpen(): boolean;
  /** The client is ending the session itself (it closes as the client asked, not as a drain would). */
  protected get leaving(): boolean {
    return false;
  }
  protected abstract handle(data: string | Buffer, isBinary: boolean): Promise<void>;
  /** Tells the client about `error` (closing the socket when it is fatal or unknown). */
  protected abstract report(error: unknown): void;
  /** Frees the engine side once no message is being handled any more. */
  protected abstract release(): Promise<void>;
}
