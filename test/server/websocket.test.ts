/** WebSocket routes (src/http/websocket.ts) with a real `ws` client: upgrade, subprotocols, messages, limits, close. */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { describe, it } from 'node:test';
import { pino } from 'pino';
import WebSocket from 'ws';
import { ApiError } from '../../src/errors.js';
import { createHttpServer } from '../../src/http/server.js';
import { testTransport } from '../helpers/transport.js';
import type { WsConnection } from '../../src/http/websocket.js';

interface Echo {
  connection: WsConnection;
  query: string;
}

async function echoServer(): Promise<{ url: string; closed: { code: number; reason: string }[]; close: () => Promise<void> }> {
  const server = createHttpServer({ transport: testTransport(), logger: pino({ enabled: false }) });
  const closed: { code: number; reason: string }[] = [];
  server.websocket<Echo>(
    '/echo',
    {
      accept(request) {
        if (request.query.get('refuse')) throw new ApiError('invalid_request', 'refused on purpose', { param: 'refuse' });
        return { protocol: request.protocols.includes('realtime') ? 'realtime' : undefined };
      },
      open: (connection, request) => {
        connection.send({ type: 'hello', id: connection.id, protocol: connection.protocol, path: request.path });
        return { connection, query: request.query.get('name') ?? '' };
      },
      message(session, data, isBinary) {
        if (!isBinary && data === 'close me') return session.connection.close(4000, 'asked to');
        session.connection.send(isBinary ? (data as Buffer) : `${session.query}:${data as string}`);
      },
      oversized(session, bytes) {
        session.connection.send(`too large: ${bytes}`);
      },
      close(_session, code, reason) {
        closed.push({ code, reason });
      },
    },
    { maxMessageBytes: 1024, idleTimeoutSeconds: 0 },
  );
  const port = await server.listen('127.0.0.1', 0);
  return { url: `ws://127.0.0.1:${port}/echo`, closed, close: () => server.close(1000) };
}

function nextMessage(socket: WebSocket): Promise<{ data: Buffer; isBinary: boolean }> {
  return once(socket, 'message').then(([data, isBinary]) => ({ data: data as Buffer, isBinary: isBinary as boolean }));
}

describe('WebSocket routes', () => {
  it('upgrades, selects a subprotocol, echoes text and binary frames with the request query', async (t) => {
    const server = await echoServer();
    t.after(server.close);
    const socket = new WebSocket(`${server.url}?name=ada`, ['openai-insecure-api-key.x', 'realtime']);
    const hello = JSON.parse((await nextMessage(socket)).data.toString()) as { type: string; id: string; protocol: string; path: string };
    assert.equal(socket.protocol, 'realtime');
    assert.deepEqual({ ...hello, id: hello.id.slice(0, 3) }, { type: 'hello', id: 'ws_', protocol: 'realtime', path: '/echo' });
    socket.send('hi');
    assert.equal((await nextMessage(socket)).data.toString(), 'ada:hi');
    socket.send(Buffer.from([1, 2, 3]));
    const binary = await nextMessage(socket);
    assert.equal(binary.isBinary, true);
    assert.deepEqual([...binary.data], [1, 2, 3]);
    socket.close();
    await once(socket, 'close');
  });

  it('refuses an upgrade with the error envelope over plain HTTP', async (t) => {
    const server = await echoServer();
    t.after(server.close);
    const socket = new WebSocket(`${server.url}?refuse=1`);
    socket.on('error', () => undefined); // ws reports the refused handshake once more as an error
    const [, response] = (await once(socket, 'unexpected-response')) as [unknown, import('node:http').IncomingMessage];
    assert.equal(response.statusCode, 400);
    assert.match(String(response.headers['x-request-id']), /^ws_/);
    let body = '';
    for await (const chunk of response) body += String(chunk);
    assert.deepEqual(JSON.parse(body).error.code, 'invalid_request');
    socket.terminate();
  });

  it('hands a message over the limit to the route unread (the socket stays open), drops one over twice the limit, and routes may close with their own code', async (t) => {
    const server = await echoServer();
    t.after(server.close);
    const big = new WebSocket(server.url);
    await nextMessage(big);
    big.send('x'.repeat(2000));
    assert.equal((await nextMessage(big)).data.toString(), 'too large: 2000');
    big.send('still here');
    assert.equal((await nextMessage(big)).data.toString(), ':still here');
    big.send('x'.repeat(2049));
    await once(big, 'close'); // uWS cuts the connection without a close frame
    assert.ok(
      server.closed.some((c) => /too big|max payload/i.test(c.reason)),
      JSON.stringify(server.closed),
    );

    const polite = new WebSocket(server.url);
    await nextMessage(polite);
    polite.send('close me');
    const [politeCode, reason] = (await once(polite, 'close')) as [number, Buffer];
    assert.deepEqual([politeCode, reason.toString()], [4000, 'asked to']);
    assert.ok(server.closed.some((c) => c.code === 4000));
  });

  it('closes open sockets with 1001 when the server shuts down', async () => {
    const server = await echoServer();
    const socket = new WebSocket(server.url);
    await nextMessage(socket);
    const closing = once(socket, 'close') as Promise<[number]>;
    await server.close();
    assert.equal((await closing)[0], 1001);
  });
});
