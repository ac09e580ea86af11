/**
 * Live sessions give their memory back (issue 14): rounds of concurrent `sphinx` sessions on a real server, each
 * one committed turn and closed. Afterwards the live pool holds no decoder in use and no more than it keeps idle,
 * and the process's resident memory grew by no more than those idle decoders account for. Before the fix every
 * decoder a round had opened stayed resident after it was freed (in glibc's malloc arenas), so RSS kept the peak
 * of every round.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, it } from 'node:test';
import WebSocket from 'ws';
import { sphinxDecoderStats } from '../../src/engines/sphinx.js';
import type { SttModel } from '../../src/engines/types.js';
import { SHARED } from '../helpers/paths.js';
import { startTestServer } from '../helpers/server.js';
import { SPHINX_INSTALLED } from '../helpers/transcripts.js';
import { pcm16, readWavMono } from '../helpers/wav.js';

const CLIP = path.join(SHARED, 'audio', 'speech', 'librivox-0870.wav');
const RATE = 16000;
const SESSIONS = 10;
const ROUNDS = 2;
/** Idle decoders the live pool keeps (SphinxModel.load's maxIdleDecoders default). */
const MAX_IDLE = 2;
/** What one live decoder may hold resident (measured: about 97 MiB allocated, most of it touched). */
const DECODER_MIB = 110;
/** JavaScript heap, sockets and allocator noise of a round. */
const SLACK_MIB = 200;

const rssMiB = (): number => process.memoryUsage().rss / 2 ** 20;

/** One session: a manual turn of 16 kHz speech, committed; resolves the transcript once the socket closed. */
async function oneTurn(url: string, appends: string[]): Promise<string> {
  const socket = new WebSocket(url);
  const events: { type: string; transcript?: string }[] = [];
  let waiter: { type: string; resolve: () => void; reject: (error: Error) => void } | null = null;
  socket.on('message', (data) => {
    const event = JSON.parse(String(data)) as { type: string; transcript?: string };
    events.push(event);
    if (event.type === waiter?.type) waiter.resolve();
  });
  socket.on('error', (error) => waiter?.reject(error));
  socket.on('close', () => waiter?.reject(new Error(`the socket closed while waiting for ${waiter.type}`)));
  const next = (type: string): Promise<void> =>
    events.some((e) => e.type === type) ? Promise.resolve() : new Promise((resolve, reject) => (waiter = { type, resolve, reject }));
  await next('session.created');
  socket.send(
    JSON.stringify({
      type: 'session.update',
      session: { type: 'transcription', audio: { input: { format: { type: 'audio/pcm', rate: RATE }, turn_detection: null } } },
    }),
  );
  await next('session.updated');
  for (const audio of appends) socket.send(JSON.stringify({ type: 'input_audio_buffer.append', audio }));
  socket.send(JSON.stringify({ type: 'input_audio_buffer.commit' }));
  await next('conversation.item.input_audio_transcription.completed');
  waiter = null;
  socket.close();
  await new Promise((resolve) => socket.once('close', resolve));
  const errors = events.filter((e) => e.type === 'error');
  assert.deepEqual(errors, []);
  return events.find((e) => e.type === 'conversation.item.input_audio_transcription.completed')?.transcript ?? '';
}

describe('live session memory', { skip: SPHINX_INSTALLED ? false : 'pocketsphinx-en-us is not installed' }, () => {
  it(`${ROUNDS} rounds of ${SESSIONS} concurrent sphinx sessions: decoders and resident memory return to their bound`, async (t) => {
    const { base, server } = await startTestServer(t);
    const lease = await server.context.registry.acquire<SttModel>('sphinx', 'stt');
    t.after(() => lease.release());
    const stats = (): NonNullable<ReturnType<typeof sphinxDecoderStats>> => {
      const s = sphinxDecoderStats(lease.model);
      assert.ok(s, 'the sphinx engine reports its decoders');
      return s;
    };
    /** Sessions close their streams after the socket closes: waits until the live pool holds none in use. */
    const settled = async (): Promise<ReturnType<typeof stats>> => {
      const deadline = performance.now() + 10_000;
      while (stats().live.decoders > stats().live.idle) {
        assert.ok(performance.now() < deadline, `live decoders still in use: ${JSON.stringify(stats())}`);
        await sleep(50);
      }
      await sleep(200); // the worker that freed the last decoder returns
      return stats();
    };

    const bytes = pcm16(readWavMono(CLIP).samples.subarray(0, 2 * RATE));
    const appends: string[] = [];
    for (let at = 0; at < bytes.length; at += RATE / 5) appends.push(bytes.subarray(at, at + RATE / 5).toString('base64'));
    const url = `${base.replace('http', 'ws')}/v1/realtime?model=sphinx&intent=transcription`;

    // one session first, so the baseline includes what any session leaves behind (code paths, one idle decoder)
    assert.ok((await oneTurn(url, appends)).length > 0);
    const before = await settled();
    const rssBefore = rssMiB();
    t.diagnostic(`baseline: RSS ${rssBefore.toFixed(0)} MiB, decoders ${JSON.stringify(before)}`);

    for (let round = 1; round <= ROUNDS; round++) {
      const transcripts = await Promise.all(Array.from({ length: SESSIONS }, () => oneTurn(url, appends)));
      assert.ok(
        transcripts.every((text) => text.length > 0),
        'every session got its transcript',
      );
      const after = await settled();
      const rss = rssMiB();
      t.diagnostic(`round ${round}: RSS ${rss.toFixed(0)} MiB (+${(rss - rssBefore).toFixed(0)}), decoders ${JSON.stringify(after)}`);
      assert.ok(after.live.decoders <= MAX_IDLE, `the live pool shrank back to at most ${MAX_IDLE} idle decoders: ${JSON.stringify(after)}`);
      const allowed = (after.live.decoders - before.live.decoders + after.transcribe.decoders - before.transcribe.decoders) * DECODER_MIB + SLACK_MIB;
      assert.ok(
        rss - rssBefore <= allowed,
        `RSS grew by ${(rss - rssBefore).toFixed(0)} MiB after round ${round}, more than the ${allowed} MiB its idle decoders and noise account for`,
      );
    }
  });
});
