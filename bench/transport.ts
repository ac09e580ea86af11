/**
 * The two HTTP transports side by side (`npm run bench:transport`): a real server (`node dist/src/cli.js serve`,
 * one child process per transport, `--log-level warn`) answers, in turn, 64 keep-alive connections that send as
 * fast as they can for 5 s: `GET /v1/models`, then a 100 KB multipart upload refused as malformed (400), then WebSocket round trips
 * (a JSON event on /v1/realtime answered by an error event). Prints requests per second and the ratio.
 */
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import WebSocket from 'ws';
import { startCliServer, stopCliServer } from './cli-server.js';

const CONNECTIONS = 64;
const SECONDS = 5;

/** Requests per second that CONNECTIONS keep-alive connections get through `request` for SECONDS. */
async function rate(port: number, options: http.RequestOptions, body?: Buffer): Promise<number> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: CONNECTIONS });
  const until = performance.now() + SECONDS * 1000;
  let done = 0;
  const one = (): Promise<void> =>
    new Promise((resolve, reject) => {
      const req = http.request({ host: '127.0.0.1', port, agent, ...options }, (res) => {
        res.resume();
        res.on('end', resolve);
      });
      req.on('error', reject);
      req.end(body);
    });
  await Promise.all(
    Array.from({ length: CONNECTIONS }, async () => {
      while (performance.now() < until) {
        await one();
        done++;
      }
    }),
  );
  agent.destroy();
  return done / SECONDS;
}

async function wsRate(port: number): Promise<number> {
  const until = performance.now() + SECONDS * 1000;
  let done = 0;
  await Promise.all(
    Array.from({ length: CONNECTIONS }, async () => {
      const socket = new WebSocket(`ws://127.0.0.1:${port}/v1/realtime?model=sphinx`);
      await new Promise((resolve) => socket.once('message', resolve)); // session.created
      while (performance.now() < until) {
        const answered = new Promise((resolve) => socket.once('message', resolve));
        socket.send(JSON.stringify({ type: 'no.such.event' }));
        await answered;
        done++;
      }
      socket.close();
    }),
  );
  return done / SECONDS;
}

const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'voxd-bench-transport-'));
const upload = Buffer.alloc(100 * 1024, 0x41);
const results: Record<string, Record<string, number>> = {};
for (const transport of ['uws', 'node']) {
  const server = await startCliServer(path.join(scratch, transport), [
    '--transport',
    transport,
    '--log-level',
    'warn',
    '--max-realtime-sessions',
    String(CONNECTIONS),
  ]);
  const port = Number(new URL(server.base).port);
  results[transport] = {
    'GET /v1/models': await rate(port, { path: '/v1/models' }),
    'POST 100 KB, refused': await rate(
      port,
      { path: '/v1/audio/transcriptions', method: 'POST', headers: { 'content-type': 'multipart/form-data; boundary=x', 'content-length': upload.length } },
      upload,
    ),
    'WS event round trip': await wsRate(port),
  };
  await stopCliServer(server);
}
fs.rmSync(scratch, { recursive: true, force: true });
console.log(`${CONNECTIONS} connections, ${SECONDS} s each, Node ${process.version}, ${os.availableParallelism()} cores (the load generator shares them):`);
for (const what of Object.keys(results.uws ?? {})) {
  const uws = results.uws?.[what] ?? 0;
  const node = results.node?.[what] ?? 0;
  console.log(
    `${what.padEnd(22)} uws ${Math.round(uws).toString().padStart(6)}/s   node ${Math.round(node).toString().padStart(6)}/s   uws/node ${(uws / node).toFixed(2)}x`,
  );
}
