/**
 * The Wyoming listener (docs/wyoming.md) against a real server with `--wyoming-port`, through a client written from
 * the protocol's documentation (test/helpers/wyoming.ts): `info` with every field Home Assistant requires, a shared
 * clip transcribed at 16 kHz and 22.05 kHz as HTTP transcribes it (with streamed transcript chunks), speech whole and
 * streamed (the compatibility `synthesize` in the middle ignored, `synthesize-stopped` at the end) as HTTP speaks it,
 * errors for bad input that close the connection, a client that leaves mid-synthesis, the idle timeout, and 8 clients
 * at once. Where the reference implementation (Python's `wyoming`) is installed, it drives the listener as Home
 * Assistant's integration does, parsing every answer with its own classes (test/helpers/wyoming-reference.py).
 * Discovery: the listener found by python-zeroconf, the mDNS library Home Assistant browses with.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { decodeAudio } from '../../src/services/audio/decode.js';
import { JFK_WAV } from '../helpers/paths.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { wavBytes } from '../helpers/wav.js';
import {
  browseWyoming,
  connectWyoming,
  runWyomingReference,
  wyomingReferenceUnavailable,
  zeroconfBrowserUnavailable,
  type ClientEvent,
  type WyomingClient,
} from '../helpers/wyoming.js';

/** --wyoming-idle-timeout of the shared server: short, so that one test waits it out and another outlasts it. */
const IDLE_SECONDS = 2;

/** PCM of `events`' audio-chunks, and the format their audio-start gave. */
function audioOf(events: ClientEvent[]): { format: Record<string, unknown>; pcm: Buffer } {
  const start = events.find((e) => e.type === 'audio-start');
  assert.ok(start, `an audio-start in ${events.map((e) => e.type).join(', ')}`);
  return { format: start.data, pcm: Buffer.concat(events.filter((e) => e.type === 'audio-chunk').map((e) => e.payload ?? Buffer.alloc(0))) };
}

async function httpSpeech(base: string, input: string): Promise<Buffer> {
  const response = await fetch(`${base}/v1/audio/speech`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'flite', input, voice: 'slt', response_format: 'pcm' }),
  });
  assert.equal(response.status, 200);
  return Buffer.from(await response.arrayBuffer());
}

/** `info` once both models are loaded: they load when the listener starts, and a describe never waits for them. */
async function loadedInfo(port: number): Promise<ClientEvent> {
  const client = await connectWyoming(port);
  try {
    for (;;) {
      client.send('describe');
      const info = await client.next();
      const loaded = (info.data.asr as { models: { installed: boolean }[] }[])[0]?.models[0]?.installed;
      if (loaded && (info.data.tts as { voices: unknown[] }[])[0]?.voices.length) return info;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  } finally {
    client.close();
  }
}

async function httpTranscript(base: string, wav: Buffer): Promise<string> {
  const form = new FormData();
  form.append('model', 'sphinx');
  form.append('file', new Blob([new Uint8Array(wav)]), 'clip.wav');
  const response = await fetch(`${base}/v1/audio/transcriptions`, { method: 'POST', body: form });
  assert.equal(response.status, 200);
  return ((await response.json()) as { text: string }).text;
}

/** A transcription over Wyoming, as Home Assistant sends it: every event it answered with. */
async function transcribe(client: WyomingClient, pcm: Buffer, rate: number, chunkBytes = 2048, ms = 30_000): Promise<ClientEvent[]> {
  const format = { rate, width: 2, channels: 1 };
  client.send('transcribe', { language: 'en' });
  client.send('audio-start', { ...format, timestamp: null });
  for (let at = 0; at < pcm.length; at += chunkBytes) client.send('audio-chunk', { ...format, timestamp: null }, pcm.subarray(at, at + chunkBytes));
  client.send('audio-stop', { timestamp: null });
  return client.until('transcript', ms);
}

describe('Wyoming (Home Assistant)', () => {
  let server: TestServer;
  let port: number;
  /** jfk.wav as 16-bit PCM at 16 kHz and 22.05 kHz, and as the WAV files HTTP gets. */
  const clips: Record<16000 | 22050, { wav: Buffer; pcm: Buffer }> = {} as never;
  const cleanups: (() => Promise<void>)[] = [];
  after(async () => {
    for (const cleanup of cleanups) await cleanup();
  });
  before(async () => {
    server = await startTestServer(
      { after: (fn) => cleanups.push(fn) },
      {
        wyomingPort: 0,
        wyomingIdleTimeout: IDLE_SECONDS,
        sttModel: 'sphinx',
        ttsModel: 'flite',
        // one transcription at a time, so that clients wait for their turn longer than the idle timeout
        modelConcurrency: 1,
        sttMaxBatchSize: 1,
      },
    );
    port = server.server.wyomingPort!;
    for (const rate of [16000, 22050] as const) {
      const wav = wavBytes((await decodeAudio(fs.readFileSync(JFK_WAV), { sampleRate: rate })).samples, rate);
      clips[rate] = { wav, pcm: wav.subarray(44) };
    }
  });

  it('describes its programs with every field Home Assistant requires', async () => {
    const info = await loadedInfo(port);
    assert.equal(info.type, 'info');
    const attribution = { name: 'voxd', url: 'https://www.npmjs.com/package/voxd' };
    const [asr] = info.data.asr as Record<string, unknown>[];
    assert.deepEqual(
      [asr?.name, asr?.attribution, asr?.installed, typeof asr?.version, asr?.supports_transcript_streaming],
      ['voxd', attribution, true, 'string', true],
    );
    const [model] = asr?.models as Record<string, unknown>[];
    assert.deepEqual(
      [model?.name, model?.languages, model?.installed, model?.attribution, 'version' in (model ?? {})],
      ['sphinx', ['en'], true, attribution, true],
    );
    const [tts] = info.data.tts as Record<string, unknown>[];
    assert.deepEqual([tts?.name, tts?.installed, tts?.supports_synthesize_streaming], ['voxd', true, true]);
    const voices = tts?.voices as Record<string, unknown>[];
    assert.ok(voices.length >= 4, 'flite voices');
    for (const voice of voices) {
      assert.deepEqual(voice.attribution, attribution);
      assert.equal(voice.installed, true);
      assert.ok(Array.isArray(voice.languages) && voice.languages.includes('en_US'), JSON.stringify(voice));
    }
    assert.ok(!('satellite' in info.data), 'no satellite: Home Assistant would set up nothing');
    for (const key of ['handle', 'intent', 'wake', 'mic', 'snd']) assert.deepEqual(info.data[key], []);
  });

  it('transcribes a clip at 16 kHz as HTTP does, with streamed chunks first, and at 22.05 kHz', async () => {
    // over HTTP first: the Wyoming connection would be idle meanwhile
    const [viaHttp, viaHttp22k] = [await httpTranscript(server.base, clips[16000].wav), await httpTranscript(server.base, clips[22050].wav)];
    const client = await connectWyoming(port);
    const events = await transcribe(client, clips[16000].pcm, 16000);
    const transcript = events.at(-1)!;
    assert.equal(transcript.data.text, viaHttp);
    assert.equal(transcript.data.language, 'en');
    assert.equal(events[0]?.type, 'transcript-start');
    const chunks = events.filter((e) => e.type === 'transcript-chunk').map((e) => e.data.text as string);
    assert.ok(chunks.length >= 2, `${chunks.length} chunks`);
    assert.equal(chunks.join(' ').replace(/\s+/g, ' ').trim(), viaHttp);
    assert.equal((await client.next()).type, 'transcript-stop');

    // another rate on the same connection
    const again = (await transcribe(client, clips[22050].pcm, 22050)).at(-1)!;
    assert.equal(again.data.text, viaHttp22k);
    client.close();
  });

  it('answers audio-stop with no audio with an empty transcript', async () => {
    const client = await connectWyoming(port);
    const events = await transcribe(client, Buffer.alloc(0), 16000);
    assert.deepEqual(
      events.map((e) => [e.type, e.data.text]),
      [['transcript', '']],
    );
    client.close();
  });

  it('speaks a synthesize as one audio group, the same samples HTTP gives', async () => {
    const client = await connectWyoming(port);
    const text = 'Hello from voxd. This is Home Assistant speaking.';
    client.send('synthesize', { text, voice: { name: 'slt' } });
    const events = await client.until('audio-stop');
    client.close();
    assert.deepEqual([...new Set(events.map((e) => e.type))], ['audio-start', 'audio-chunk', 'audio-stop']);
    const { format, pcm } = audioOf(events);
    assert.deepEqual([format.rate, format.width, format.channels], [16000, 2, 1]);
    assert.ok(pcm.equals(await httpSpeech(server.base, text)), 'the same PCM as /v1/audio/speech');
  });

  it('streams synthesis a sentence at a time, ignoring the compatibility synthesize, and ends with synthesize-stopped', async () => {
    const client = await connectWyoming(port);
    client.send('synthesize-start', { voice: { name: 'slt' } });
    for (const text of ['Hello ', 'world. How', ' are you', ' today?']) client.send('synthesize-chunk', { text });
    client.send('synthesize', { text: 'Hello world. How are you today?', voice: { name: 'slt' } });
    client.send('synthesize-stop');
    const events = await client.until('synthesize-stopped');
    client.close();
    const groups = events.filter((e) => e.type === 'audio-start').length;
    assert.equal(groups, 2, `one audio group per sentence, none for the compatibility synthesize: ${events.map((e) => e.type).join(' ')}`);
    assert.equal(events.filter((e) => e.type === 'audio-stop').length, 2);
    const first = events.slice(0, events.findIndex((e) => e.type === 'audio-stop') + 1);
    assert.ok(audioOf(first).pcm.equals(await httpSpeech(server.base, 'Hello world.')), 'the first sentence as HTTP speaks it');

    // an empty stream still ends
    const empty = await connectWyoming(port);
    empty.send('synthesize-start');
    empty.send('synthesize-stop');
    assert.deepEqual(
      (await empty.until('synthesize-stopped')).map((e) => e.type),
      ['synthesize-stopped'],
    );
    empty.close();
  });

  it('answers the reference implementation as Home Assistant drives it', { skip: wyomingReferenceUnavailable() }, async () => {
    await loadedInfo(port);
    const outDir = fs.mkdtempSync(path.join(os.tmpdir(), 'voxd-wyoming-reference-'));
    cleanups.push(async () => fs.rmSync(outDir, { recursive: true, force: true }));
    const report = await runWyomingReference(port, JFK_WAV, 'slt', outDir);
    const { asr, tts, satellite } = report.info;
    assert.deepEqual(
      [asr.name, asr.supports_transcript_streaming, asr.models.map((m) => [m.name, m.installed, m.languages])],
      ['voxd', true, [['sphinx', true, ['en']]]],
    );
    assert.deepEqual([tts.name, tts.supports_synthesize_streaming, satellite], ['voxd', true, false]);
    assert.ok(
      tts.voices.some((v) => v.name === 'slt' && v.installed && v.languages.includes('en_US')),
      JSON.stringify(tts.voices),
    );

    // jfk.wav as it is (16 kHz), and resampled by the package's own converter, each as HTTP transcribes the same audio
    const clip22k = fs.readFileSync(path.join(outDir, 'clip-22050.wav'));
    const expected = { '16000': await httpTranscript(server.base, fs.readFileSync(JFK_WAV)), '22050': await httpTranscript(server.base, clip22k) };
    for (const rate of ['16000', '22050'] as const) {
      const transcript = report.transcripts[rate];
      assert.equal(transcript.text, expected[rate], rate);
      assert.equal(transcript.language, 'en');
      assert.deepEqual([transcript.events[0], transcript.events.at(-1)], ['transcript-start', 'transcript'], rate);
      assert.equal(transcript.chunks.join(' ').replace(/\s+/g, ' ').trim(), transcript.text, rate);
    }

    const pcmOf = (name: string) => fs.readFileSync(path.join(outDir, name)).subarray(44);
    assert.deepEqual([report.speech.rate, report.speech.width, report.speech.channels], [16000, 2, 1]);
    assert.ok(pcmOf('speech.wav').equals(await httpSpeech(server.base, report.speech.text)), 'synthesize: the PCM HTTP gives');
    assert.equal(report.streamed.groups.length, 2, 'one audio group per sentence, none for the compatibility synthesize');
    assert.ok(pcmOf('streamed-0.wav').equals(await httpSpeech(server.base, 'Hello world.')), 'the first sentence');
    assert.ok(pcmOf('streamed-1.wav').equals(await httpSpeech(server.base, 'How are you today?')), 'the second sentence');

    assert.match(report.error.text, /unknown voice 'nobody'/);
    assert.equal(typeof report.error.code, 'string');
    assert.equal(report.error.closed, true, 'the connection closed after the error');
  });

  it('answers what it cannot do with an error event and closes the connection, and goes on serving', async () => {
    const cases: [string, (client: WyomingClient) => void, RegExp][] = [
      ['an unknown voice', (c) => c.send('synthesize', { text: 'Hi.', voice: { name: 'nobody' } }), /unknown voice 'nobody'/],
      ['a language no voice speaks', (c) => c.send('synthesize', { text: 'Hi.', voice: { language: 'xx_XX' } }), /no voice speaks xx_XX/],
      ['synthesize without text', (c) => c.send('synthesize', {}), /text is required/],
      ['an impossible audio format', (c) => c.send('audio-start', { rate: 16000, width: 5, channels: 1 }), /width must be an integer from 1 to 4/],
      ['audio before audio-start', (c) => c.send('audio-chunk', { rate: 16000, width: 2, channels: 1 }, Buffer.alloc(4)), /audio-chunk before audio-start/],
      [
        'a language the model does not speak',
        (c) => (
          c.send('transcribe', { language: 'de' }),
          c.send('audio-start', { rate: 16000, width: 2, channels: 1 }),
          c.send('audio-chunk', { rate: 16000, width: 2, channels: 1 }, clips[16000].pcm.subarray(0, 32000)),
          c.send('audio-stop')
        ),
        /de/,
      ],
      ['a header that is not JSON', (c) => c.write('this is not json\n'), /not JSON/],
      [
        'a payload over the limit',
        (c) => c.write(`${JSON.stringify({ type: 'audio-chunk', payload_length: 64 * 1024 * 1024 })}\n`),
        /payload_length .* over the limit/,
      ],
    ];
    for (const [what, send, message] of cases) {
      const client = await connectWyoming(port);
      send(client);
      const event = await client.next();
      assert.equal(event.type, 'error', what);
      assert.match(event.data.text as string, message, what);
      assert.equal(typeof event.data.code, 'string', what);
      await client.closed;
    }
    const client = await connectWyoming(port);
    client.send('describe');
    assert.equal((await client.next()).type, 'info');
    client.close();
  });

  it('survives a client that leaves in the middle of a synthesis', async () => {
    const client = await connectWyoming(port);
    client.send('synthesize', { text: 'A long text to speak, sentence after sentence. '.repeat(40) });
    await client.until('audio-chunk');
    client.close();
    const next = await connectWyoming(port);
    next.send('synthesize', { text: 'Still here.' });
    assert.equal((await next.until('audio-stop')).at(-1)?.type, 'audio-stop');
    next.close();
  });

  it('answers a connection beyond --max-wyoming-connections with an error and closes it', async () => {
    const small = await startTestServer(
      { after: (fn) => cleanups.push(fn) },
      { wyomingPort: 0, maxWyomingConnections: 1, sttModel: 'sphinx', ttsModel: 'flite' },
    );
    const first = await connectWyoming(small.server.wyomingPort!);
    const second = await connectWyoming(small.server.wyomingPort!);
    const refused = await second.next();
    assert.deepEqual([refused.type, refused.data.code], ['error', 'too_many_connections']);
    await second.closed;
    first.send('describe');
    assert.equal((await first.next()).type, 'info', 'the first connection is served');
    first.close();
    // its place is free again once the server has seen it close
    const deadline = performance.now() + 10_000;
    for (;;) {
      const third = await connectWyoming(small.server.wyomingPort!);
      third.send('describe');
      const answer = await third.next();
      third.close();
      if (answer.type === 'info') break;
      assert.ok(performance.now() < deadline, 'the closed connection never freed its place');
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  });

  it('closes a connection on which nothing is sent for --wyoming-idle-timeout, with an error', async () => {
    const client = await connectWyoming(port);
    const opened = performance.now();
    const timedOut = await client.next((IDLE_SECONDS + 5) * 1000);
    assert.deepEqual([timedOut.type, timedOut.data.code], ['error', 'request_timeout']);
    assert.ok(performance.now() - opened >= IDLE_SECONDS * 1000 - 50, 'not before the idle timeout');
    await client.closed;
  });

  it('serves 8 clients at once, each its own transcript, however long one waits for its turn', async () => {
    const clients = await Promise.all(Array.from({ length: 8 }, () => connectWyoming(port)));
    // 4 s of the clip each, which the built-in recognizer takes one at a time (modelConcurrency 1)
    const clip = clips[16000].pcm.subarray(0, 4 * 16000 * 2);
    const answers = await Promise.all(
      clients.map(async (client) => {
        const sent = performance.now();
        const events = await transcribe(client, clip, 16000, 2048, 90_000);
        return { text: events.at(-1)?.data.text, waited: performance.now() - sent };
      }),
    );
    for (const client of clients) client.close();
    const transcripts = answers.map((answer) => answer.text);
    assert.deepEqual(new Set(transcripts).size, 1, 'every client got the same transcript');
    assert.ok((transcripts[0] as string).length > 5, `a transcript: ${transcripts[0]}`);
    // what makes this a test of the idle timeout: the last client waited longer than it with nothing sent
    const longest = Math.max(...answers.map((answer) => answer.waited));
    assert.ok(longest > IDLE_SECONDS * 1000, `the last answer came after ${Math.round(longest)} ms: give the clients longer clips`);
  });
});

/** An address of this machine other than loopback, where mDNS can run, or null. */
function networkAddress(): string | null {
  const addresses = Object.values(os.networkInterfaces()).flatMap((entries) => entries ?? []);
  return addresses.find((entry) => entry.family === 'IPv4' && !entry.internal)?.address ?? null;
}

describe('Wyoming discovery (zeroconf)', { skip: zeroconfBrowserUnavailable() || (networkAddress() === null && 'no network interface but loopback') }, () => {
  it('is advertised as Home Assistant browses for it, at an address it serves on, and says goodbye when it stops', async () => {
    const browser = await browseWyoming();
    const stops: (() => Promise<void>)[] = [];
    try {
      const name = `voxd-test-${process.pid}`;
      const start = (flags: Record<string, unknown>) =>
        startTestServer({ after: (fn) => stops.push(fn) }, { wyomingPort: 0, sttModel: null, ttsModel: null, ...flags });
      const advertised = await start({ wyomingHost: '0.0.0.0', wyomingZeroconfName: name });
      // and two that are not: zeroconf off, and a listener only this machine reaches
      await start({ wyomingHost: '0.0.0.0', wyomingZeroconf: 'off', wyomingZeroconfName: `${name}-off` });
      await start({ wyomingHost: '127.0.0.1', wyomingZeroconfName: `${name}-loopback` });
      const fqdn = `${name}._wyoming._tcp.local.`;
      const found = await browser.change((change) => change.event === 'added' && change.name === fqdn, 15_000);
      assert.equal(found.port, advertised.server.wyomingPort);
      const address = found.addresses?.find((a) => net.isIPv4(a) && !a.startsWith('127.'));
      assert.ok(address, `a network address among ${JSON.stringify(found.addresses)}`);
      // as Home Assistant then does: connect where discovery says, and describe
      const client = await connectWyoming(found.port!, address);
      client.send('describe');
      assert.equal((await client.next()).type, 'info');
      client.close();
      for (const stop of stops.splice(0)) await stop();
      await browser.change((change) => change.event === 'removed' && change.name === fqdn, 10_000);
      assert.deepEqual(
        browser.seen.filter((change) => change.name.startsWith(`${name}-`)),
        [],
        'nothing advertised with --wyoming-zeroconf off or on loopback',
      );
    } finally {
      for (const stop of stops) await stop();
      await browser.close();
    }
  });
});
