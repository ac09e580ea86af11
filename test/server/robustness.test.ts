/**
 * What hostile, careless or merely unusual clients do, against real servers (test/helpers/hostile.ts has the
 * probes; bench/hostile.ts prints the same probes against a server of its own): nothing a client sends may crash
 * the server, fill its memory, hang it or get a 500, and the vendor SDK's own examples must work unchanged.
 */
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { toFile } from 'openai';
import { concatSamples } from '../../src/engines/samples.js';
import { interleavedWavBytes, readWavMono, wavBytes } from '../helpers/wav.js';
import {
  conflictingContentLength,
  envelopeCode,
  expectContinue,
  healthy,
  heldConnections,
  longSpeechText,
  openConnections,
  oversizedUpload,
  pausedSpeechStream,
  postJson,
  rawExchange,
  RealtimeProbe,
  statusLines,
  wsUpgrade,
} from '../helpers/hostile.js';
import { JFK_WAV, SHARED } from '../helpers/paths.js';
import { cliEnv, freePort, spawnCli, tempDir, waitHealthy } from '../helpers/process.js';
import { expectEnvelope, sdk, startTestServer, type TestServer } from '../helpers/server.js';
import { FLITE_INSTALLED, SPHINX_INSTALLED } from '../helpers/transcripts.js';
import { transportUnderTest } from '../helpers/transport.js';

const SKIP = FLITE_INSTALLED && SPHINX_INSTALLED ? false : 'needs Debian libflite1, libpocketsphinx3 and pocketsphinx-en-us';
const PRLIMIT = spawnSync('prlimit', ['--version']).status === 0;

function sentences(count: number): string {
  return Array.from({ length: count }, (_, i) => `This is sentence number ${i + 1}.`).join(' ');
}

/** `voxd_jobs_total` of a model by outcome. */
async function jobs(base: string, model: string): Promise<Record<string, number>> {
  const metrics = await (await fetch(`${base}/metrics`)).text();
  const counts: Record<string, number> = {};
  for (const m of metrics.matchAll(new RegExp(`^voxd_jobs_total\\{model="${model}",outcome="(\\w+)"\\} (\\d+)`, 'gm'))) counts[m[1] as string] = Number(m[2]);
  return counts;
}

/** Interleaved stereo (or wider) noise-plus-tone, so a separator has something to do. */
function noisyChannels(channels: number, seconds: number, rate: number): Float32Array {
  const samples = new Float32Array(channels * seconds * rate);
  for (let i = 0; i < samples.length; i++) samples[i] = 0.2 * Math.sin((i / channels) * 0.05) + 0.05 * (Math.random() - 0.5);
  return samples;
}

function separationForm(wav: Buffer, description = 'vocals'): FormData {
  const form = new FormData();
  form.append('file', new Blob([new Uint8Array(wav)]), 'mix.wav');
  form.append('description', description);
  return form;
}

describe('a client cannot take the server down: HTTP', { skip: SKIP }, () => {
  let server: TestServer;
  const cleanups: (() => Promise<void>)[] = [];
  after(() => Promise.all(cleanups.map((cleanup) => cleanup())));
  before(async () => {
    server = await startTestServer({ after: (cleanup) => cleanups.push(cleanup) }, { maxUploadMb: 2, maxQueue: 2, modelConcurrency: 1, maxInputChars: 20_000 });
  });

  it('admits a speech request whole: 100 sentences on an idle server, and a refused request leaves no jobs behind', async () => {
    const hundred = await postJson(server.base, '/v1/audio/speech', { model: 'tts-1', input: 'Yes. '.repeat(100), response_format: 'pcm' });
    assert.equal(hundred.status, 200, 'one request, however many sentences: --max-queue 2 counts requests');
    const before = await jobs(server.base, 'flite');
    // one running and --max-queue 2 waiting: the fourth request is refused whole, before any of its sentences queue
    const replies = await Promise.all(
      Array.from({ length: 4 }, (_, i) => postJson(server.base, '/v1/audio/speech', { model: 'tts-1', input: sentences(30 + i), response_format: 'pcm' })),
    );
    assert.deepEqual(
      replies.map((r) => r.status),
      [200, 200, 200, 503],
    );
    assert.equal(replies[3]?.code, 'queue_full');
    assert.match(replies[3]?.headers.get('retry-after') ?? '', /^\d+$/);
    const afterward = await jobs(server.base, 'flite');
    assert.equal((afterward.ok ?? 0) - (before.ok ?? 0), 30 + 31 + 32, 'only the sentences of the admitted requests ran');
    assert.equal((afterward.cancelled ?? 0) + (afterward.error ?? 0), (before.cancelled ?? 0) + (before.error ?? 0));
  });

  it("speaks the vendor's own example: style instructions a model cannot follow are ignored, and the reply says so", async () => {
    const response = await sdk(server.base)
      .audio.speech.create({
        model: 'gpt-4o-mini-tts',
        voice: 'coral',
        input: 'Today is a wonderful day to build something people love!',
        instructions: 'Speak in a cheerful and positive tone.',
      })
      .asResponse();
    assert.equal(response.status, 200);
    assert.equal(response.headers.get('x-voxd-ignored'), 'instructions');
    assert.ok((await response.arrayBuffer()).byteLength > 1000);
    const logs = fs.readFileSync(path.join(server.logDir, fs.readdirSync(server.logDir)[0] as string), 'utf8');
    assert.match(logs, /cannot honour instructions/);
  });

  it('translates English audio on the English-only default recognizer (the SDK example), refusing only another declared language', async () => {
    const translated = await sdk(server.base).audio.translations.create({ file: await toFile(fs.createReadStream(JFK_WAV), 'jfk.wav'), model: 'whisper-1' });
    assert.match(translated.text, /country/);
    const form = new FormData();
    form.append('file', new Blob([fs.readFileSync(JFK_WAV)]), 'jfk.wav');
    form.append('model', 'whisper-1');
    form.append('language', 'de');
    await expectEnvelope(await fetch(`${server.base}/v1/audio/translations`, { method: 'POST', body: form }), 400, 'invalid_request', 'language');
  });

  it('answers conflicting Content-Length headers with 400 and never serves a request hidden behind them', async () => {
    const hidden = await conflictingContentLength(server.base);
    assert.ok(!hidden.statuses.includes('200'), `the hidden request was served: ${hidden.statuses.join(', ')}`);
    assert.equal(hidden.closed, true);
    const plain = await rawExchange(
      server.base,
      'POST /v1/models HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}',
    );
    assert.deepEqual(statusLines(plain.text), ['400']);
    assert.match(plain.text, /Content-Length/);
    assert.equal(plain.closed, true, 'the connection is closed after the 400');
    const repeated = await rawExchange(
      server.base,
      'POST /v1/models HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n{}',
      500,
    );
    // identical repeats: uWS reads them as one length (and the body lacks model_name), node:http refuses them; both 400
    assert.deepEqual(statusLines(repeated.text), ['400']);
  });

  it('closes hundreds of connections that send nothing or dribble their head within 15 s, serving meanwhile', async () => {
    const held = Promise.all([heldConnections(server.base, 200, false, 15), heldConnections(server.base, 200, true, 15)]);
    await sleep(1000);
    assert.ok(await healthy(server.base), 'others are served while they are held');
    const [silent, dribbling] = await held;
    assert.deepEqual([silent.closed, dribbling.closed], [200, 200]);
    assert.ok(await healthy(server.base));
  });

  it('answers every oversized upload with 413, never a reset', async () => {
    const outcomes: string[] = [];
    for (let i = 0; i < 12; i++) outcomes.push(await oversizedUpload(server.base, 8, i % 3 !== 2));
    assert.deepEqual(new Set(outcomes), new Set(['413']), outcomes.join(', '));
    assert.ok(await healthy(server.base));
  });

  it('refuses model IDs no file system can name with a 400 on every endpoint that takes one', async () => {
    const ids = ['m'.repeat(5000), `owner/${'r'.repeat(300)}`, 'tab\there'];
    for (const id of ids) {
      const speech = await postJson(server.base, '/v1/audio/speech', { model: id, input: 'hi' });
      assert.deepEqual([speech.status, speech.code], [400, 'invalid_model'], id.slice(0, 20));
      await expectEnvelope(await fetch(`${server.base}/v1/models?model_name=${encodeURIComponent(id)}`, { method: 'POST' }), 400, 'invalid_model');
      await expectEnvelope(await fetch(`${server.base}/v1/models/${encodeURIComponent(id)}`), 400, 'invalid_model');
      const form = new FormData();
      form.append('file', new Blob([fs.readFileSync(JFK_WAV)]), 'jfk.wav');
      form.append('model', id);
      await expectEnvelope(await fetch(`${server.base}/v1/audio/transcriptions`, { method: 'POST', body: form }), 400, 'invalid_model');
    }
    const live = new RealtimeProbe(`${server.base.replace('http', 'ws')}/v1/realtime?model=${'m'.repeat(5000)}`);
    await live.send({ type: 'input_audio_buffer.append', audio: Buffer.alloc(3200).toString('base64') });
    const error = await live.next('error');
    assert.equal((error.error as { code: string }).code, 'invalid_model');
    live.close();
  });

  it('keeps a streamed response alive while its client pauses, then delivers it whole', async () => {
    const input = longSpeechText();
    const straight = await pausedSpeechStream(server.base, input, 0);
    const paused = await pausedSpeechStream(server.base, input, 14); // past uWS's 10 s idle timeout
    assert.ok(straight.whole && straight.body.length > 12_000_000, `unpaused: ${straight.body.length} bytes`);
    assert.equal(paused.whole, true, `paused: ${paused.body.length} of ${straight.body.length} bytes`);
    assert.ok(paused.body.equals(straight.body), 'the same bytes, none lost or added');
  });

  it('streams the JSON of a separation, so long inputs never become one giant string', async () => {
    const response = await fetch(`${server.base}/v1/audio/separations`, {
      method: 'POST',
      body: separationForm(interleavedWavBytes(noisyChannels(2, 8, 16000), 2, 16000)),
    });
    assert.equal(response.status, 200);
    assert.equal(response.headers.get('content-length'), null);
    assert.match(response.headers.get('content-type') ?? '', /application\/json/);
    const answer = (await response.json()) as { target: string; residual: string; sample_rate: number };
    assert.equal(answer.sample_rate, 16000);
    for (const stem of [answer.target, answer.residual]) assert.equal(Buffer.from(stem, 'base64').length, 58 + 8 * 16000 * 2 * 4);
  });

  it('separates 40 channels without positions, down-mixed to stereo', async () => {
    const response = await fetch(`${server.base}/v1/audio/separations`, {
      method: 'POST',
      body: separationForm(interleavedWavBytes(noisyChannels(40, 1, 8000), 40, 8000)),
    });
    assert.equal(response.status, 200, await response.clone().text());
    const answer = (await response.json()) as { target: string };
    assert.equal(Buffer.from(answer.target, 'base64').readUInt16LE(22), 2, 'a stereo WAV');
  });

  it('answers bad realtime audio with error events and keeps the session', async () => {
    const live = new RealtimeProbe(`${server.base.replace('http', 'ws')}/v1/realtime?model=sphinx`);
    await live.send({ type: 'input_audio_buffer.append', audio: 'not base64 at all!', event_id: 'bad-1' });
    const notBase64 = (await live.next('error')).error as { code: string; event_id: string };
    assert.deepEqual([notBase64.code, notBase64.event_id], ['invalid_value', 'bad-1']);
    await live.send({ type: 'input_audio_buffer.append', audio: Buffer.alloc(3).toString('base64') });
    assert.equal(((await live.next('error')).error as { code: string }).code, 'invalid_value', 'odd byte count');
    await live.send('x'.repeat(24 * 1024 * 1024)); // over the endpoint's limit, under the transport's
    assert.equal(((await live.next('error')).error as { code: string }).code, 'message_too_large');
    const speech = readWavMono(path.join(SHARED, 'audio', 'speech', 'librivox-0870.wav'));
    const pcm = Buffer.alloc(speech.samples.length * 2);
    speech.samples.forEach((x, i) => pcm.writeInt16LE(Math.max(-32768, Math.min(32767, Math.round(x * 32768))), i * 2));
    await live.send({ type: 'session.update', session: { type: 'transcription', audio: { input: { format: { type: 'audio/pcm', rate: 16000 } } } } });
    await live.send({ type: 'input_audio_buffer.append', audio: pcm.toString('base64') });
    await live.send({ type: 'input_audio_buffer.commit' });
    const completed = await live.next('conversation.item.input_audio_transcription.completed', 30_000);
    assert.ok(String(completed.transcript).split(' ').length > 5, 'the session still transcribes');
    live.close();
  });
});

describe('a client cannot take the server down: origins and paths', { skip: SKIP }, () => {
  it('refuses WebSocket upgrades from pages of other origins, as CORS does for HTTP', async (t) => {
    const server = await startTestServer(t, { allowedOrigins: ['http://good.test'] });
    const ws = server.base.replace('http', 'ws');
    for (const route of ['/v1/realtime?model=sphinx', '/v1/audio/transcriptions/realtime']) {
      assert.deepEqual(await wsUpgrade(ws + route, { origin: 'http://evil.test' }), { status: 403, code: 'origin_not_allowed' }, route);
      assert.equal((await wsUpgrade(ws + route, { origin: 'http://good.test' })).status, 101, route);
      assert.equal((await wsUpgrade(ws + route)).status, 101, `${route}: SDKs send no Origin`);
    }
  });

  it('answers connections beyond --max-connections with 503 too_many_connections (node:http)', async (t) => {
    const server = await startTestServer(t, { maxConnections: 3 });
    if (server.server.transport === 'uws') return t.skip('uWS has no connection hook in JavaScript (docs/deploy.md)');
    const held = await openConnections(server.base, 3);
    t.after(() => held.forEach((socket) => socket.destroy()));
    const refused = await fetch(`${server.base}/healthz`);
    assert.equal(refused.status, 503);
    assert.equal(envelopeCode(Buffer.from(await refused.arrayBuffer())), 'too_many_connections');
  });

  it('serves on after a flood of connections used up its open-file limit', { skip: PRLIMIT ? false : 'needs prlimit (util-linux)' }, async (t) => {
    const scratch = await tempDir(t, 'voxd-nofile-');
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    const args = ['serve', '--host', '127.0.0.1', '--port', String(port), '--log-dir', path.join(scratch, 'logs'), '--transport', transportUnderTest()];
    const proc = spawnCli(t, args, cliEnv(scratch));
    await waitHealthy(base, proc);
    const pid = String(proc.child.pid);
    // a soft limit a few descriptors above what the server holds now: the flood's connections use them up
    execFileSync('prlimit', ['--pid', pid, `--nofile=${fs.readdirSync(`/proc/${pid}/fd`).length + 8}:`]);
    const flood = await openConnections(base, 200);
    await sleep(500);
    for (const socket of flood) socket.destroy();
    assert.equal(proc.exitStatus, null, `the server is still running; stderr: ${proc.stderr}`);
    await waitHealthy(base, proc);
  });

  it('answers the same for a path outside --models-dir as for a missing one', async (t) => {
    const root = await tempDir(t, 'voxd-models-');
    const server = await startTestServer(t, { modelsDirs: [root] });
    const answer = async (id: string): Promise<[number, string]> => {
      const response = await fetch(`${server.base}/v1/models?model_name=${encodeURIComponent(id)}`, { method: 'POST' });
      const { error } = (await response.json()) as { error: { message: string } };
      return [response.status, error.message.replace(id, 'ID')];
    };
    assert.deepEqual(await answer('/etc/hostname'), await answer('/etc/no-such-file'));
    assert.deepEqual(await answer('../../etc/hostname'), await answer('../../etc/no-such-file'));
  });
});

describe('a client cannot take the server down: uploads in flight (--max-inflight-upload-mb)', { skip: SKIP }, () => {
  /** `voxd_upload_inflight_bytes`, or null where the server has no such gauge. */
  async function inflightUploadBytes(base: string): Promise<number | null> {
    const metrics = await (await fetch(`${base}/metrics`)).text();
    const value = /^voxd_upload_inflight_bytes (\d+)/m.exec(metrics)?.[1];
    return value === undefined ? null : Number(value);
  }

  async function waitFor(what: string, holds: () => Promise<boolean>): Promise<void> {
    const deadline = performance.now() + 15_000;
    while (!(await holds())) {
      assert.ok(performance.now() < deadline, what);
      await sleep(20);
    }
  }

  /** The head of a transcription upload of `bytes`, and the start of its body. */
  function uploadHead(bytes: number): string {
    return (
      `POST /v1/audio/transcriptions HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=b\r\nContent-Length: ${bytes}\r\n\r\n` +
      '--b\r\nContent-Disposition: form-data; name="model"\r\n\r\nsphinx\r\n'
    );
  }

  async function transcribe(base: string, wav: Buffer): Promise<Response> {
    const form = new FormData();
    form.append('model', 'sphinx');
    form.append('file', new Blob([new Uint8Array(wav)]), 'speech.wav');
    return fetch(`${base}/v1/audio/transcriptions`, { method: 'POST', body: form });
  }

  it('refuses uploads beyond the bound with 503 and Retry-After before reading their bodies, and serves the ones it admitted', async (t) => {
    const server = await startTestServer(t, { maxInflightUploadMb: 10 });
    const clips = ['librivox-0870.wav', 'librivox-0890.wav', 'librivox-0920.wav'].map(
      (name) => readWavMono(path.join(SHARED, 'audio', 'speech', name)).samples,
    );
    // 18 s, about 590 kB: counted at 8 times that while in flight, so two fit in 10 MiB
    const wav = wavBytes(concatSamples(clips), 16000);

    // an upload that declares 2 MiB and sends no more than its first field: admitted alone, it holds the budget
    const held = net.connect(Number(new URL(server.base).port), '127.0.0.1', () => held.write(uploadHead(2 * 1024 * 1024)));
    held.on('error', () => undefined);
    t.after(() => held.destroy());
    await waitFor('the first upload is admitted', async () => ((await inflightUploadBytes(server.base)) ?? 0) > 0);

    const refused = await transcribe(server.base, wav);
    assert.equal(refused.headers.get('retry-after'), '5');
    await expectEnvelope(refused, 503, 'too_many_uploads');
    // refused on its declared length: the answer comes before any of the body was sent
    const early = await rawExchange(server.base, uploadHead(10 * 1024 * 1024), 3000);
    assert.deepEqual(statusLines(early.text), ['503'], early.text);
    assert.match(early.text, /retry-after: 5\r\n/i);
    assert.match(early.text, /"type":"server_error".*"code":"too_many_uploads"/);
    // a client that asks before sending its body (curl does, for bodies over 1 MiB) is refused, not asked for it
    const asked = await expectContinue(server.base, '/v1/audio/transcriptions', '', 10 * 1024 * 1024, 'multipart/form-data; boundary=b');
    // uWS sends 100 Continue itself, before voxd sees the request
    assert.deepEqual(asked.statuses, server.server.transport === 'uws' ? ['100', '503'] : ['503']);
    if (server.server.transport === 'node') assert.equal(asked.closed, true, 'the body is never sent: the connection closes');
    await expectEnvelope(await fetch(`${server.base}/v1/audio/separations`, { method: 'POST', body: separationForm(wav) }), 503, 'too_many_uploads');

    held.destroy();
    await waitFor('the upload whose client left is released', async () => (await inflightUploadBytes(server.base)) === 0);
    const replies = await Promise.all(Array.from({ length: 4 }, () => transcribe(server.base, wav)));
    const statuses = replies.map((reply) => reply.status);
    assert.ok(statuses.filter((status) => status === 200).length >= 2, `two fit in the bound: ${statuses.join(', ')}`);
    assert.ok(statuses.includes(503), `the rest wait their turn: ${statuses.join(', ')}`);
    for (const reply of replies) {
      if (reply.status === 503) await expectEnvelope(reply, 503, 'too_many_uploads');
      else assert.ok(((await reply.json()) as { text: string }).text.split(' ').length > 20, 'an admitted upload is transcribed');
    }
    await waitFor('every upload is released', async () => (await inflightUploadBytes(server.base)) === 0);
  });
});

describe('shutdown: nothing waits on a second signal, nobody gets an empty reply', { skip: SKIP }, () => {
  /** A separation long enough to still run when the signals come (a few seconds of native work). */
  const longMix = interleavedWavBytes(noisyChannels(2, 150, 44100), 2, 44100);

  async function serveWithRunningSeparation(
    t: import('node:test').TestContext,
    flags: string[],
  ): Promise<{ proc: ReturnType<typeof spawnCli>; reply: Promise<Response> }> {
    const scratch = await tempDir(t, 'voxd-shutdown-');
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    const proc = spawnCli(t, ['serve', '--host', '127.0.0.1', '--port', String(port), '--log-dir', path.join(scratch, 'logs'), ...flags], cliEnv(scratch));
    await waitHealthy(base, proc);
    const reply = fetch(`${base}/v1/audio/separations`, { method: 'POST', body: separationForm(longMix) });
    reply.catch(() => undefined);
    for (;;) {
      const metrics = await (await fetch(`${base}/metrics`)).text();
      if (/^voxd_jobs_running\{model="spectral"\} 1/m.test(metrics)) break;
      await sleep(50);
    }
    return { proc, reply };
  }

  it('exits at once on a second SIGTERM while a native job runs', async (t) => {
    const { proc } = await serveWithRunningSeparation(t, []);
    proc.child.kill('SIGTERM');
    await proc.waitStderr(/draining/, 5000);
    const second = performance.now();
    proc.child.kill('SIGTERM');
    const status = await proc.waitExit(5000);
    assert.ok(performance.now() - second < 2000, `exited ${Math.round(performance.now() - second)} ms after the second signal`);
    assert.equal(status.code, 128 + 15);
  });

  it('answers a request still running at --drain-timeout-s with 503 shutting_down, then exits 0', async (t) => {
    const { proc, reply } = await serveWithRunningSeparation(t, ['--drain-timeout-s', '1']);
    proc.child.kill('SIGTERM');
    await expectEnvelope(await reply, 503, 'shutting_down');
    assert.equal((await proc.waitExit(10_000)).code, 0);
  });
});
