/**
 * WS /v1/audio/transcriptions/realtime: binary PCM16 in, VAD-cut utterances out as `delta` and `complete`
 * messages, with the built-in recognizer and a raw `ws` client.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import WebSocket from 'ws';
import { StreamResampler } from '../../src/services/audio/resample.js';
import { SHARED } from '../helpers/paths.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { SPHINX_INSTALLED, wer } from '../helpers/transcripts.js';
import { pcm16, readWavMono } from '../helpers/wav.js';
import { parakeetTestModel } from '../helpers/parakeet.js';
import { audioLmTestModel } from '../helpers/audio-lm.js';
import { whisperTestModel } from '../helpers/whisper-models.js';

const SPEECH = path.join(SHARED, 'audio', 'speech');
const FIRST = path.join(SPEECH, 'librivox-0870.wav');
const SECOND = path.join(SPEECH, 'librivox-0890.wav');

type Message = Record<string, unknown>;

/** A raw client that records every text message and the close code. */
class Client {
  readonly messages: Message[] = [];
  readonly socket: WebSocket;
  readonly closed: Promise<number>;
  private waiters: { test: (m: Message) => boolean; resolve: (m: Message) => void }[] = [];
  private seen = 0;

  constructor(url: string) {
    this.socket = new WebSocket(url);
    this.socket.on('message', (data) => {
      const message = JSON.parse(String(data)) as Message;
      this.messages.push(message);
      this.waiters = this.waiters.filter((w) => (w.test(message) ? (w.resolve(message), false) : true));
    });
    this.closed = new Promise((resolve) => this.socket.once('close', (code: number) => resolve(code)));
  }

  /** The next message (after those already taken) that passes `test`. */
  next(test: (m: Message) => boolean): Promise<Message> {
    const index = this.messages.findIndex((m, i) => i >= this.seen && test(m));
    if (index >= 0) {
      this.seen = index + 1;
      return Promise.resolve(this.messages[index] as Message);
    }
    return new Promise((resolve) =>
      this.waiters.push({
        test,
        resolve: (m) => {
          this.seen = this.messages.length;
          resolve(m);
        },
      }),
    );
  }

  async open(): Promise<void> {
    if (this.socket.readyState !== WebSocket.OPEN) await new Promise((resolve) => this.socket.once('open', resolve));
  }

  /** `samples` as 100 ms binary frames. */
  stream(samples: Float32Array, rate: number): void {
    const bytes = pcm16(samples);
    const step = (rate / 10) * 2;
    for (let at = 0; at < bytes.length; at += step) this.socket.send(bytes.subarray(at, at + step));
  }

  async close(): Promise<void> {
    if (this.socket.readyState !== WebSocket.CLOSED) this.socket.close();
    await this.closed;
  }
}

const isType = (type: string) => (m: Message) => m.type === type;
const isError = (m: Message): boolean => m.status === 'error';

describe(
  'WS /v1/audio/transcriptions/realtime with the built-in recognizer',
  { skip: SPHINX_INSTALLED ? false : 'pocketsphinx-en-us is not installed' },
  () => {
    let server: TestServer;
    const cleanups: (() => Promise<void>)[] = [];
    after(() => Promise.all(cleanups.map((cleanup) => cleanup())));
    before(async () => {
      server = await startTestServer({ after: (cleanup) => cleanups.push(cleanup) });
    });
    const url = (): string => `${server.base.replace('http', 'ws')}/v1/audio/transcriptions/realtime`;

    async function fileTranscript(file: string): Promise<string> {
      const form = new FormData();
      form.append('file', new Blob([new Uint8Array(fs.readFileSync(file))]), 'clip.wav');
      form.append('model', 'sphinx');
      return ((await (await fetch(`${server.base}/v1/audio/transcriptions`, { method: 'POST', body: form })).json()) as { text: string }).text;
    }

    it('cuts two utterances at the pause, streams deltas, completes each, and closes on stop', async () => {
      const first = readWavMono(FIRST).samples;
      const second = readWavMono(SECOND).samples;
      const gap = 24000; // 1.5 s of silence
      const audio = new Float32Array(first.length + gap + second.length + gap);
      audio.set(first);
      audio.set(second, first.length + gap);

      const client = new Client(url());
      try {
        await client.open();
        client.socket.send(JSON.stringify({ sample_rate: 16000 }));
        const ready = await client.next((m) => m.status === 'ready');
        // no model named and none loaded yet: the default STT model (--stt-model)
        assert.deepEqual(ready, { status: 'ready', message: 'Ready to transcribe', model: 'sphinx' });
        client.stream(audio, 16000);
        const completes = [await client.next(isType('complete')), await client.next(isType('complete'))];
        client.socket.send(JSON.stringify({ action: 'stop' }));
        assert.equal(await client.closed, 1000);

        // each complete closes the deltas before it
        let from = 0;
        const files = [await fileTranscript(FIRST), await fileTranscript(SECOND)];
        completes.forEach((complete, i) => {
          const until = client.messages.indexOf(complete);
          const deltas = client.messages
            .slice(from, until)
            .filter(isType('delta'))
            .map((m) => m.delta as string)
            .join('');
          from = until + 1;
          assert.equal(deltas.trim(), complete.text);
          assert.equal(complete.is_partial, false);
          assert.equal(complete.language, 'en');
          const segments = complete.segments as { start: number; end: number; text: string }[];
          assert.equal(segments.length, 1);
          assert.equal(segments[0]?.text, complete.text);
          const errors = wer(files[i] as string, complete.text as string);
          console.log(`utterance ${i + 1}: ${segments[0]?.start}-${segments[0]?.end} s, WER against the file transcript ${errors.toFixed(3)}`);
          assert.ok(errors <= 0.3, `utterance ${i + 1}: ${String(complete.text)}`);
        });
        const [one, two] = completes.map((c) => (c.segments as { start: number; end: number }[])[0]!);
        // each utterance lies within its clip's stretch of the stream, in order
        assert.ok(one!.start >= 0 && one!.start < one!.end && one!.end <= (first.length + gap) / 16000);
        assert.ok(two!.start >= first.length / 16000 && two!.start < two!.end && two!.end <= audio.length / 16000);
        assert.equal(client.messages.filter(isType('complete')).length, 2, 'stop with nothing open sends no complete');
      } finally {
        await client.close();
      }

      const metrics = await (await fetch(`${server.base}/metrics`)).text();
      assert.match(metrics, /voxd_realtime_sessions\{endpoint="\/v1\/audio\/transcriptions\/realtime"\} 0/);
      assert.match(metrics, /voxd_realtime_lag_seconds_count\{endpoint="\/v1\/audio\/transcriptions\/realtime"\} \d+/);
      assert.match(metrics, /voxd_realtime_sessions_behind 0/);
    });

    it('stop ends the utterance in progress with a final complete; streaming:false sends no deltas; 24 kHz input', async () => {
      const resampler = new StreamResampler(16000, 24000);
      const clip = readWavMono(FIRST).samples.subarray(0, 16000 * 4);
      const at24k = Float32Array.from([...resampler.process(clip), ...resampler.flush()]);
      const client = new Client(url());
      try {
        await client.open();
        client.socket.send(JSON.stringify({ model: 'whisper-1', sample_rate: 24000, streaming: false, language: 'en' }));
        assert.equal((await client.next((m) => m.status === 'ready')).model, 'sphinx', 'the vendor alias serves through --stt-model');
        client.stream(at24k, 24000);
        client.socket.send(JSON.stringify({ action: 'stop' }));
        const complete = await client.next(isType('complete'));
        assert.equal(await client.closed, 1000);
        assert.equal(complete.is_partial, false, 'the flush at stop is final: clients that keep finals keep it');
        assert.ok(String(complete.text).split(' ').length >= 4, String(complete.text));
        assert.equal(client.messages.filter(isType('delta')).length, 0);
      } finally {
        await client.close();
      }
    });

    it('answers bad input with errors: the socket stays open unless no model can serve', async () => {
      const client = new Client(url());
      try {
        await client.open();
        client.socket.send('{ not json');
        assert.match(String((await client.next(isError)).error), /not valid JSON/);
        client.socket.send(JSON.stringify({ sample_rate: 'fast' }));
        assert.match(String((await client.next(isError)).error), /sample_rate/);
        client.socket.send(JSON.stringify({ sample_rate: 16000 }));
        await client.next((m) => m.status === 'ready');
        client.socket.send(JSON.stringify({ action: 'pause' }));
        assert.match(String((await client.next(isError)).error), /binary PCM16/);
        assert.equal(client.socket.readyState, WebSocket.OPEN);
      } finally {
        await client.close();
      }

      for (const config of [{ model: 'no-such-model' }, { language: 'fr' }]) {
        const refused = new Client(url());
        await refused.open();
        refused.socket.send(JSON.stringify(config));
        const error = await refused.next(isError);
        assert.equal(Object.keys(error).sort().join(), 'error,status');
        assert.equal(await refused.closed, 1011, JSON.stringify(config));
      }
    });
  },
);

describe('WS /v1/audio/transcriptions/realtime after POST /v1/models', () => {
  const cleanups: (() => Promise<void>)[] = [];
  after(() => Promise.all(cleanups.map((cleanup) => cleanup())));

  for (const [name, makeModel] of [
    ['Whisper', () => whisperTestModel({ size: 'tiny' })],
    ['Parakeet', () => parakeetTestModel({ size: 'tiny' })],
    ['Qwen3-ASR', async () => (await audioLmTestModel({ arch: 'qwen3asr', size: 'tiny' })).dir],
  ] as const)
    it(`serves seed clients that send audio at once with the most recently loaded STT model at 16 kHz (${name})`, async () => {
      const model = await makeModel();
      const server = await startTestServer({ after: (cleanup) => cleanups.push(cleanup) });
      const loaded = await fetch(`${server.base}/v1/models`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model_name: model }),
      });
      assert.equal(loaded.status, 200);
      const client = new Client(`${server.base.replace('http', 'ws')}/v1/audio/transcriptions/realtime`);
      try {
        await client.open();
        client.stream(readWavMono(FIRST).samples.subarray(0, 16000), 16000);
        assert.equal((await client.next((m) => m.status === 'ready')).model, model);
        client.socket.send(JSON.stringify({ action: 'stop' }));
        assert.equal(await client.closed, 1000);
        assert.equal(client.messages.filter(isError).length, 0);
      } finally {
        await client.close();
      }
    });
});
