import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it, type TestContext } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import OpenAI from 'openai';
import { heldUntilEnd, HubDouble } from '../helpers/hub-double.js';
import { SILERO_V5, SILERO_V6 } from '../helpers/paths.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const REPO = 'ggml-org/whisper-vad';
const V6 = `${REPO}/ggml-silero-v6.2.0.bin`;
const V5 = `${REPO}/ggml-silero-v5.1.2.bin`;

async function withHub(t: TestContext, flags: Record<string, unknown> = {}): Promise<TestServer & { double: HubDouble }> {
  const double = await HubDouble.start();
  t.after(() => double.close());
  double.addRepo(REPO, { files: { 'ggml-silero-v6.2.0.bin': SILERO_V6, 'ggml-silero-v5.1.2.bin': SILERO_V5 } });
  const server = await startTestServer(t, flags, { HF_ENDPOINT: double.endpoint });
  return { ...server, double };
}

/** Asks the server to load `id`, as POST /v1/models does. */
function postModel(base: string, id: string, signal?: AbortSignal): Promise<Response> {
  return fetch(`${base}/v1/models?model_name=${encodeURIComponent(id)}`, { method: 'POST', signal: signal ?? AbortSignal.timeout(15_000) });
}

/** Waits until `check` holds; fails after 15 s. */
async function eventually(what: string, check: () => boolean | Promise<boolean>): Promise<void> {
  const deadline = performance.now() + 15_000;
  while (!(await check())) {
    assert.ok(performance.now() < deadline, `${what}: not within 15 s`);
    await sleep(20);
  }
}

/** The server's log records so far (its JSON log files). */
async function logRecords(logDir: string): Promise<{ msg?: string; outcome?: string }[]> {
  const files = fs.readdirSync(logDir).filter((name) => name.endsWith('.log'));
  const text = files.map((name) => fs.readFileSync(path.join(logDir, name), 'utf8')).join('');
  return text
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as { msg?: string; outcome?: string });
}

function sdk(base: string): OpenAI {
  return new OpenAI({ baseURL: `${base}/v1`, apiKey: 'sk-placeholder', maxRetries: 0 });
}

async function envelope(response: Response, status: number, code: string): Promise<{ message: string; param: string | null }> {
  assert.equal(response.status, status);
  assert.match(response.headers.get('content-type') ?? '', /application\/json/);
  assert.ok(response.headers.get('x-request-id'));
  const body = (await response.json()) as { error: { message: string; type: string; param: string | null; code: string } };
  assert.equal(body.error.code, code, body.error.message);
  assert.equal(typeof body.error.message, 'string');
  assert.equal(typeof body.error.type, 'string');
  return body.error;
}

describe('model management API', () => {
  it('lists, loads, retrieves and unloads models through the openai SDK and plain HTTP', async (t) => {
    const { base, double } = await withHub(t);
    const client = sdk(base);
    assert.deepEqual((await client.models.list()).data, []);

    const loaded = await fetch(`${base}/v1/models?model_name=${encodeURIComponent(V6)}`, { method: 'POST' });
    assert.equal(loaded.status, 200);
    const body = (await loaded.json()) as { status: string; message: string; model: { id: string; task: string } };
    assert.equal(body.status, 'success');
    assert.equal(body.message, `Model ${V6} added successfully`);
    assert.equal(body.model.task, 'vad');
    assert.equal(double.contentTransfers(REPO, 'ggml-silero-v6.2.0.bin').length, 1);

    const models = (await client.models.list()).data;
    assert.equal(models.length, 1);
    assert.equal(models[0]?.id, V6);
    assert.equal(models[0]?.object, 'model');
    assert.equal(models[0]?.owned_by, 'voxd');
    assert.equal(typeof models[0]?.created, 'number');

    const retrieved = await client.models.retrieve(V6);
    assert.equal(retrieved.id, V6);
    assert.equal((retrieved as unknown as { size_bytes: number }).size_bytes, fs.statSync(SILERO_V6).size, 'the size of its file');

    // loading again is a cache hit: no second transfer
    assert.equal((await fetch(`${base}/v1/models?model_name=${encodeURIComponent(V6)}`, { method: 'POST' })).status, 200);
    assert.equal(double.contentTransfers(REPO, 'ggml-silero-v6.2.0.bin').length, 1);

    // quotes around the name are stripped (some clients send them; docs/models.md, "Model IDs")
    const removed = await fetch(`${base}/v1/models?model_name=${encodeURIComponent(`"${V6}"`)}`, { method: 'DELETE' });
    assert.equal(removed.status, 204);
    assert.deepEqual((await client.models.list()).data, []);
    await envelope(await fetch(`${base}/v1/models?model_name=${encodeURIComponent(V6)}`, { method: 'DELETE' }), 404, 'model_not_found');

    // the downloaded file stays in the hub cache and is listed as available
    const available = (await (await fetch(`${base}/v1/models?available=true`)).json()) as { data: { id: string; loaded: boolean }[] };
    assert.ok(available.data.some((m) => m.id === V6 && m.loaded === false));
  });

  it('shares one download between concurrent loads', async (t) => {
    const { base, double } = await withHub(t);
    double.setFaults(REPO, 'ggml-silero-v5.1.2.bin', { chunkDelayMs: 20 });
    const responses = await Promise.all(Array.from({ length: 4 }, () => fetch(`${base}/v1/models?model_name=${encodeURIComponent(V5)}`, { method: 'POST' })));
    assert.deepEqual(
      responses.map((r) => r.status),
      [200, 200, 200, 200],
    );
    assert.equal(double.contentTransfers(REPO, 'ggml-silero-v5.1.2.bin').length, 1);
  });

  it('a download the hub stops sending fails every request waiting for it after --download-timeout-s, and resumes later', async (t) => {
    const { base, double, logDir } = await withHub(t, { downloadTimeoutS: 1 });
    const file = 'ggml-silero-v5.1.2.bin';
    double.setFaults(REPO, file, { pauseAt: { bytes: 100_000, until: heldUntilEnd(t).held } });
    const responses = await Promise.all([postModel(base, V5), postModel(base, V5)]);
    for (const response of responses) {
      const { message } = await envelope(response, 502, 'model_download_failed');
      assert.match(
        message,
        /ggml-silero-v5\.1\.2\.bin stalled after \d+ of \d+ bytes \(nothing arrived for 1 s \(--download-timeout-s\)\); the partial file is kept/,
      );
    }
    await eventually('the log says how the download ended', async () =>
      (await logRecords(logDir)).some((r) => r.outcome === 'network' && /stalled after/.test(r.msg ?? '')),
    );

    double.setFaults(REPO, file, {});
    assert.equal((await postModel(base, V5)).status, 200);
    const transfers = double.contentTransfers(REPO, file);
    assert.equal(transfers.length, 2);
    assert.match(transfers[1]?.range ?? '', /^bytes=\d+-$/, 'resumed');
  });

  it('a client that leaves cancels the download when no other request waits for it', async (t) => {
    const { base, double, logDir } = await withHub(t);
    const [v5File, v6File] = ['ggml-silero-v5.1.2.bin', 'ggml-silero-v6.2.0.bin'];
    const v5Held = heldUntilEnd(t);
    double.setFaults(REPO, v5File, { pauseAt: { bytes: 100_000, until: v5Held.held } });
    double.setFaults(REPO, v6File, { pauseAt: { bytes: 100_000, until: heldUntilEnd(t).held } });

    // another request still waits: the download goes on for it
    const staying = postModel(base, V5, AbortSignal.timeout(60_000)); // it waits through several steps below
    await eventually('the transfer began', () => double.contentTransfers(REPO, v5File).length === 1);
    const leaving = new AbortController();
    const left = postModel(base, V5, leaving.signal).catch(() => 'left');
    await sleep(300); // time to join the load (were it not joined yet, it would cancel nothing either)
    leaving.abort();
    assert.equal(await left, 'left');
    await eventually('the server saw the client leave', async () =>
      /voxd_http_requests_total\{method="POST",route="\/v1\/models",status="499"\} 1/.test(await (await fetch(`${base}/metrics`)).text()),
    );
    assert.equal(double.contentTransfers(REPO, v5File)[0]?.endedEarly, undefined, 'the transfer goes on');
    v5Held.release();
    assert.equal((await staying).status, 200);
    assert.equal(double.contentTransfers(REPO, v5File).length, 1);

    // the last request waiting leaves: the transfer stops, the partial file stays, and the next request resumes it
    const alone = new AbortController();
    const gone = postModel(base, V6, alone.signal).catch(() => 'left');
    await eventually('the transfer began', () => double.contentTransfers(REPO, v6File).length === 1);
    alone.abort();
    assert.equal(await gone, 'left');
    await eventually('the transfer is cancelled', () => double.contentTransfers(REPO, v6File)[0]?.endedEarly === true);
    await eventually('the log says so', async () =>
      (await logRecords(logDir)).some((r) => r.outcome === 'cancelled' && /ggml-silero-v6\.2\.0\.bin was cancelled after \d+ of/.test(r.msg ?? '')),
    );
    double.setFaults(REPO, v6File, {});
    assert.equal((await postModel(base, V6)).status, 200);
    assert.match(double.contentTransfers(REPO, v6File)[1]?.range ?? '', /^bytes=\d+-$/, 'resumed');
  });

  it('a client that leaves GET or HEAD /v1/audio/voices cancels the download of the model it named', async (t) => {
    const { base, double } = await withHub(t);
    for (const [method, id] of [
      ['GET', V6],
      ['HEAD', V5],
    ] as const) {
      const file = id.slice(REPO.length + 1);
      double.setFaults(REPO, file, { pauseAt: { bytes: 100_000, until: heldUntilEnd(t).held } });
      const leaving = new AbortController();
      const left = fetch(`${base}/v1/audio/voices?model=${encodeURIComponent(id)}`, { method, signal: leaving.signal }).catch(() => 'left');
      await eventually(`${method}: the transfer began`, () => double.contentTransfers(REPO, file).length === 1);
      leaving.abort();
      assert.equal(await left, 'left');
      await eventually(`${method}: the transfer is cancelled`, () => double.contentTransfers(REPO, file)[0]?.endedEarly === true);
    }
  });

  it('accepts model_name in a JSON body too', async (t) => {
    const { base } = await withHub(t);
    const response = await fetch(`${base}/v1/models`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model_name: SILERO_V6 }),
    });
    assert.equal(response.status, 200);
    assert.equal(((await response.json()) as { model: { id: string } }).model.id, SILERO_V6);
  });

  it('answers model errors with the vendor envelope and a fitting status', async (t) => {
    const { base, double, hubCache } = await withHub(t, { sttModel: null }); // no STT default: whisper-1 stands for nothing
    const client = sdk(base);
    await assert.rejects(client.models.retrieve('nobody/nothing'), (error: unknown) => error instanceof OpenAI.NotFoundError);
    await envelope(await fetch(`${base}/v1/models?model_name=nobody/nothing/x.bin`, { method: 'POST' }), 404, 'model_not_found');
    await envelope(await fetch(`${base}/v1/models?model_name=whisper-1`, { method: 'POST' }), 404, 'model_not_found');
    await envelope(await fetch(`${base}/v1/models?model_name=${encodeURIComponent('no such thing')}`, { method: 'POST' }), 404, 'model_not_found');
    const notAModel = await envelope(
      await fetch(`${base}/v1/models?model_name=${encodeURIComponent(path.resolve('package.json'))}`, { method: 'POST' }),
      400,
      'invalid_model',
    );
    assert.equal(notAModel.param, 'model');
    const missing = await envelope(await fetch(`${base}/v1/models`, { method: 'POST' }), 400, 'invalid_request');
    assert.equal(missing.param, 'model_name');

    // a truncated transfer: a clear 502, nothing cached as valid, and the next try succeeds
    double.setFaults(REPO, 'ggml-silero-v5.1.2.bin', { truncateAfterBytes: 4096 });
    const cut = await envelope(await fetch(`${base}/v1/models?model_name=${encodeURIComponent(V5)}`, { method: 'POST' }), 502, 'model_download_failed');
    assert.match(cut.message, /ggml-silero-v5\.1\.2\.bin/);
    const blobs = path.join(hubCache, 'models--ggml-org--whisper-vad', 'blobs');
    assert.ok(
      fs.readdirSync(blobs).every((f) => f.endsWith('.incomplete')),
      'only a partial file, never a valid-looking blob',
    );
    assert.equal((await fetch(`${base}/v1/models?model_name=${encodeURIComponent(V5)}`, { method: 'POST' })).status, 200);
  });

  it('a cached download that fails to load is checked again, and deleted when corrupt so the next load downloads it', async (t) => {
    const { base, double, hubCache } = await withHub(t);
    const load = (): Promise<Response> => fetch(`${base}/v1/models?model_name=${encodeURIComponent(V6)}`, { method: 'POST' });
    assert.equal((await load()).status, 200);
    assert.equal((await fetch(`${base}/v1/models?model_name=${encodeURIComponent(V6)}`, { method: 'DELETE' })).status, 204);
    // other bytes of the right size in the blob, as a hub that served them (or a failing disk) left it
    const blob = path.join(hubCache, 'models--ggml-org--whisper-vad', 'blobs', createHash('sha256').update(fs.readFileSync(SILERO_V6)).digest('hex'));
    fs.writeFileSync(blob, Buffer.alloc(fs.statSync(blob).size, 0x20));

    const corrupt = await envelope(await load(), 502, 'model_download_failed');
    assert.match(corrupt.message, /corrupt \(sha256 [0-9a-f]{64} instead of the [0-9a-f]{64} .*next request downloads it again/);
    assert.equal(fs.existsSync(blob), false, 'the bad blob is gone');
    assert.equal((await load()).status, 200);
    assert.equal(double.contentTransfers(REPO, 'ggml-silero-v6.2.0.bin').length, 2, 'downloaded again');
  });

  it('serves from the cache in offline mode and says so on a miss', async (t) => {
    const { base, double, hubCache } = await withHub(t);
    assert.equal((await fetch(`${base}/v1/models?model_name=${encodeURIComponent(V5)}`, { method: 'POST' })).status, 200);
    const offline = await startTestServer(t, { offline: true }, { HF_ENDPOINT: double.endpoint, HF_HUB_CACHE: hubCache });
    const before = double.requests.length;
    assert.equal((await fetch(`${offline.base}/v1/models?model_name=${encodeURIComponent(V5)}`, { method: 'POST' })).status, 200);
    const miss = await envelope(
      await fetch(`${offline.base}/v1/models?model_name=${encodeURIComponent(`${REPO}/other.bin`)}`, { method: 'POST' }),
      404,
      'model_not_found',
    );
    assert.match(miss.message, /offline/);
    assert.equal(double.requests.length, before, 'offline mode sends nothing to the hub');
  });
});

describe('bad input and operations', () => {
  it('answers bad requests with 4xx envelopes and keeps serving', async (t) => {
    const { base } = await startTestServer(t, { maxJsonKb: 1 });
    await envelope(await fetch(`${base}/v1/unknown`), 404, 'not_found');
    const wrongMethod = await fetch(`${base}/v1/models`, { method: 'PUT' });
    await envelope(wrongMethod, 405, 'method_not_allowed');
    const json = { method: 'POST', headers: { 'content-type': 'application/json' } };
    await envelope(await fetch(`${base}/v1/models`, { ...json, body: '{"model_name": ' }), 400, 'invalid_json');
    const invalid = await envelope(await fetch(`${base}/v1/models`, { ...json, body: '{"model_name": 42}' }), 400, 'invalid_request');
    assert.equal(invalid.param, 'model_name');
    await envelope(await fetch(`${base}/v1/models`, { ...json, body: JSON.stringify({ model_name: 'x'.repeat(4096) }) }), 413, 'payload_too_large');
    await envelope(await fetch(`${base}/v1/models`, { method: 'POST', headers: { 'content-type': 'text/plain' }, body: 'hi' }), 415, 'unsupported_media_type');
    assert.equal((await fetch(`${base}/healthz`)).status, 200);
  });

  it('answers CORS preflights and echoes request ids', async (t) => {
    const { base } = await startTestServer(t);
    const preflight = await fetch(`${base}/v1/models`, {
      method: 'OPTIONS',
      headers: { origin: 'http://ui.test', 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type, authorization' },
    });
    assert.equal(preflight.status, 204);
    assert.equal(preflight.headers.get('access-control-allow-origin'), '*');
    assert.match(preflight.headers.get('access-control-allow-methods') ?? '', /POST/);
    const response = await fetch(`${base}/v1/models`, { headers: { 'x-request-id': 'req-123', authorization: 'Bearer anything' } });
    assert.equal(response.status, 200);
    assert.equal(response.headers.get('x-request-id'), 'req-123');
  });

  it('exposes health, readiness and Prometheus metrics', async (t) => {
    const { base } = await startTestServer(t, { preload: [SILERO_V6] });
    assert.equal((await fetch(`${base}/healthz`)).status, 200);
    let ready = await fetch(`${base}/readyz`);
    for (let i = 0; ready.status !== 200 && i < 50; i++) {
      await new Promise((r) => setTimeout(r, 100));
      ready = await fetch(`${base}/readyz`);
    }
    assert.equal(ready.status, 200);
    const metrics = await fetch(`${base}/metrics`);
    assert.match(metrics.headers.get('content-type') ?? '', /text\/plain/);
    const text = await metrics.text();
    assert.match(text, /voxd_http_requests_total\{method="GET",route="\/readyz",status="200"\} 1/);
    assert.match(text, /voxd_models_resident 1/);
    assert.match(text, /voxd_model_loads_total\{outcome="ok"\} 1/);
  });
});
