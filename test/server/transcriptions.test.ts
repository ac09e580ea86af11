import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { toFile } from 'openai';
import { DEFAULT_VAD_MODEL } from '../../src/config.js';
import { JFK_WAV, SHARED } from '../helpers/paths.js';
import { readWavMono, wavBytes } from '../helpers/wav.js';
import { cancelledJobs, expectEnvelope, waitForCancelledJob, sdk, startTestServer, type TestServer } from '../helpers/server.js';
import { parakeetTestModel } from '../helpers/parakeet.js';
import { whisperTestModel } from '../helpers/whisper-models.js';
import { audioLmTestModel } from '../helpers/audio-lm.js';

const JFK_MP3 = path.join(SHARED, 'audio', 'speech', 'jfk.mp3');

function form(fields: Record<string, string | string[]>, file: Buffer | null = fs.readFileSync(JFK_MP3), filename = 'jfk.mp3'): FormData {
  const body = new FormData();
  if (file) body.append('file', new Blob([new Uint8Array(file)]), filename);
  for (const [key, value] of Object.entries(fields)) for (const v of [value].flat()) body.append(key, v);
  return body;
}

/** jfk.wav four times with 3 s pauses: 56 s, longer than one Whisper window and than Parakeet's 50 s. */
function longClip(): Buffer {
  const { samples } = readWavMono(JFK_WAV);
  const pause = new Float32Array(48000);
  const long = new Float32Array((samples.length + pause.length) * 4);
  for (let i = 0; i < 4; i++) long.set(samples, i * (samples.length + pause.length));
  return wavBytes(long, 16000);
}

/** An STT engine the suite runs on, with a random-weight model of its own. */
interface SttEngineCase {
  name: string;
  model(): Promise<string>;
  /** Translates non-English audio (Parakeet does not: only audio declared English passes). */
  translates: boolean;
  /** Times words (audio language models do not: word granularity is a 400). */
  words: boolean;
  /** Streams text a token or so at a time: NDJSON partial lines, SSE deltas finer than segments. */
  streamsText: boolean;
}

const ENGINES: SttEngineCase[] = [
  { name: 'Whisper', model: () => whisperTestModel({ size: 'tiny' }), translates: true, words: true, streamsText: false },
  { name: 'Parakeet', model: () => parakeetTestModel({ size: 'tiny' }), translates: false, words: true, streamsText: false },
  {
    name: 'Qwen3-ASR',
    model: async () => (await audioLmTestModel({ arch: 'qwen3asr', size: 'tiny' })).dir,
    translates: false,
    words: false,
    streamsText: true,
  },
];

for (const engine of ENGINES) describeTranscriptions(engine);

function describeTranscriptions(engine: SttEngineCase): void {
  describe(`transcriptions and translations over HTTP on ${engine.name}`, () => {
    let server: TestServer;
    let model: string;
    const cleanups: (() => Promise<void>)[] = [];
    after(() => Promise.all(cleanups.map((cleanup) => cleanup())));

    before(async () => {
      model = await engine.model();
      server = await startTestServer({ after: (cleanup) => cleanups.push(cleanup) }, { sttModel: model, maxUploadMb: 2, maxAudioSeconds: 60 });
    });

    it('answers the openai SDK in every response format', async () => {
      const client = sdk(server.base);
      const file = async (): Promise<File> => toFile(fs.createReadStream(JFK_MP3), 'jfk.mp3');
      const json = await client.audio.transcriptions.create({ file: await file(), model: 'whisper-1' });
      assert.equal(typeof json.text, 'string');
      assert.deepEqual(Object.keys(json), ['text']);

      for (const format of ['text', 'srt', 'vtt'] as const) {
        const text = (await client.audio.transcriptions.create({ file: await file(), model: 'whisper-1', response_format: format })) as unknown as string;
        assert.equal(typeof text, 'string', format);
        if (format === 'srt') assert.match(text, /^1\n\d\d:\d\d:\d\d,\d{3} --> \d\d:\d\d:\d\d,\d{3}\n/);
        if (format === 'vtt') assert.match(text, /^WEBVTT\n\n\d\d:\d\d:\d\d\.\d{3} --> /);
      }

      const verbose = await client.audio.transcriptions.create({
        file: await file(),
        model: 'whisper-1',
        response_format: 'verbose_json',
        timestamp_granularities: engine.words ? ['word', 'segment'] : ['segment'],
      });
      assert.equal((verbose as unknown as { task: string }).task, 'transcribe');
      assert.ok(Math.abs(verbose.duration - 11) < 0.2, `duration ${verbose.duration}`);
      assert.match(verbose.language, /^[a-z ]+$/, 'the language is reported by name');
      assert.ok(verbose.segments && verbose.segments.length > 0);
      assert.deepEqual(Object.keys(verbose.segments[0]!).sort(), [
        'avg_logprob',
        'compression_ratio',
        'end',
        'id',
        'no_speech_prob',
        'seek',
        'start',
        'temperature',
        'text',
        'tokens',
      ]);
      if (engine.words) assert.ok(verbose.words && verbose.words.length > 0);
      else {
        const refused = await fetch(`${server.base}/v1/audio/transcriptions`, {
          method: 'POST',
          body: form({ model: 'whisper-1', response_format: 'verbose_json', 'timestamp_granularities[]': 'word' }),
        });
        assert.match(((await refused.clone().json()) as { error: { message: string } }).error.message, /no word timestamps/);
        await expectEnvelope(refused, 400, 'invalid_request', 'timestamp_granularities');
      }

      if (engine.translates) {
        const translated = await client.audio.translations.create({ file: await file(), model: 'whisper-1' });
        assert.equal(typeof translated.text, 'string');
      } else {
        const refused = await fetch(`${server.base}/v1/audio/translations`, { method: 'POST', body: form({ model: 'whisper-1' }) });
        assert.match(((await refused.clone().json()) as { error: { message: string } }).error.message, /does not translate/);
        await expectEnvelope(refused, 400, 'invalid_request', 'model');
        const english = await client.audio.translations.create({ file: await file(), model: 'whisper-1', language: 'en' } as never);
        // the language named: some models' prompts say it (an audio language model's), so the transcript to compare names it too
        const transcript = await client.audio.transcriptions.create({ file: await file(), model: 'whisper-1', language: 'en' });
        assert.equal(english.text, transcript.text, 'audio declared English is its own translation');
      }
    });

    it('streams SSE events to the SDK and NDJSON lines to plain clients', async () => {
      const client = sdk(server.base);
      const stream = await client.audio.transcriptions.create({
        file: await toFile(fs.createReadStream(JFK_MP3), 'jfk.mp3'),
        model: 'whisper-1',
        stream: true,
      });
      const types: string[] = [];
      let deltas = '';
      let done = '';
      for await (const event of stream) {
        types.push(event.type);
        if (event.type === 'transcript.text.delta') deltas += event.delta;
        if (event.type === 'transcript.text.done') done = event.text;
      }
      assert.ok(types.length >= 2);
      assert.equal(types.at(-1), 'transcript.text.done');
      assert.equal(deltas.trim(), done.trim());
      if (engine.streamsText) assert.ok(types.length > 6, `text streams a token or so at a time (${types.length} events)`);

      const response = await fetch(`${server.base}/v1/audio/transcriptions`, { method: 'POST', body: form({ model: 'whisper-1', stream: 'true' }) });
      assert.equal(response.status, 200);
      assert.match(response.headers.get('content-type') ?? '', /application\/x-ndjson/);
      const lines = (await response.text())
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as Record<string, unknown>);
      const finals = lines.filter((line) => line.is_final === true);
      const partials = lines.filter((line) => line.is_final === false);
      assert.ok(finals.length > 0);
      assert.equal(finals.length + partials.length, lines.length, 'every line says whether it is final');
      for (const line of finals) {
        assert.equal(typeof line.text, 'string');
        assert.equal(typeof line.start, 'number');
        assert.equal(typeof line.end, 'number');
        assert.equal(typeof line.language, 'string');
      }
      if (engine.streamsText) {
        assert.ok(partials.length > 5, `pieces of text come before their segment (${partials.length})`);
        assert.equal(partials.map((line) => line.text).join(''), finals.map((line) => line.text).join(''), 'the pieces make the segments’ text');
      } else assert.equal(partials.length, 0);
    });

    it('takes the extra fields: context, verbose, max_tokens, and a WAV upload', async () => {
      const response = await fetch(`${server.base}/v1/audio/transcriptions`, {
        method: 'POST',
        body: form(
          { model: 'whisper-1', context: 'Kennedy inaugural address', verbose: 'true', max_tokens: '5', language: 'en' },
          fs.readFileSync(JFK_WAV),
          'jfk.wav',
        ),
      });
      assert.equal(response.status, 200);
      const body = (await response.json()) as { text: string; language: string; duration: number; segments: { tokens: number[] }[] };
      assert.equal(body.language, 'en');
      assert.ok(Math.abs(body.duration - 11) < 0.2);
      assert.ok(body.segments.flatMap((s) => s.tokens).length <= 5 + body.segments.length * 4, 'max_tokens bounds the text tokens');
    });

    it('refuses bad input with 4xx envelopes before any work, and keeps serving', async () => {
      const post = (body: FormData): Promise<Response> => fetch(`${server.base}/v1/audio/transcriptions`, { method: 'POST', body });
      await expectEnvelope(await post(form({ model: 'whisper-1' }, Buffer.alloc(0), 'empty.wav')), 400, 'invalid_audio', 'file');
      await expectEnvelope(
        await post(form({ model: 'whisper-1' }, Buffer.from('this is text, not audio\n'.repeat(20)), 'notes.wav')),
        400,
        'invalid_audio',
        'file',
      );
      await expectEnvelope(await post(form({ model: 'whisper-1' }, fs.readFileSync(JFK_MP3).subarray(0, 300), 'cut.mp3')), 400, 'invalid_audio', 'file');
      await expectEnvelope(await post(form({})), 400, 'invalid_request', 'model');
      await expectEnvelope(await post(form({ model: 'whisper-1' }, null)), 400, 'invalid_request', 'file');
      await expectEnvelope(await post(form({ model: path.join(SHARED, 'no-such-model.bin') })), 404, 'model_not_found');
      await expectEnvelope(await post(form({ model: 'whisper-1', response_format: 'xml' })), 400, 'invalid_request', 'response_format');
      await expectEnvelope(await post(form({ model: 'whisper-1', language: 'klingon' })), 400, 'invalid_request', 'language');
      await expectEnvelope(await post(form({ model: 'whisper-1' }, Buffer.alloc(3 * 1024 * 1024, 1), 'big.wav')), 413, 'payload_too_large');
      const json = await fetch(`${server.base}/v1/audio/transcriptions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
      assert.ok(json.status === 415 || json.status === 400);
      assert.equal((await fetch(`${server.base}/healthz`)).status, 200);
    });

    it('cuts long audio at the pauses the VAD finds and puts the segments back on the clip timeline', async () => {
      const response = await fetch(`${server.base}/v1/audio/transcriptions`, {
        method: 'POST',
        body: form({ model: 'whisper-1', response_format: 'verbose_json' }, longClip(), 'long.wav'),
      });
      assert.equal(response.status, 200);
      const body = (await response.json()) as { duration: number; segments: { id: number; start: number; end: number }[] };
      const duration = longClip().length / 2 / 16000;
      assert.ok(Math.abs(body.duration - duration) < 0.1);
      assert.ok(body.segments.length > 1);
      body.segments.forEach((segment, i) => {
        assert.equal(segment.id, i);
        assert.ok(segment.start >= 0 && segment.end <= duration + 0.01 && segment.start <= segment.end, JSON.stringify(segment));
        if (i > 0) assert.ok(segment.start >= body.segments[i - 1]!.start, 'segments stay in order');
      });
      assert.ok(
        body.segments.some((s) => s.start > 30),
        'speech after the first 30 s is transcribed in its place',
      );
      const models = (await (await fetch(`${server.base}/v1/models`)).json()) as { data: { id: string; task: string }[] };
      assert.ok(
        models.data.some((m) => m.id === DEFAULT_VAD_MODEL && m.task === 'vad'),
        'the --vad-model did the cutting',
      );
    });

    it('survives clients that disconnect mid-upload and mid-transcription', async () => {
      const { port } = new URL(server.base);
      // mid-upload: announce a large body, send part of it, then go away
      await new Promise<void>((resolve) => {
        const socket = net.connect(Number(port), '127.0.0.1', () => {
          socket.write(
            'POST /v1/audio/transcriptions HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=b\r\nContent-Length: 500000\r\n\r\n--b\r\nContent-Disposition: form-data; name="model"\r\n\r\nwhisper-1\r\n',
          );
          setTimeout(() => {
            socket.destroy();
            resolve();
          }, 100);
        });
      });
      // mid-transcription: 50 s of audio takes the tiny model seconds; the native job must stop, not run to its end
      const cancelledBefore = await cancelledJobs(server.base);
      const controller = new AbortController();
      const started = performance.now();
      const pending = fetch(`${server.base}/v1/audio/transcriptions`, {
        method: 'POST',
        body: form({ model: 'whisper-1' }, longClip(), 'long.wav'),
        signal: controller.signal,
      });
      setTimeout(() => controller.abort(), 300);
      await assert.rejects(pending);
      await waitForCancelledJob(server.base, cancelledBefore, started + 20_000);
      const after = await fetch(`${server.base}/v1/audio/transcriptions`, { method: 'POST', body: form({ model: 'whisper-1' }) });
      assert.equal(after.status, 200);
    });
  });
}
