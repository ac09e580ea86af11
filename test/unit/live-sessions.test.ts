/**
 * The live sessions' backlog: arrival order, the bound on bytes waiting, and the metrics of a session whose
 * messages wait too long for the engine (fallen behind real time); and a drain of a session that is behind.
 */
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, it } from 'node:test';
import { pino } from 'pino';
import { Metrics } from '../../src/services/metrics.js';
import type { WsConnection } from '../../src/http/websocket.js';
import { LiveError } from '../../src/services/stt/live-transcriber.js';
import { LiveSessions, LiveSocketSession, MAX_BACKLOG_BYTES } from '../../src/sessions/live-sessions.js';

function setup(): { sessions: LiveSessions; metrics: Metrics } {
  const metrics = new Metrics();
  return { sessions: new LiveSessions({ maxSessions: 2, idleTimeoutSeconds: 0 }, metrics, pino({ level: 'silent' })), metrics };
}

const sample = (metrics: Metrics, name: string): number => Number(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'm').exec(metrics.render())?.[1] ?? NaN);
const noHooks = { onError: () => undefined, onIdle: () => undefined };

describe('live session backlog', () => {
  it('handles messages in arrival order and refuses bytes beyond the bound until the engine catches up', async () => {
    const { sessions } = setup();
    const backlog = sessions.backlog('/test', 's1', noHooks);
    const order: number[] = [];
    let release = (): void => undefined;
    const engineBusy = new Promise<void>((resolve) => (release = resolve));
    assert.ok(backlog.push(MAX_BACKLOG_BYTES - 1024, () => engineBusy.then(() => void order.push(1))));
    assert.ok(backlog.push(1024, async () => void order.push(2)));
    assert.equal(
      backlog.push(1, async () => void order.push(3)),
      false,
      'one byte more than the bound',
    );
    release();
    await backlog.dispose();
    assert.deepEqual(order, [1, 2]);
    assert.equal(backlog.waitingBytes, 0);

    // a single message larger than the bound is taken when nothing waits (the route's message limit bounds it)
    const other = sessions.backlog('/test', 's2', noHooks);
    assert.ok(other.push(MAX_BACKLOG_BYTES + 1, async () => undefined));
    await other.dispose();
  });

  it('counts sessions, reports a session whose messages waited more than 2 s as behind, and admits up to the limit', async () => {
    const { sessions, metrics } = setup();
    const one = sessions.backlog('/test', 's1', noHooks);
    const two = sessions.backlog('/test', 's2', noHooks);
    assert.equal(sample(metrics, 'voxd_realtime_sessions'), 2);
    assert.throws(() => sessions.admit(), /too_many_sessions|limit/);

    let behindWhileLate = NaN;
    one.push(10, () => sleep(2100));
    one.push(10, async () => {
      behindWhileLate = sample(metrics, 'voxd_realtime_sessions_behind');
    });
    await one.dispose();
    assert.equal(behindWhileLate, 1, 'the second message waited over 2 s');
    assert.equal(sample(metrics, 'voxd_realtime_sessions_behind'), 0, 'caught up once drained');
    assert.equal(sample(metrics, 'voxd_realtime_fell_behind_total'), 1);
    assert.equal(sample(metrics, 'voxd_realtime_lag_seconds_count'), 2);
    assert.equal(sample(metrics, 'voxd_realtime_sessions'), 1);
    sessions.admit();
    await two.dispose();
  });

  it('reports handler failures and keeps handling the messages after them', async () => {
    const { sessions } = setup();
    const errors: unknown[] = [];
    const backlog = sessions.backlog('/test', 's1', { ...noHooks, onError: (error) => errors.push(error) });
    let after = false;
    backlog.push(1, async () => {
      throw new Error('engine failed');
    });
    backlog.push(1, async () => void (after = true));
    await backlog.dispose();
    assert.equal(errors.length, 1);
    assert.ok(after);
  });
});

/** A protocol of two messages: `append` opens a turn, `commit` ends it; each waits for `engine` first. */
class TurnSession extends LiveSocketSession {
  open = false;
  constructor(
    connection: WsConnection,
    sessions: LiveSessions,
    private readonly engine: Promise<void>,
    private readonly events: string[],
  ) {
    super(connection, sessions, '/test', 'drained');
  }
  protected get turnOpen(): boolean {
    return this.open;
  }
  protected async handle(data: string | Buffer): Promise<void> {
    await this.engine;
    this.events.push(`handled ${String(data)}`);
    this.open = String(data) === 'append';
    if (String(data) === 'commit') this.turnEnded();
  }
  protected report(error: unknown): void {
    this.events.push(`error ${error instanceof LiveError ? error.code : String(error)}`);
  }
  protected async release(): Promise<void> {}
}

describe('draining a live session', () => {
  it('handles the turn the client sent before the drain, even when the session is behind, then closes with 1001', async () => {
    const { sessions } = setup();
    const events: string[] = [];
    let release = (): void => undefined;
    const engine = new Promise<void>((resolve) => (release = resolve));
    const connection: WsConnection = {
      id: 'c',
      protocol: '',
      closed: false,
      bufferedAmount: 0,
      send: () => true,
      close: (code) => void events.push(`closed ${code}`),
    };
    const session = new TurnSession(connection, sessions, engine, events);
    // the whole turn arrived; none of it handled yet (the engine is busy): no turn is open when the drain begins
    session.receive('append', false);
    session.receive('commit', false);
    const drained = sessions.drain(Date.now() + 5000);
    await sleep(50);
    assert.deepEqual(events, [], 'nothing closed while the turn waits in the backlog');
    release();
    await drained;
    assert.deepEqual(events, ['handled append', 'handled commit', 'error server_shutting_down', 'closed 1001']);
    await session.close();
  });
});
