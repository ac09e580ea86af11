/**
 * Drain on SIGTERM (docs/configuration.md, "Shutdown"), on the real CLI: /readyz goes unready at once, requests are
 * still served through --drain-grace-s, a live session's turn in progress completes before the session is told and
 * closed with 1001, a session with no turn open is closed after the grace, and the process exits 0.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import WebSocket from 'ws';
import { cliEnv, freePort, spawnCli, tempDir, waitHealthy } from '../helpers/process.js';
import { SHARED } from '../helpers/paths.js';
import { SPHINX_INSTALLED } from '../helpers/transcripts.js';
import { pcm16, readWavMono } from '../helpers/wav.js';

interface ServerEvent {
  type: string;
  [key: string]: unknown;
}

/** A realtime session that records its events and its close code. */
class Session {
  readonly events: ServerEvent[] = [];
  readonly socket: WebSocket;
  readonly closed: Promise<number>;
  constructor(url: string) {
    this.socket = new WebSocket(url);
    this.socket.on('message', (data) => this.events.push(JSON.parse(String(data)) as ServerEvent));
    this.closed = new Promise((resolve) => this.socket.once('close', resolve));
  }
  async next(type: string, ms = 20_000): Promise<ServerEvent> {
    const deadline = Date.now() + ms;
    for (;;) {
      const event = this.events.find((e) => e.type === type);
      if (event) return event;
      assert.ok(Date.now() < deadline, `no ${type} event; got ${this.events.map((e) => e.type).join(', ')}`);
      await sleep(20);
    }
  }
  send(event: object): void {
    this.socket.send(JSON.stringify(event));
  }
}

describe('drain on SIGTERM', { skip: SPHINX_INSTALLED ? false : 'pocketsphinx-en-us is not installed' }, () => {
  it('goes unready at once, serves through the grace, lets a live turn complete, closes sessions with 1001, exits 0', async (t) => {
    const scratch = await tempDir(t, 'voxd-drain-');
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    const flags = ['--host', '127.0.0.1', '--port', String(port), '--log-dir', path.join(scratch, 'logs'), '--drain-grace-s', '1', '--drain-timeout-s', '30'];
    const proc = spawnCli(t, ['serve', ...flags], cliEnv(scratch));
    await waitHealthy(base, proc);
    assert.equal((await fetch(`${base}/readyz`)).status, 200);

    const url = `${base.replace('http', 'ws')}/v1/realtime?model=sphinx`;
    const speaking = new Session(url);
    const idle = new Session(url);
    const clearing = new Session(url);
    await Promise.all([speaking.next('session.created'), idle.next('session.created'), clearing.next('session.created')]);
    speaking.send({ type: 'session.update', session: { type: 'transcription', audio: { input: { format: { type: 'audio/pcm', rate: 16000 } } } } });
    await speaking.next('session.updated');
    // a manual turn: it stays open until the client commits
    const audio = pcm16(readWavMono(path.join(SHARED, 'audio', 'speech', 'librivox-0870.wav')).samples.subarray(0, 16000 * 4));
    for (let at = 0; at < audio.length; at += 3200)
      speaking.send({ type: 'input_audio_buffer.append', audio: audio.subarray(at, at + 3200).toString('base64') });
    await speaking.next('conversation.item.added');
    // another turn open, which its client will clear instead of committing
    clearing.send({ type: 'input_audio_buffer.append', audio: audio.subarray(0, 3200).toString('base64') });
    await clearing.next('conversation.item.added');

    proc.child.kill('SIGTERM');
    await proc.waitStderr(/draining/, 5000);
    const readyz = await fetch(`${base}/readyz`);
    assert.equal(readyz.status, 503, 'unready at once');
    assert.equal(((await readyz.json()) as { status: string }).status, 'draining');
    assert.equal((await fetch(`${base}/v1/models`)).status, 200, 'a new request in the grace is served');

    // after the grace: the session with no turn open hears why and goes; the speaking one is still there
    assert.equal(await idle.closed, 1001);
    assert.equal(((await idle.next('error')).error as { code: string }).code, 'server_shutting_down');
    assert.equal(speaking.socket.readyState, WebSocket.OPEN, 'a session in the middle of a turn stays');
    assert.equal(clearing.socket.readyState, WebSocket.OPEN, 'so does the other one');

    // a cleared turn has ended too: that session goes at once, not at --drain-timeout-s
    const clearedBy = Date.now() + 5000;
    clearing.send({ type: 'input_audio_buffer.clear' });
    assert.equal(await clearing.closed, 1001);
    assert.ok(Date.now() < clearedBy, 'closed once its turn was cleared');
    assert.equal(((await clearing.next('error')).error as { code: string }).code, 'server_shutting_down');

    speaking.send({ type: 'input_audio_buffer.commit' });
    // and talks on at once: the next turn's audio must not keep the session (it would until --drain-timeout-s)
    for (let at = 0; at < 16000; at += 3200) speaking.send({ type: 'input_audio_buffer.append', audio: audio.subarray(at, at + 3200).toString('base64') });
    const drainedBy = Date.now() + 10_000;
    const completed = await speaking.next('conversation.item.input_audio_transcription.completed');
    assert.ok(String(completed.transcript).trim().length > 0, 'the turn completes with its transcript');
    assert.equal(await speaking.closed, 1001);
    assert.ok(Date.now() < drainedBy, 'closed after the turn that was open when the drain began, not after the next one');
    const error = (await speaking.next('error')).error as { code: string; type: string };
    assert.deepEqual([error.code, error.type], ['server_shutting_down', 'server_error']);
    assert.ok(speaking.events.findIndex((e) => e.type === 'error') > speaking.events.indexOf(completed), 'told to leave only after its transcript');
    assert.equal((await proc.waitExit(10_000)).code, 0, 'exited long before --drain-timeout-s');
  });
});
