/**
 * WS /v1/realtime (manual commits) with a raw `ws` client and the official SDK's OpenAIRealtimeWS, transcribing
 * a shared LibriVox clip live with the built-in recognizer.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import type { IncomingMessage } from 'node:http';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import OpenAI from 'openai';
import { OpenAIRealtimeWS } from 'openai/realtime/ws';
import WebSocket from 'ws';
import { sileroVadEngine } from '../../src/engines/silero-vad.js';
import { StreamResampler } from '../../src/services/audio/resample.js';
import { JFK_WAV, SHARED, SILERO_V6 } from '../helpers/paths.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { SPHINX_INSTALLED, wer } from '../helpers/transcripts.js';
import { pcm16, readWavMono } from '../helpers/wav.js';
import { parakeetTestModel } from '../helpers/parakeet.js';
import { audioLmTestModel } from '../helpers/audio-lm.js';
import { whisperTestModel } from '../helpers/whisper-models.js';

const CLIP = path.join(SHARED, 'audio', 'speech', 'librivox-0870.wav');

interface ServerEvent {
  type: string;
  event_id: string;
  [key: string]: unknown;
}

/** 100 ms appends of `samples` at `rate`. */
function appends(samples: Float32Array, rate: number): object[] {
  const bytes = pcm16(samples);
  const step = (rate / 10) * 2;
  const events: object[] = [];
  for (let at = 0; at < bytes.length; at += step) events.push({ type: 'input_audio_buffer.append', audio: bytes.subarray(at, at + step).toString('base64') });
  return events;
}

/** A raw client that records every event and can wait for one of a type. */
class RawClient {
  readonly events: ServerEvent[] = [];
  private waiters: { type: string; resolve: (e: ServerEvent) => void }[] = [];
  readonly socket: WebSocket;
  constructor(url: string, protocols: string[] = []) {
    this.socket = new WebSocket(url, protocols);
    this.socket.on('message', (data) => {
      const event = JSON.parse(String(data)) as ServerEvent;
      this.events.push(event);
      this.waiters = this.waiters.filter((w) => (w.type === event.type ? (w.resolve(event), false) : true));
    });
  }
  next(type: string): Promise<ServerEvent> {
    const seen = this.events.find((e) => e.type === type && !(e as { taken?: boolean }).taken);
    if (seen) {
      (seen as { taken?: boolean }).taken = true;
      return Promise.resolve(seen);
    }
    return new Promise((resolve) =>
      this.waiters.push({
        type,
        resolve: (e) => {
          (e as { taken?: boolean }).taken = true;
          resolve(e);
        },
      }),
    );
  }
  send(event: object): void {
    this.socket.send(JSON.stringify(event));
  }
  async close(): Promise<void> {
    if (this.socket.readyState === WebSocket.CLOSED) return;
    this.socket.close();
    await new Promise((resolve) => this.socket.once('close', resolve));
  }
}

describe('WS /v1/realtime with the built-in recognizer', { skip: SPHINX_INSTALLED ? false : 'pocketsphinx-en-us is not installed' }, () => {
  let server: TestServer;
  let fileTranscript = '';
  const clip = readWavMono(CLIP).samples;
  const cleanups: (() => Promise<void>)[] = [];
  after(() => Promise.all(cleanups.map((cleanup) => cleanup())));

  before(async () => {
    server = await startTestServer({ after: (cleanup) => cleanups.push(cleanup) });
    const form = new FormData();
    form.append('file', new Blob([new Uint8Array(fs.readFileSync(CLIP))]), 'clip.wav');
    form.append('model', 'whisper-1');
    fileTranscript = ((await (await fetch(`${server.base}/v1/audio/transcriptions`, { method: 'POST', body: form })).json()) as { text: string }).text;
  });

  const wsUrl = (query = ''): string => `${server.base.replace('http', 'ws')}/v1/realtime${query}`;

  /** One manual turn; returns the events from committed to completed and the transcript. */
  async function turn(client: RawClient, samples: Float32Array, rate: number): Promise<{ transcript: string; deltas: string }> {
    for (const append of appends(samples, rate)) client.send(append);
    client.send({ type: 'input_audio_buffer.commit', event_id: 'evt_commit' });
    const completed = await client.next('conversation.item.input_audio_transcription.completed');
    const itemId = completed.item_id as string;
    const deltas = client.events
      .filter((e) => e.type === 'conversation.item.input_audio_transcription.delta' && e.item_id === itemId)
      .map((e) => e.delta as string)
      .join('');
    return { transcript: completed.transcript as string, deltas };
  }

  it('raw client: created → update (16 kHz) → updated → appends → commit → committed, deltas, completed', async () => {
    const client = new RawClient(wsUrl('?model=whisper-1&intent=transcription'), ['realtime', 'openai-insecure-api-key.placeholder']);
    try {
      const created = await client.next('session.created');
      assert.equal(client.socket.protocol, 'realtime');
      const session = created.session as { id: string; object: string; model: string; audio: { input: { format: { rate: number }; turn_detection: unknown } } };
      assert.match(session.id, /^sess_/);
      assert.equal(session.object, 'realtime.transcription_session');
      assert.equal(session.model, 'whisper-1');
      assert.equal(session.audio.input.format.rate, 24000);
      assert.equal(session.audio.input.turn_detection, null);

      client.send({
        type: 'session.update',
        session: { type: 'transcription', audio: { input: { format: { type: 'audio/pcm', rate: 16000 }, turn_detection: null } } },
      });
      const updated = await client.next('session.updated');
      assert.equal((updated.session as typeof session).audio.input.format.rate, 16000);

      const { transcript, deltas } = await turn(client, clip, 16000);
      const order = client.events.map((e) => e.type).filter((t) => !t.endsWith('.delta'));
      assert.deepEqual(order, [
        'session.created',
        'session.updated',
        'conversation.item.added',
        'input_audio_buffer.committed',
        'conversation.item.input_audio_transcription.completed',
      ]);
      assert.equal(deltas, transcript, 'the deltas add up to the transcript');
      assert.ok(client.events.every((e) => typeof e.event_id === 'string'));
      const errors = wer(fileTranscript, transcript);
      console.log(`live ${JSON.stringify(transcript)} vs file ${JSON.stringify(fileTranscript)}: WER ${errors.toFixed(3)}`);
      assert.ok(errors <= 0.1);

      // a second turn on the same session, then an empty commit
      const second = await turn(client, clip.subarray(0, 16000 * 3), 16000);
      assert.equal(second.deltas, second.transcript);
      client.send({ type: 'input_audio_buffer.commit', event_id: 'evt_empty' });
      const error = (await client.next('error')).error as { code: string; event_id: string };
      assert.deepEqual([error.code, error.event_id], ['input_audio_buffer_commit_empty', 'evt_empty']);
    } finally {
      await client.close();
    }
  });

  it('transcribes undeclared 24 kHz input within 5 points of WER of declared 16 kHz input', async () => {
    const spoken = (JSON.parse(fs.readFileSync(path.join(SHARED, 'audio', 'speech', 'manifest.json'), 'utf8')) as { file: string; text: string }[]).find(
      (e) => e.file === path.basename(CLIP),
    )!.text;
    const live = async (samples: Float32Array, rate: number, update: boolean): Promise<number> => {
      const client = new RawClient(wsUrl('?model=whisper-1'));
      try {
        await client.next('session.created');
        if (update) client.send({ type: 'session.update', session: { type: 'transcription', audio: { input: { format: { type: 'audio/pcm', rate } } } } });
        return wer(spoken, (await turn(client, samples, rate)).transcript);
      } finally {
        await client.close();
      }
    };
    const resampler = new StreamResampler(16000, 24000);
    const at24k = Float32Array.from([...resampler.process(clip), ...resampler.flush()]);
    const declared = await live(clip, 16000, true);
    const undeclared = await live(at24k, 24000, false);
    console.log(`WER against the spoken text: 16 kHz declared ${declared.toFixed(3)}, 24 kHz by default ${undeclared.toFixed(3)}`);
    assert.ok(undeclared <= declared + 0.05);
  });

  it('the official SDK (OpenAIRealtimeWS) completes a turn', async () => {
    const client = new OpenAI({ baseURL: `${server.base}/v1`, apiKey: 'sk-placeholder' });
    const { port } = new URL(server.base);
    const rt = new OpenAIRealtimeWS(
      { model: 'whisper-1', options: { createConnection: () => net.connect({ host: '127.0.0.1', port: Number(port) }) } },
      client,
    );
    try {
      const events: ServerEvent[] = [];
      rt.on('event', (e) => events.push(e as unknown as ServerEvent));
      await new Promise((resolve) => rt.once('session.created', resolve));
      // the SDK's types know only 24 kHz; voxd takes any declared rate
      rt.send({ type: 'session.update', session: { type: 'transcription', audio: { input: { format: { type: 'audio/pcm', rate: 16000 as 24000 } } } } });
      for (const append of appends(clip, 16000)) rt.send(append as never);
      rt.send({ type: 'input_audio_buffer.commit' });
      const completed = (await new Promise((resolve) => rt.once('conversation.item.input_audio_transcription.completed', resolve))) as { transcript: string };
      assert.ok(wer(fileTranscript, completed.transcript) <= 0.1);
      assert.ok(events.some((e) => e.type === 'session.updated'));
    } finally {
      rt.close();
    }
  });

  it('server_vad: two utterances 1.5 s apart make two turns without a commit, at the offline VAD bounds', async () => {
    const second = readWavMono(path.join(SHARED, 'audio', 'speech', 'librivox-0890.wav')).samples;
    const gap = 24000; // 1.5 s
    const audio = new Float32Array(clip.length + gap + second.length + gap);
    audio.set(clip);
    audio.set(second, clip.length + gap);
    const detection = { type: 'server_vad', threshold: 0.5, prefix_padding_ms: 300, silence_duration_ms: 500 };
    const client = new RawClient(wsUrl('?model=whisper-1'));
    try {
      await client.next('session.created');
      client.send({
        type: 'session.update',
        session: { type: 'transcription', audio: { input: { format: { type: 'audio/pcm', rate: 16000 }, turn_detection: detection } } },
      });
      const updated = await client.next('session.updated');
      assert.deepEqual((updated.session as { audio: { input: { turn_detection: unknown } } }).audio.input.turn_detection, detection);
      for (const append of appends(audio, 16000)) client.send(append);
      const turns = [
        await client.next('conversation.item.input_audio_transcription.completed'),
        await client.next('conversation.item.input_audio_transcription.completed'),
      ];
      const started = client.events.filter((e) => e.type === 'input_audio_buffer.speech_started');
      const stopped = client.events.filter((e) => e.type === 'input_audio_buffer.speech_stopped');
      assert.equal(started.length, 2);
      assert.equal(stopped.length, 2);
      const order = client.events.map((e) => e.type).filter((t) => !t.endsWith('.delta') && !t.startsWith('session.'));
      const oneTurn = [
        'conversation.item.added',
        'input_audio_buffer.speech_started',
        'input_audio_buffer.speech_stopped',
        'input_audio_buffer.committed',
        'conversation.item.input_audio_transcription.completed',
      ];
      assert.deepEqual(order, [...oneTurn, ...oneTurn]);

      // the bounds the VAD engine finds offline in the same audio (pauses shorter than silence_duration_ms kept inside)
      const vad = await sileroVadEngine.load({ id: 'silero', path: SILERO_V6, projector: null });
      const segments = await vad.segments(audio, { threshold: 0.5, minSilenceDurationMs: 500, speechPadMs: 0 });
      await vad.dispose();
      const utterances = [segments.filter((s) => s.start < clip.length / 16000), segments.filter((s) => s.start > (clip.length + gap) / 16000)];
      const times: number[] = [];
      utterances.forEach((parts, i) => {
        const start = (started[i]?.audio_start_ms as number) + detection.prefix_padding_ms;
        const end = (stopped[i]?.audio_end_ms as number) - detection.silence_duration_ms;
        console.log(`turn ${i + 1}: VAD ${(parts[0]!.start * 1000).toFixed(0)}-${(parts.at(-1)!.end * 1000).toFixed(0)} ms, live ${start}-${end} ms`);
        assert.ok(Math.abs(start - parts[0]!.start * 1000) <= 100, `turn ${i + 1} start`);
        assert.ok(Math.abs(end - parts.at(-1)!.end * 1000) <= 100, `turn ${i + 1} end`);
        times.push(started[i]?.audio_start_ms as number, stopped[i]?.audio_end_ms as number);
      });
      assert.deepEqual(
        times,
        [...times].sort((a, b) => a - b),
        'times are monotonic',
      );
      // the turn starts prefix_padding_ms before the onset, not at the file's first sample: pocketsphinx hears a
      // slightly different clip, so this is a sanity bound, not the file transcript
      const firstTurn = wer(fileTranscript, turns[0]!.transcript as string);
      console.log(`first turn WER against the file transcript: ${firstTurn.toFixed(3)}`);
      assert.ok(firstTurn <= 0.3, `first turn: ${String(turns[0]!.transcript)}`);
    } finally {
      await client.close();
    }
  });

  it('answers beta clients in the beta event family', async () => {
    const client = new RawClient(wsUrl('?intent=transcription'), ['realtime', 'openai-beta.realtime-v1']);
    try {
      const created = await client.next('transcription_session.created');
      assert.equal((created.session as { model: unknown }).model, null);
      client.send({
        type: 'transcription_session.update',
        session: { input_audio_format: 'pcm16', input_audio_transcription: { model: 'whisper-1', language: 'en', prompt: 'Dashwood' }, turn_detection: null },
      });
      const updated = (await client.next('transcription_session.updated')).session as {
        model: string;
        audio: { input: { format: { rate: number }; transcription: unknown; turn_detection: unknown } };
      };
      assert.equal(updated.model, 'whisper-1');
      assert.deepEqual(updated.audio.input.transcription, { model: 'whisper-1', language: 'en', prompt: 'Dashwood' });
      assert.equal(updated.audio.input.format.rate, 24000, 'beta input is pcm16 at 24 kHz');
      const resampler = new StreamResampler(16000, 24000);
      const at24k = Float32Array.from([...resampler.process(clip.subarray(0, 16000 * 3)), ...resampler.flush()]);
      const { transcript, deltas } = await turn(client, at24k, 24000);
      assert.equal(deltas, transcript);
      assert.ok(transcript.length > 0);
      assert.ok(!client.events.some((e) => e.type.startsWith('session.')), 'no GA session events');
    } finally {
      await client.close();
    }
  });

  it('closes sessions of both endpoints that send nothing for --realtime-idle-timeout', async () => {
    const idle = await startTestServer({ after: (cleanup) => cleanups.push(cleanup) }, { realtimeIdleTimeout: 1 });
    const ws = idle.base.replace('http', 'ws');
    const vendor = new RawClient(`${ws}/v1/realtime`);
    const vendorClosed = new Promise<number>((resolve) => vendor.socket.once('close', resolve));
    const simple = new WebSocket(`${ws}/v1/audio/transcriptions/realtime`);
    const simpleMessages: string[] = [];
    simple.on('message', (data) => simpleMessages.push(String(data)));
    const simpleClosed = new Promise<number>((resolve) => simple.once('close', resolve));
    assert.equal(((await vendor.next('error')).error as { code: string }).code, 'idle_timeout');
    assert.equal(await vendorClosed, 4408);
    assert.equal(await simpleClosed, 4408);
    assert.deepEqual(JSON.parse(simpleMessages[0] ?? '{}').status, 'error');
    assert.match(String(JSON.parse(simpleMessages[0] ?? '{}').error), /realtime-idle-timeout/);
  });

  it('refuses sessions beyond --max-realtime-sessions with 503 until one closes', async () => {
    const small = await startTestServer({ after: (cleanup) => cleanups.push(cleanup) }, { maxRealtimeSessions: 1 });
    const url = `${small.base.replace('http', 'ws')}/v1/realtime`;
    const first = new RawClient(url);
    await first.next('session.created');
    const refused = new WebSocket(url);
    refused.on('error', () => undefined);
    const [, response] = (await once(refused, 'unexpected-response')) as [unknown, IncomingMessage];
    assert.equal(response.statusCode, 503);
    assert.equal(response.headers['retry-after'], '5');
    let body = '';
    for await (const chunk of response) body += String(chunk);
    assert.equal((JSON.parse(body) as { error: { code: string } }).error.code, 'too_many_sessions');
    await first.close();
    const again = new RawClient(url);
    await again.next('session.created');
    await again.close();
  });

  it('answers bad input with error events, keeps the socket open, and closes when no model is set', async () => {
    // a session beside the misbehaving ones, unaffected by them
    const bystander = new RawClient(wsUrl('?model=whisper-1'));
    await bystander.next('session.created');
    bystander.send({ type: 'session.update', session: { type: 'transcription', audio: { input: { format: { type: 'audio/pcm', rate: 16000 } } } } });
    await bystander.next('session.updated');
    for (const append of appends(clip.subarray(0, 16000 * 2), 16000)) bystander.send(append);
    const client = new RawClient(wsUrl('?model=whisper-1'));
    try {
      await client.next('session.created');
      client.socket.send(Buffer.from([1, 2, 3]));
      client.send({ type: 'no.such.event', event_id: 'evt_1' });
      client.socket.send('{ not json');
      client.send({ type: 'session.update', event_id: 'evt_2', session: { audio: { input: { turn_detection: { type: 'semantic_vad' } } } } });
      const codes: string[] = [];
      for (let i = 0; i < 4; i++) codes.push(((await client.next('error')).error as { code: string }).code);
      assert.deepEqual(codes, ['invalid_request_error', 'invalid_request_error', 'invalid_json', 'unsupported_turn_detection']);
      client.send({ type: 'input_audio_buffer.clear' });
      await client.next('input_audio_buffer.cleared');
      // the vendor's limit: 15 MiB of audio per append
      client.send({ type: 'input_audio_buffer.append', event_id: 'evt_big', audio: Buffer.alloc(15 * 1024 * 1024 + 2).toString('base64') });
      const big = (await client.next('error')).error as { code: string; event_id: string; param: string };
      assert.deepEqual([big.code, big.event_id, big.param], ['input_audio_buffer_append_too_large', 'evt_big', 'audio']);
      assert.equal(client.socket.readyState, WebSocket.OPEN);
    } finally {
      await client.close();
    }

    const modelless = new RawClient(wsUrl());
    const created = await modelless.next('session.created');
    assert.equal((created.session as { model: unknown }).model, null);
    modelless.send({ type: 'input_audio_buffer.append', audio: pcm16(clip.subarray(0, 1600)).toString('base64') });
    assert.equal(((await modelless.next('error')).error as { code: string }).code, 'model_not_set');
    await new Promise((resolve) => modelless.socket.once('close', resolve));

    const rest = clip.subarray(16000 * 2);
    const { transcript, deltas } = await turn(bystander, rest, 16000);
    assert.equal(deltas, transcript);
    assert.ok(wer(fileTranscript, transcript) <= 0.1, transcript);
    assert.ok(!bystander.events.some((e) => e.type === 'error'));
    await bystander.close();
  });
});

for (const [name, makeModel] of [
  ['Whisper', () => whisperTestModel({ size: 'tiny' })],
  ['Parakeet', () => parakeetTestModel({ size: 'tiny' })],
  ['Qwen3-ASR', async () => (await audioLmTestModel({ arch: 'qwen3asr', size: 'tiny' })).dir],
] as const) {
  describe(`WS /v1/realtime with a ${name} model (random weights)`, () => {
    let server: TestServer;
    let model = '';
    const cleanups: (() => Promise<void>)[] = [];
    after(() => Promise.all(cleanups.map((cleanup) => cleanup())));
    before(async () => {
      model = await makeModel();
      server = await startTestServer({ after: (cleanup) => cleanups.push(cleanup) }, { realtimeModel: model, realtimeTranscriptionDelayMs: 2000 });
    });

    it('streams deltas that add up to each turn transcript, turn after turn, also past the window bound', async () => {
      const jfk = readWavMono(JFK_WAV).samples;
      const long = new Float32Array(jfk.length * 3); // 33 s: longer than the live windows (24 s Whisper, 12 s Parakeet)
      for (let i = 0; i < 3; i++) long.set(jfk, i * jfk.length);
      const client = new RawClient(`${server.base.replace('http', 'ws')}/v1/realtime`);
      try {
        const created = await client.next('session.created');
        assert.equal((created.session as { model: string }).model, model, '--realtime-model');
        client.send({ type: 'session.update', session: { type: 'transcription', audio: { input: { format: { type: 'audio/pcm', rate: 16000 } } } } });
        await client.next('session.updated');
        for (const audio of [jfk, long]) {
          for (const append of appends(audio, 16000)) client.send(append);
          client.send({ type: 'input_audio_buffer.commit' });
          const completed = await client.next('conversation.item.input_audio_transcription.completed');
          const deltas = client.events
            .filter((e) => e.type === 'conversation.item.input_audio_transcription.delta' && e.item_id === completed.item_id)
            .map((e) => e.delta as string);
          assert.equal(deltas.join(''), completed.transcript);
          console.log(`turn of ${(audio.length / 16000).toFixed(0)} s: ${deltas.length} deltas, ${String(completed.transcript).length} characters`);
        }
      } finally {
        await client.close();
      }
    });

    it('server_vad: two utterances make two turns whose deltas add up to their transcripts; bad input gets error events', async () => {
      const jfk = readWavMono(JFK_WAV).samples;
      const gap = new Float32Array(32000); // 2 s of silence ends the first turn
      const audio = new Float32Array(jfk.length * 2 + gap.length * 2);
      audio.set(jfk);
      audio.set(jfk, jfk.length + gap.length);
      const client = new RawClient(`${server.base.replace('http', 'ws')}/v1/realtime`);
      try {
        await client.next('session.created');
        const detection = { type: 'server_vad', threshold: 0.5, prefix_padding_ms: 300, silence_duration_ms: 500 };
        client.send({
          type: 'session.update',
          session: { type: 'transcription', audio: { input: { format: { type: 'audio/pcm', rate: 16000 }, turn_detection: detection } } },
        });
        await client.next('session.updated');
        client.send({ type: 'input_audio_buffer.append', audio: 'not base64 audio!' });
        const error = await client.next('error');
        assert.equal((error.error as { type: string }).type, 'invalid_request_error');
        for (const append of appends(audio, 16000)) client.send(append);
        for (let turn = 0; turn < 2; turn++) {
          const completed = await client.next('conversation.item.input_audio_transcription.completed');
          const deltas = client.events
            .filter((e) => e.type === 'conversation.item.input_audio_transcription.delta' && e.item_id === completed.item_id)
            .map((e) => e.delta as string);
          assert.equal(deltas.join(''), completed.transcript);
          assert.ok(String(completed.transcript).length > 0, `turn ${turn + 1} has a transcript`);
        }
        assert.equal(client.events.filter((e) => e.type === 'input_audio_buffer.speech_started').length, 2);
      } finally {
        await client.close();
      }
    });
  });
}
