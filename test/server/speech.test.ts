/**
 * POST /v1/audio/speech and GET /v1/audio/voices over HTTP with the built-in flite voices: the vendor SDK in
 * every format, streaming as one container and as SSE, the round trip through the built-in recognizer, bad input
 * and clients that leave mid-stream.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import OpenAI from 'openai';
import type { AudioFormat } from '../../src/services/audio/encode.js';
import { decodeAudio } from '../../src/services/audio/decode.js';
import { SHARED } from '../helpers/paths.js';
import { cancelledJobs, expectEnvelope, waitForCancelledJob, sdk, startTestServer, type TestServer } from '../helpers/server.js';
import { FLITE_INSTALLED, SPHINX_INSTALLED, wer, words } from '../helpers/transcripts.js';

const FIVE_SENTENCES =
  'The quick brown fox jumps over the lazy dog. A second sentence follows the first one. ' +
  'Here is a third sentence with a few more words. The fourth sentence is short. And this is the fifth and final sentence.';

/** What the built-in voice speaks at 16 kHz, per format: the rate the file declares. */
const RATES: Record<Exclude<AudioFormat, 'pcm'>, number> = { mp3: 16000, wav: 16000, flac: 16000, ogg: 16000, opus: 48000, aac: 16000 };

/** Seconds of audio in a response body of `format`. */
async function durationOf(body: Buffer, format: AudioFormat): Promise<number> {
  if (format === 'pcm') return body.length / 2 / 16000;
  const audio = await decodeAudio(body, { sampleRate: 16000 });
  assert.equal(audio.sourceSampleRate, RATES[format], `${format}: the rate the file declares`);
  assert.equal(audio.truncated, false, `${format}: a complete file`);
  return audio.duration;
}

function post(base: string, body: unknown): Promise<Response> {
  return fetch(`${base}/v1/audio/speech`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
}

/** Reads a streamed response: its chunks and when the first one arrived. */
async function readStream(response: Response, started: number): Promise<{ chunks: Buffer[]; firstByteMs: number; endMs: number }> {
  const reader = (response.body as ReadableStream<Uint8Array>).getReader();
  const chunks: Buffer[] = [];
  let firstByteMs = -1;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    if (firstByteMs < 0) firstByteMs = performance.now() - started;
    chunks.push(Buffer.from(value));
  }
  return { chunks, firstByteMs, endMs: performance.now() - started };
}

describe('speech over HTTP with the built-in voices', { skip: FLITE_INSTALLED ? false : 'Debian libflite1 is not installed' }, () => {
  let server: TestServer;
  const cleanups: (() => Promise<void>)[] = [];
  after(() => Promise.all(cleanups.map((cleanup) => cleanup())));
  before(async () => {
    server = await startTestServer({ after: (cleanup) => cleanups.push(cleanup) }, { maxInputChars: 600 });
  });

  it('answers the openai SDK in every format with audio of a plausible length', async () => {
    const client = sdk(server.base);
    const input = 'Hello from the built-in voice of this server.';
    const perWord: Record<string, number> = {};
    for (const format of ['mp3', 'wav', 'flac', 'ogg', 'opus', 'aac', 'pcm'] as const) {
      // the SDK's types lack `ogg`, which voxd adds; the request goes out as given
      const responseFormat = format as OpenAI.Audio.SpeechCreateParams['response_format'];
      const response = await client.audio.speech.create({ model: 'tts-1', voice: 'alloy', input, response_format: responseFormat });
      const body = Buffer.from(await response.arrayBuffer());
      const seconds = await durationOf(body, format);
      perWord[format] = seconds / words(input).length;
      assert.ok(perWord[format] >= 0.15 && perWord[format] <= 0.6, `${format}: ${seconds.toFixed(2)} s for ${words(input).length} words`);
    }
    console.log('seconds per word:', JSON.stringify(perWord));
  });

  it('sends the content type and disposition of each format', async () => {
    const types = { mp3: 'audio/mpeg', wav: 'audio/wav', flac: 'audio/flac', ogg: 'audio/ogg', opus: 'audio/ogg', aac: 'audio/aac', pcm: 'audio/pcm' };
    for (const [format, type] of Object.entries(types)) {
      const response = await post(server.base, { model: 'tts-1', input: 'Hi.', response_format: format });
      assert.equal(response.status, 200);
      assert.equal(response.headers.get('content-type'), type, format);
      assert.equal(response.headers.get('content-disposition'), `attachment; filename=speech.${format}`);
      await response.arrayBuffer();
    }
  });

  it('lists the voices, and honours speed', async () => {
    const voices = (await (await fetch(`${server.base}/v1/audio/voices?model=tts-1`)).json()) as {
      object: string;
      model: string;
      capabilities: { cloning: boolean; instructions: boolean };
      data: { id: string }[];
    };
    assert.equal(voices.object, 'list');
    assert.deepEqual(voices.capabilities, { cloning: false, instructions: false }, 'flite neither clones nor follows instructions');
    assert.deepEqual(
      voices.data.map((v) => v.id),
      ['slt', 'kal', 'awb', 'rms'],
    );
    const seconds = async (speed: number): Promise<number> => {
      const response = await post(server.base, { model: 'tts-1', input: 'A sentence to speak at several speeds.', response_format: 'wav', speed });
      return durationOf(Buffer.from(await response.arrayBuffer()), 'wav');
    };
    const normal = await seconds(1);
    assert.ok(Math.abs((await seconds(2)) / normal - 0.5) < 0.1);
    assert.ok(Math.abs((await seconds(0.5)) / normal - 2) < 0.3);
  });

  for (const format of ['wav', 'mp3', 'ogg', 'opus'] as const) {
    it(`streams ${format} as one container that starts before synthesis ends`, async () => {
      const whole = await post(server.base, { model: 'tts-1', input: FIVE_SENTENCES, response_format: format });
      const wholeSeconds = await durationOf(Buffer.from(await whole.arrayBuffer()), format);
      const started = performance.now();
      const response = await post(server.base, { model: 'tts-1', input: FIVE_SENTENCES, response_format: format, stream: true, streaming_interval: 0.5 });
      assert.equal(response.status, 200);
      const { chunks, firstByteMs, endMs } = await readStream(response, started);
      assert.ok(chunks.length > 1, `${chunks.length} chunks`);
      assert.ok(firstByteMs < endMs * 0.6, `first bytes after ${firstByteMs.toFixed(0)} ms of ${endMs.toFixed(0)} ms`);
      const streamed = Buffer.concat(chunks);
      if (format === 'wav') assert.equal(streamed.readUInt32LE(4), 0xffffffff, 'streamed WAV: unknown size');
      const seconds = await durationOf(streamed, format);
      assert.ok(Math.abs(seconds / wholeSeconds - 1) <= 0.05, `streamed ${seconds} s vs whole ${wholeSeconds} s`);
    });
  }

  it('streams SSE events that decode to the same audio', async () => {
    const response = await post(server.base, { model: 'tts-1', input: FIVE_SENTENCES, response_format: 'mp3', stream_format: 'sse' });
    assert.equal(response.status, 200);
    assert.match(response.headers.get('content-type') ?? '', /^text\/event-stream/);
    const events = (await response.text())
      .split('\n\n')
      .filter(Boolean)
      .map((e) => JSON.parse(e.replace(/^data: /, '')) as { type: string; audio?: string; usage?: { input_tokens: number } });
    assert.equal(events.at(-1)?.type, 'speech.audio.done');
    assert.equal(events.at(-1)?.usage?.input_tokens, FIVE_SENTENCES.length);
    const deltas = events.slice(0, -1);
    assert.ok(deltas.length > 1 && deltas.every((e) => e.type === 'speech.audio.delta'));
    const audio = Buffer.concat(deltas.map((e) => Buffer.from(e.audio as string, 'base64')));
    const whole = await post(server.base, { model: 'tts-1', input: FIVE_SENTENCES, response_format: 'mp3' });
    const wholeSeconds = await durationOf(Buffer.from(await whole.arrayBuffer()), 'mp3');
    assert.ok(Math.abs((await durationOf(audio, 'mp3')) / wholeSeconds - 1) <= 0.05);
  });

  it(
    'round trip: the built-in recognizer understands the built-in voice',
    { skip: SPHINX_INSTALLED ? false : 'pocketsphinx-en-us is not installed' },
    async () => {
      const sentences = ['The weather is nice today.', 'Please call me in the morning.', 'I would like a cup of coffee.'];
      const rates: string[] = [];
      for (const sentence of sentences) {
        const speech = await post(server.base, { model: 'tts-1', input: sentence, response_format: 'wav' });
        const form = new FormData();
        form.append('file', new Blob([new Uint8Array(await speech.arrayBuffer())]), 'speech.wav');
        form.append('model', 'whisper-1');
        const { text } = (await (await fetch(`${server.base}/v1/audio/transcriptions`, { method: 'POST', body: form })).json()) as { text: string };
        const errors = wer(sentence, text);
        rates.push(`${errors.toFixed(2)} (${JSON.stringify(text)})`);
        assert.ok(errors <= 0.3, `WER ${errors.toFixed(2)}: heard ${JSON.stringify(text)} for ${JSON.stringify(sentence)}`);
      }
      console.log(`round-trip WER: ${rates.join(', ')}`);
    },
  );

  it('refuses bad input before any audio, and keeps serving', async () => {
    await expectEnvelope(await post(server.base, { model: 'tts-1', input: 'hi', voice: 'nobody' }), 400, 'invalid_request', 'voice');
    await expectEnvelope(await post(server.base, { model: path.join(SHARED, 'no-such-model.bin'), input: 'hi' }), 404, 'model_not_found');
    await expectEnvelope(await post(server.base, { model: 'tts-1', input: ' \n ' }), 400, 'invalid_request', 'input');
    await expectEnvelope(await post(server.base, { model: 'tts-1', input: 'word '.repeat(200) }), 400, 'invalid_request', 'input');
    await expectEnvelope(await post(server.base, { model: 'tts-1', input: 'hi', response_format: 'xml' }), 400, 'invalid_request', 'response_format');
    await expectEnvelope(await post(server.base, { model: 'tts-1', input: 'hi', speed: 9 }), 400, 'invalid_request', 'speed');
    await expectEnvelope(await post(server.base, { input: 'hi' }), 400, 'invalid_request', 'model');
    await expectEnvelope(await post(server.base, { model: 'tts-1', input: 'hi', ref_audio: '/no/such/file.wav' }), 400, 'invalid_request', 'ref_audio');
    await expectEnvelope(await post(server.base, { model: 'tts-1', input: 'hi', lang_code: 'j' }), 400, 'invalid_request', 'lang_code');
    await expectEnvelope(
      await fetch(`${server.base}/v1/audio/voices?model=${encodeURIComponent(path.join(SHARED, 'no-such-model.bin'))}`),
      404,
      'model_not_found',
    );
    assert.equal((await post(server.base, { model: 'tts-1', input: 'Still here.' })).status, 200);
  });

  it('stops synthesis when a streaming client leaves', async () => {
    const before = await cancelledJobs(server.base);
    const controller = new AbortController();
    const response = await fetch(`${server.base}/v1/audio/speech`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'tts-1',
        input: 'A long sentence that keeps the voice busy for a good while, on and on and on. '.repeat(6),
        stream: true,
        response_format: 'wav',
        streaming_interval: 0.2,
      }),
      signal: controller.signal,
    });
    const reader = (response.body as ReadableStream<Uint8Array>).getReader();
    await reader.read(); // audio started
    controller.abort();
    await waitForCancelledJob(server.base, before, performance.now() + 10_000, 'the synthesis job is cancelled');
    assert.equal((await post(server.base, { model: 'tts-1', input: 'Still here.' })).status, 200);
  });
});
