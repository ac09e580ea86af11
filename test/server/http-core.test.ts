import assert from 'node:assert/strict';
import fs from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { pino } from 'pino';
import { z } from 'zod';
import { createHttpServer, type HttpLogger, type HttpServer, type ResponseInfo } from '../../src/http/server.js';
import type { TransportLimits } from '../../src/http/transport.js';
import {
  envelopeCode,
  expectContinue,
  halfOpenFlood,
  heldConnections,
  openConnections,
  pipelinedBehindSlow,
  rawExchange,
  statusLines,
  UNUSUAL_REQUESTS,
} from '../helpers/hostile.js';
import { testTransport } from '../helpers/transport.js';

interface LogEntry {
  level: 'error' | 'warn' | 'info';
  obj: object;
  msg: string | undefined;
}

function capturingLogger(): HttpLogger & { entries: LogEntry[] } {
  const entries: LogEntry[] = [];
  const log = (level: LogEntry['level']) => (obj: object, msg?: string) => void entries.push({ level, obj, msg });
  return { entries, error: log('error'), warn: log('warn'), info: log('info') };
}

async function startServer(setup: (server: HttpServer) => void, allowedOrigins?: string[], limits?: TransportLimits) {
  const logger = capturingLogger();
  const responses: ResponseInfo[] = [];
  const server = createHttpServer({ transport: testTransport(limits), logger, allowedOrigins, onResponse: (info) => responses.push(info) });
  setup(server);
  const port = await server.listen('127.0.0.1', 0);
  return { server, logger, responses, base: `http://127.0.0.1:${port}`, url: (path: string) => `http://127.0.0.1:${port}${path}` };
}

interface RawResponse {
  status: string;
  headers: Record<string, string>;
  body: string;
}

/**
 * The responses in a raw exchange's bytes, each with its status, lower-case headers and body (by Content-Length;
 * none for the answer to a HEAD, by the methods of the requests in order).
 */
function responsesIn(text: string, methods: string[] = []): RawResponse[] {
  const responses: RawResponse[] = [];
  for (let at = 0; at < text.length;) {
    const headEnd = text.indexOf('\r\n\r\n', at);
    assert.ok(headEnd > 0, `a whole head in ${JSON.stringify(text.slice(at))}`);
    const [statusLine = '', ...lines] = text.slice(at, headEnd).split('\r\n');
    const headers = Object.fromEntries(lines.map((line) => [line.slice(0, line.indexOf(':')).toLowerCase(), line.slice(line.indexOf(':') + 1).trim()]));
    const bodyLength = statusLine.includes(' 100 ') || methods[responses.length] === 'HEAD' ? 0 : Number(headers['content-length'] ?? 0);
    responses.push({ status: statusLine.split(' ')[1] ?? '', headers, body: text.slice(headEnd + 4, headEnd + 4 + bodyLength) });
    at = headEnd + 4 + bodyLength;
  }
  return responses;
}

interface Envelope {
  error: { message: string; type: string; param: string | null; code: string };
}

async function expectError(response: Response, status: number, code: string): Promise<Envelope['error']> {
  assert.equal(response.status, status);
  assert.match(response.headers.get('content-type') ?? '', /^application\/json/);
  assert.ok(response.headers.get('x-request-id'), 'every response carries x-request-id');
  const body = (await response.json()) as Envelope;
  assert.equal(body.error.code, code);
  return body.error;
}

function deferred<T = void>(): { promise: Promise<T>; resolve: (value: T) => void } {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

/** POSTs `chunks` × `chunkBytes` bytes of `x` without Content-Length (chunked transfer encoding). */
function postChunked(url: string, chunks: number, chunkBytes: number): Promise<Response> {
  let sent = 0;
  const body = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (sent++ < chunks) controller.enqueue(new Uint8Array(chunkBytes).fill(120));
      else controller.close();
    },
  });
  const init = { method: 'POST', body, duplex: 'half' }; // a stream body needs `duplex`, missing from Node 20's fetch types
  return fetch(url, init);
}

const STREAM_CHUNK_BYTES = 64 * 1024;
const STREAM_CHUNKS = 512; // 32 MiB: more than loopback socket buffers hold while the client does not read

describe('http core', () => {
  const streamProgress = { acceptedBytes: 0, finished: false };
  const disconnected = deferred<boolean>();
  let ctx: Awaited<ReturnType<typeof startServer>>;

  before(async () => {
    ctx = await startServer((server) => {
      server.route('GET', '/hello', (_req, reply) => reply.json({ hello: 'world' }));
      server.route('GET', '/items/:id/parts/:part', (req, reply) => reply.json(req.params));
      server.route('GET', '/v1/models/*', (req, reply) => reply.json({ id: req.params['*'] }));
      server.route('GET', '/things', (_req, reply) => reply.text('things'));
      server.route('POST', '/things', (_req, reply) => reply.json({ created: true }, 201));
      server.route('DELETE', '/things', (_req, reply) => reply.status(204).send());
      const speechRequest = z.object({ model: z.string(), input: z.string(), speed: z.number().min(0.25).max(4).optional() });
      server.route('POST', '/json', async (req, reply) => reply.json(await req.json(speechRequest, 1024)));
      server.route('POST', '/body', async (req, reply) => reply.json({ bytes: (await req.body(1024)).length }));
      server.route('POST', '/late-body', async (req, reply) => {
        await sleep(200); // the body arrives meanwhile, beyond the pause threshold
        const body = await req.body(16 * 1024 * 1024);
        reply.json({ bytes: body.length, allX: body.every((byte) => byte === 120) });
      });
      server.route('POST', '/upload', async (req, reply) => {
        const form = await req.multipart({ maxFileBytes: 1024 });
        const files = Object.fromEntries(
          Object.entries(form.files).map(([name, file]) => [name, { filename: file.filename, mimeType: file.mimeType, text: file.data.toString() }]),
        );
        reply.json({ fields: form.fields, files });
      });
      server.route('GET', '/stream', async (_req, reply) => {
        reply.startStream(200, { 'content-type': 'application/octet-stream' });
        for (let i = 0; i < STREAM_CHUNKS; i++) {
          await reply.write(Buffer.alloc(STREAM_CHUNK_BYTES, i % 256));
          streamProgress.acceptedBytes += STREAM_CHUNK_BYTES;
        }
        reply.end();
        streamProgress.finished = true;
      });
      server.route('GET', '/forever', async (req, reply) => {
        req.signal.addEventListener('abort', () => disconnected.resolve(true));
        reply.startStream(200, { 'content-type': 'application/x-ndjson' });
        while (!req.signal.aborted) {
          await reply.write(`${JSON.stringify({ text: 'more' })}\n`);
          await sleep(5);
        }
      });
      server.route('GET', '/boom', () => {
        throw new Error('secret detail: /home/user/.cache/model.bin');
      });
    });
  });

  after(() => ctx.server.close());

  it('serves a JSON route with a generated request id and reports it once to onResponse', async () => {
    const response = await fetch(ctx.url('/hello'));
    assert.equal(response.status, 200);
    assert.equal(response.headers.get('content-type'), 'application/json');
    assert.notEqual(response.headers.get('connection'), 'close', 'the connection stays open for the next request');
    assert.deepEqual(await response.json(), { hello: 'world' });
    const id = response.headers.get('x-request-id') ?? '';
    assert.match(id, /^[0-9a-f-]{36}$/);
    const reported = ctx.responses.filter((info) => info.id === id);
    assert.equal(reported.length, 1);
    assert.deepEqual({ ...reported[0], ms: 0 }, { id, method: 'GET', route: '/hello', status: 200, ms: 0, bytes: 17, cut: false });
  });

  it('decodes :params and matches the rest of the path with a trailing wildcard', async () => {
    assert.deepEqual(await (await fetch(ctx.url('/items/a%20b/parts/7'))).json(), { id: 'a b', part: '7' });
    const slashed = await fetch(ctx.url('/v1/models/owner/repo:Q8_0'));
    assert.deepEqual(await slashed.json(), { id: 'owner/repo:Q8_0' });
    assert.deepEqual(await (await fetch(ctx.url('/v1/models/owner%2Frepo'))).json(), { id: 'owner/repo' });
    const info = ctx.responses.find((r) => r.id === slashed.headers.get('x-request-id'));
    assert.equal(info?.route, '/v1/models/*');
  });

  it('answers an unknown path with a 404 envelope naming method and path', async () => {
    const error = await expectError(await fetch(ctx.url('/nope?x=1'), { method: 'POST' }), 404, 'not_found');
    assert.equal(error.type, 'invalid_request_error');
    assert.equal(error.param, null);
    assert.match(error.message, /POST \/nope/);
  });

  it('answers a known path with a wrong method with 405 and Allow', async () => {
    const response = await fetch(ctx.url('/things'), { method: 'PUT' });
    assert.equal(response.headers.get('allow'), 'GET, HEAD, POST, DELETE, OPTIONS');
    await expectError(response, 405, 'method_not_allowed');
    const deleted = await fetch(ctx.url('/things'), { method: 'DELETE' });
    assert.equal(deleted.status, 204);
    assert.equal(await deleted.text(), '');
  });

  it('rejects malformed JSON with 400 invalid_json', async () => {
    const response = await fetch(ctx.url('/json'), { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"model": ' });
    const error = await expectError(response, 400, 'invalid_json');
    assert.match(error.message, /Malformed JSON/);
  });

  it('rejects schema violations with 400 naming the first failing field', async () => {
    const post = (body: unknown) =>
      fetch(ctx.url('/json'), { method: 'POST', headers: { 'content-type': 'application/json; charset=utf-8' }, body: JSON.stringify(body) });
    const wrong = await expectError(await post({ model: 'm', input: 'hi', speed: 9 }), 400, 'invalid_request');
    assert.equal(wrong.param, 'speed');
    assert.match(wrong.message, /speed/);
    const missing = await expectError(await post({ input: 'hi' }), 400, 'invalid_request');
    assert.equal(missing.param, 'model');
    assert.equal(missing.message, "Missing required parameter: 'model'");
    const ok = await post({ model: 'm', input: 'hi', extra: true });
    assert.deepEqual(await ok.json(), { model: 'm', input: 'hi' });
  });

  it('rejects a wrong content type with 415', async () => {
    await expectError(await fetch(ctx.url('/json'), { method: 'POST', headers: { 'content-type': 'text/plain' }, body: '{}' }), 415, 'unsupported_media_type');
    await expectError(
      await fetch(ctx.url('/upload'), { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' }),
      415,
      'unsupported_media_type',
    );
  });

  it('rejects an oversized body with 413, with or without Content-Length, and keeps serving', async () => {
    const declared = await fetch(ctx.url('/body'), { method: 'POST', body: 'x'.repeat(4096) });
    // the unread rest is read and dropped rather than cut off, which would reset the connection under the client
    assert.notEqual(declared.headers.get('connection'), 'close');
    await expectError(declared, 413, 'payload_too_large');
    assert.equal((await fetch(ctx.url('/hello'))).status, 200);
    const chunked = await postChunked(ctx.url('/body'), 64, 512);
    await expectError(chunked, 413, 'payload_too_large');
    assert.equal((await fetch(ctx.url('/hello'))).status, 200);
    assert.deepEqual(await (await postChunked(ctx.url('/body'), 2, 512)).json(), { bytes: 1024 });
  });

  it('keeps a body that the handler reads only after an await', async () => {
    const response = await postChunked(ctx.url('/late-body'), 48, 64 * 1024);
    assert.deepEqual(await response.json(), { bytes: 48 * 64 * 1024, allX: true });
  });

  it('parses multipart files and the bracket field forms of the vendor SDK', async () => {
    const form = new FormData();
    form.append('model', 'whisper-1');
    form.append('timestamp_granularities[]', 'word');
    form.append('timestamp_granularities[]', 'segment');
    form.append('chunking_strategy[type]', 'server_vad');
    form.append('chunking_strategy[prefix_padding_ms]', '300');
    form.append('file', new Blob(['RIFF fake audio'], { type: 'audio/wav' }), 'speech.wav');
    const response = await fetch(ctx.url('/upload'), { method: 'POST', body: form });
    assert.equal(response.status, 200);
    assert.deepEqual(await response.json(), {
      fields: {
        model: 'whisper-1',
        timestamp_granularities: ['word', 'segment'],
        chunking_strategy: { type: 'server_vad', prefix_padding_ms: '300' },
      },
      files: { file: { filename: 'speech.wav', mimeType: 'audio/wav', text: 'RIFF fake audio' } },
    });
  });

  it('rejects a multipart file above the limit with 413 naming the field', async () => {
    const form = new FormData();
    form.append('model', 'whisper-1');
    form.append('file', new Blob([new Uint8Array(4096)], { type: 'audio/wav' }), 'big.wav');
    const error = await expectError(await fetch(ctx.url('/upload'), { method: 'POST', body: form }), 413, 'payload_too_large');
    assert.equal(error.param, 'file');
    assert.equal((await fetch(ctx.url('/hello'))).status, 200);
  });

  it('echoes a sane client x-request-id and replaces an unusable one', async () => {
    const echoed = await fetch(ctx.url('/hello'), { headers: { 'x-request-id': 'client-42.a' } });
    assert.equal(echoed.headers.get('x-request-id'), 'client-42.a');
    const replaced = await fetch(ctx.url('/hello'), { headers: { 'x-request-id': 'has spaces and "quotes"' } });
    assert.match(replaced.headers.get('x-request-id') ?? '', /^[0-9a-f-]{36}$/);
  });

  it('allows any origin with allowedOrigins ["*"] and answers preflights for every route', async () => {
    const response = await fetch(ctx.url('/hello'), { headers: { origin: 'http://anywhere.example' } });
    assert.equal(response.headers.get('access-control-allow-origin'), '*');
    assert.match(response.headers.get('access-control-expose-headers') ?? '', /x-request-id/);
    const preflight = await fetch(ctx.url('/things'), {
      method: 'OPTIONS',
      headers: {
        origin: 'http://anywhere.example',
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'content-type, x-stainless-lang',
      },
    });
    assert.equal(preflight.status, 204);
    assert.equal(preflight.headers.get('access-control-allow-origin'), '*');
    assert.equal(preflight.headers.get('access-control-allow-methods'), 'GET, HEAD, POST, DELETE, OPTIONS');
    assert.equal(preflight.headers.get('access-control-allow-headers'), 'content-type, x-stainless-lang');
    assert.equal(preflight.headers.get('access-control-max-age'), '86400');
  });

  it('returns 500 for an unexpected error without leaking it, and logs the stack', async () => {
    const response = await fetch(ctx.url('/boom'));
    const id = response.headers.get('x-request-id');
    const text = await response.text();
    assert.equal(response.status, 500);
    assert.doesNotMatch(text, /secret|\.cache|at /);
    assert.deepEqual(JSON.parse(text), { error: { message: 'internal server error', type: 'server_error', param: null, code: 'server_error' } });
    const logged = ctx.logger.entries.find((entry) => entry.level === 'error' && (entry.obj as { requestId?: string }).requestId === id);
    assert.match((logged?.obj as { err?: Error }).err?.stack ?? '', /secret detail[\s\S]*at /);
  });

  it('streams several MB to a slow client at its pace (writes wait for the socket)', async () => {
    const response = await fetch(ctx.url('/stream'));
    assert.equal(response.status, 200);
    const reader = response.body!.getReader();
    await sleep(500); // the client reads nothing yet
    const acceptedWhileIdle = streamProgress.acceptedBytes;
    assert.ok(!streamProgress.finished, 'the producer must not finish while the client reads nothing');
    assert.ok(acceptedWhileIdle < (STREAM_CHUNKS * STREAM_CHUNK_BYTES) / 2, `accepted ${acceptedWhileIdle} bytes while the client read nothing`);
    await sleep(200);
    assert.equal(streamProgress.acceptedBytes, acceptedWhileIdle, 'no progress without reading');

    let received = 0;
    let reads = 0;
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      for (let i = 0; i < value.length; i += 4096) {
        assert.equal(value[i], Math.floor((received + i) / STREAM_CHUNK_BYTES) % 256, `byte ${received + i}`);
      }
      received += value.length;
      if (++reads % 64 === 0) await sleep(1); // a slow reader
    }
    assert.equal(received, STREAM_CHUNKS * STREAM_CHUNK_BYTES);
    assert.ok(streamProgress.finished);
  });

  it('aborts req.signal when the client disconnects mid-stream', async () => {
    const controller = new AbortController();
    const response = await fetch(ctx.url('/forever'), { signal: controller.signal });
    const reader = response.body!.getReader();
    assert.match(new TextDecoder().decode((await reader.read()).value), /"text":"more"/);
    controller.abort();
    const aborted = await Promise.race([disconnected.promise, sleep(3000).then(() => false)]);
    assert.equal(aborted, true);
    await sleep(20);
    const info = ctx.responses.find((r) => r.id === response.headers.get('x-request-id'));
    assert.equal(info?.cut, true, 'logged as cut');
    assert.ok(info.bytes > 0);
  });
});

describe('http core: CORS allowlist', () => {
  it('echoes only listed origins, with Vary: Origin', async () => {
    // a pino logger fits the server's logger parameter
    const server = createHttpServer({ transport: testTransport(), logger: pino({ enabled: false }), allowedOrigins: ['http://good.example'] });
    server.route('GET', '/hello', (_req, reply) => reply.json({}));
    const port = await server.listen('127.0.0.1', 0);
    try {
      const good = await fetch(`http://127.0.0.1:${port}/hello`, { headers: { origin: 'http://good.example' } });
      assert.equal(good.headers.get('access-control-allow-origin'), 'http://good.example');
      assert.equal(good.headers.get('vary'), 'Origin');
      const other = await fetch(`http://127.0.0.1:${port}/hello`, { headers: { origin: 'http://evil.example' } });
      assert.equal(other.status, 200);
      assert.equal(other.headers.get('access-control-allow-origin'), null);
      const preflight = await fetch(`http://127.0.0.1:${port}/hello`, {
        method: 'OPTIONS',
        headers: { origin: 'http://good.example', 'access-control-request-method': 'GET' },
      });
      assert.equal(preflight.status, 204);
      assert.equal(preflight.headers.get('access-control-allow-origin'), 'http://good.example');
    } finally {
      await server.close();
    }
  });
});

describe('http core: graceful close', () => {
  it('waits for an in-flight request, then stops serving', async () => {
    const { server, url } = await startServer((s) =>
      s.route('GET', '/slow', async (_req, reply) => {
        await sleep(300);
        reply.json({ finished: true });
      }),
    );
    const pending = fetch(url('/slow'));
    while (server.inFlight === 0) await sleep(5);
    let closed = false;
    const closing = server.close().then(() => (closed = true));
    await sleep(100);
    assert.equal(closed, false, 'close() waits for the in-flight request');
    const response = await pending;
    assert.equal(response.status, 200);
    assert.deepEqual(await response.json(), { finished: true });
    await closing;
    assert.equal(server.inFlight, 0);
    await assert.rejects(fetch(url('/slow')));
  });

  it('answers requests still running after the timeout with 503 shutting_down, and stops their work', async () => {
    const { server, url, logger } = await startServer((s) =>
      s.route('GET', '/hang', async (req) => {
        await new Promise((resolve) => req.signal.addEventListener('abort', resolve));
      }),
    );
    const pending = fetch(url('/hang'));
    while (server.inFlight === 0) await sleep(5);
    await server.close(100);
    await expectError(await pending, 503, 'shutting_down');
    assert.ok(logger.entries.some((entry) => entry.level === 'warn' && /interrupting/.test(entry.msg ?? '')));
  });
});

describe('http core: the wire', () => {
  let ctx: Awaited<ReturnType<typeof startServer>>;

  before(async () => {
    ctx = await startServer((server) => {
      server.route('GET', '/healthz', (_req, reply) => reply.json({ status: 'ok' }));
      server.route('GET', '/hello', (_req, reply) => reply.json({ hello: 'world' }));
      server.route('POST', '/things', (_req, reply) => reply.json({ created: true }, 201));
      server.route('POST', '/body', async (req, reply) => reply.json({ bytes: (await req.body(1024)).length }));
      server.route('GET', '/slow', async (_req, reply) => {
        await sleep(300);
        reply.json({ slow: true });
      });
    });
  });

  after(() => ctx.server.close());

  it("answers HEAD with the GET's head and no body, and the connection goes on", async () => {
    const head = await fetch(ctx.url('/hello'), { method: 'HEAD' });
    assert.equal(head.status, 200);
    assert.equal(head.headers.get('content-type'), 'application/json');
    assert.equal(head.headers.get('content-length'), '17', 'the length of the body a GET gets');
    assert.equal(await head.text(), '');
    // a body after a HEAD's head would be read as the next response's start
    const pair = await rawExchange(
      ctx.base,
      'HEAD /hello HTTP/1.1\r\nHost: x\r\n\r\nHEAD /things HTTP/1.1\r\nHost: x\r\n\r\nGET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n',
    );
    const [ok, refused, get] = responsesIn(pair.text, ['HEAD', 'HEAD', 'GET']);
    assert.deepEqual([ok?.status, ok?.headers['content-length'], ok?.body], ['200', '17', '']);
    assert.deepEqual([refused?.status, refused?.headers.allow, refused?.body], ['405', 'POST, OPTIONS', '']);
    assert.deepEqual([get?.status, get?.body], ['200', '{"hello":"world"}']);
    const preflight = await fetch(ctx.url('/hello'), { method: 'OPTIONS' });
    assert.equal(preflight.headers.get('access-control-allow-methods'), 'GET, HEAD, OPTIONS');
  });

  it('answers unusual and malformed requests as node:http does (uWS leaves most unanswered and closes them within 15 s)', async () => {
    const cases = Object.entries(UNUSUAL_REQUESTS);
    const exchanges = await Promise.all(cases.map(([, { request }]) => rawExchange(ctx.base, request, 15_000)));
    for (const [index, [name, { nodeStatus, uwsStatus }]] of cases.entries()) {
      const { text, closed } = exchanges[index]!;
      const status = ctx.server.transport === 'uws' ? uwsStatus : nodeStatus;
      if (status === null) {
        assert.deepEqual([text, closed], ['', true], name);
        continue;
      }
      assert.deepEqual(statusLines(text), [status], `${name}: ${text}`);
      if (status.startsWith('4')) {
        assert.ok(envelopeCode(Buffer.from(text.slice(text.indexOf('\r\n\r\n') + 4), 'latin1')), `${name}: the error envelope`);
        assert.equal(closed, true, `${name}: closed after the refusal`);
      }
    }
  });

  it('answers a request pipelined behind a slow one, in order (uWS drops the connection, answering neither)', async () => {
    const { text, closed } = await rawExchange(ctx.base, pipelinedBehindSlow('GET /slow HTTP/1.1\r\nHost: x\r\n\r\n'), 15_000);
    assert.equal(closed, true);
    if (ctx.server.transport === 'uws') assert.equal(text, '');
    else
      assert.deepEqual(
        responsesIn(text).map((r) => r.body),
        ['{"slow":true}', '{"status":"ok"}'],
      );
  });

  it('answers Expect: 100-continue with the final status when the declared body is over the limit', async () => {
    const refused = await expectContinue(ctx.base, '/body', '', 900_000_000);
    // uWS sends 100 Continue itself, before voxd sees the request
    assert.deepEqual(refused.statuses, ctx.server.transport === 'uws' ? ['100', '413'] : ['413']);
    if (ctx.server.transport === 'node') assert.equal(refused.closed, true, 'the body is never read: the connection closes');
    const invited = await expectContinue(ctx.base, '/body', 'x'.repeat(100));
    assert.deepEqual(invited.statuses, ['100', '200']);
  });

  it('closes connections that send nothing, dribble their head, idle after an answer or stall their body, within 15 s', async () => {
    const [silent, dribbling, idle, stalled] = await Promise.all([
      heldConnections(ctx.base, 5, false, 15),
      heldConnections(ctx.base, 5, true, 15),
      rawExchange(ctx.base, 'GET /hello HTTP/1.1\r\nHost: x\r\n\r\n', 15_000),
      rawExchange(ctx.base, 'POST /body HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nab', 15_000),
    ]);
    assert.equal(silent.closed, 5, 'connections that sent nothing');
    assert.equal(dribbling.closed, 5, 'connections that sent a header line every 2 s');
    // uWS closes them unanswered; node:http says why
    const answer = ctx.server.transport === 'uws' ? 'none' : '408';
    assert.deepEqual([silent.answers, dribbling.answers], [{ [answer]: 5 }, { [answer]: 5 }]);
    assert.deepEqual([statusLines(idle.text), idle.closed], [['200'], true], 'a kept-alive connection with no next request');
    assert.deepEqual([stalled.text, stalled.closed], ['', true], 'a body that stopped arriving');
  });
});

/** This process's open TCP sockets on the server's side of `port`, the listening one excepted (from /proc). */
function serverSideSockets(port: number): number {
  const own = new Set<string>();
  for (const fd of fs.readdirSync('/proc/self/fd')) {
    try {
      const inode = /^socket:\[(\d+)\]$/.exec(fs.readlinkSync(`/proc/self/fd/${fd}`))?.[1];
      if (inode) own.add(inode);
    } catch {
      // closed since the directory was read
    }
  }
  let count = 0;
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    for (const line of fs.readFileSync(table, 'utf8').trim().split('\n').slice(1)) {
      // sl, local address (hex ip:port), remote address, state (0A: listening), ..., inode
      const [, local = '', , state, , , , , , inode = ''] = line.trim().split(/\s+/);
      if (Number.parseInt(local.split(':')[1] ?? '', 16) === port && state !== '0A' && own.has(inode)) count++;
    }
  }
  return count;
}

describe('http core: connection limit', () => {
  it('answers a connection beyond maxConnections with 503 and closes it; one that closes makes room (node:http)', async (t) => {
    const { server, base, url } = await startServer((s) => s.route('GET', '/hello', (_req, reply) => reply.json({ hello: 'world' })), undefined, {
      maxConnections: 2,
    });
    t.after(() => server.close());
    if (server.transport === 'uws') return t.skip('uWS has no connection hook in JavaScript (docs/deploy.md)');
    const held = await openConnections(base, 2);
    const refused = await fetch(url('/hello'));
    assert.equal(refused.status, 503);
    assert.equal(refused.headers.get('retry-after'), '1');
    assert.equal(envelopeCode(Buffer.from(await refused.arrayBuffer())), 'too_many_connections');
    held[0]!.destroy();
    const deadline = performance.now() + 5000;
    while ((await fetch(url('/hello'))).status !== 200) {
      assert.ok(performance.now() < deadline, 'a connection that closed makes room');
      await sleep(20);
    }
    for (const socket of held) socket.destroy();
  });

  it('keeps at most 64 refused connections for their clients to read the 503, closing the rest of a flood at once (node:http)', async (t) => {
    const { server, base, url } = await startServer((s) => s.route('GET', '/hello', (_req, reply) => reply.json({ hello: 'world' })), undefined, {
      maxConnections: 1,
    });
    t.after(() => server.close());
    if (server.transport === 'uws') return t.skip('uWS has no connection hook in JavaScript (docs/deploy.md)');
    if (!fs.existsSync('/proc/net/tcp')) return t.skip('counts sockets in /proc (Linux)');
    const port = Number(new URL(base).port);
    const held = await openConnections(base, 1);
    let most = 0;
    const sampler = setInterval(() => (most = Math.max(most, serverSideSockets(port))), 100);
    // clients that never close their side: each refused one would be kept REFUSED_LINGER_MS (2 s)
    const flood = await halfOpenFlood(base, 300).finally(() => clearInterval(sampler));
    most = Math.max(most, serverSideSockets(port));
    for (const socket of [...held, ...flood.sockets]) socket.destroy();
    const { '503': answered = 0, reset = 0, ...others } = flood.answers;
    assert.ok(answered >= 1 && reset >= 1, `the first refused get the 503, the rest are reset: ${JSON.stringify(flood.answers)}`);
    // a connection closed without an answer would leave a client such as Node's fetch waiting for one
    assert.deepEqual(others, {}, 'every connection of the flood is answered or reset');
    assert.ok(most <= 1 + 64, `${most} connections held on the server's side: the one admitted and at most 64 refused`);
    // until the server has heard of the flood's closes, a connection may still be reset (fetch fails)
    const served = async (): Promise<boolean> => (await fetch(url('/hello')).catch(() => null))?.status === 200;
    const deadline = performance.now() + 5000;
    while (!(await served())) {
      assert.ok(performance.now() < deadline, 'served again once the flood is gone');
      await sleep(20);
    }
  });
});
