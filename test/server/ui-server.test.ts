/**
 * The web interface's listener in process, as `serve --start-ui` runs it with the API bound to a wildcard address:
 * what protects the page (no site may frame it; a Host header reaches its configuration only as a host name) and
 * which encoding of an asset each Accept-Encoding gets. Browser flows are in ui.test.ts, the commands in ui-cli.test.ts.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import zlib from 'node:zlib';
import { envelopeCode, rawExchange } from '../helpers/hostile.js';
import { ROOT } from '../helpers/paths.js';
import { startTestServer } from '../helpers/server.js';

interface RawReply {
  status: number;
  headers: Map<string, string>;
  body: Buffer;
}

/** One GET over a connection of its own, with exactly these headers (any Host included); the body as sent. */
async function rawGet(base: string, route: string, headers: Record<string, string>): Promise<RawReply> {
  const lines = [`GET ${route} HTTP/1.1`, ...Object.entries(headers).map(([name, value]) => `${name}: ${value}`), 'Connection: close'];
  const { text } = await rawExchange(base, `${lines.join('\r\n')}\r\n\r\n`, 10_000);
  const headEnd = text.indexOf('\r\n\r\n');
  const [statusLine = '', ...fields] = text.slice(0, headEnd).split('\r\n');
  return {
    status: Number(statusLine.split(' ')[1]),
    headers: new Map(fields.map((field) => [field.slice(0, field.indexOf(':')).toLowerCase(), field.slice(field.indexOf(':') + 1).trim()])),
    body: Buffer.from(text.slice(headEnd + 4), 'latin1'),
  };
}

describe('web interface listener', { timeout: 60_000 }, () => {
  let ui: string;
  let apiPort: number;
  let script: string;

  const cleanups: (() => Promise<void>)[] = [];
  after(async () => {
    for (const cleanup of cleanups) await cleanup();
  });

  before(async () => {
    const { server } = await startTestServer(
      { after: (cleanup) => cleanups.push(cleanup) },
      { host: '0.0.0.0', startUi: true, uiHost: '127.0.0.1', uiPort: 0 },
    );
    ui = `http://127.0.0.1:${server.uiPort}`;
    apiPort = server.port;
    script = /src="(\/assets\/main-\w+\.js)"/.exec(await (await fetch(`${ui}/`)).text())![1]!;
  });

  it('forbids any site to frame the page', async () => {
    const page = await fetch(`${ui}/`);
    assert.equal(page.status, 200);
    assert.match(page.headers.get('content-security-policy') ?? '', /(^|; )frame-ancestors 'none'(;|$)/);
    assert.equal(page.headers.get('x-frame-options'), 'DENY');
  });

  it('sends the encoding the client prefers, identity weighed like the others, never one it refuses with q=0', async () => {
    const plain = fs.readFileSync(path.join(ROOT, 'ui', 'dist', script));
    const cases: [string, string | undefined][] = [
      ['br, gzip', 'br'],
      ['gzip, br', 'br'],
      ['BR;Q=1', 'br'],
      ['br;q=0, gzip', 'gzip'],
      ['br;q=0', undefined],
      ['br;q=0.0', undefined],
      ['gzip;q=0', undefined],
      ['br;q=0.5, gzip;q=0.8', 'gzip'],
      ['x-gzip', 'gzip'],
      ['*', 'br'],
      ['gzip;q=0, *', 'br'],
      ['br;q=0, *;q=0.1', 'gzip'],
      ['*;q=0', undefined],
      ['*;q=0, gzip', 'gzip'],
      ['identity', undefined],
      ['gzip;q=0.5, identity;q=1', undefined],
      ['br;q=0.5, gzip;q=0.8, identity;q=0.9', undefined],
      ['identity;q=0.5, gzip', 'gzip'],
      ['identity, br', 'br'],
      ['identity;q=0, gzip;q=0.1', 'gzip'],
      ['identity;q=0, br;q=0', undefined],
      ['*;q=0.5, identity;q=0.6', undefined],
      ['br;q=0, *;q=0.5', 'gzip'],
      ['br;q=2, gzip;q=abc', undefined],
      ['', undefined],
    ];
    for (const [acceptEncoding, expected] of cases) {
      const reply = await rawGet(ui, script, { Host: '127.0.0.1', 'Accept-Encoding': acceptEncoding });
      assert.equal(reply.status, 200, acceptEncoding);
      assert.equal(reply.headers.get('content-encoding'), expected, `Accept-Encoding: ${acceptEncoding}`);
      const decoded = expected === 'br' ? zlib.brotliDecompressSync(reply.body) : expected === 'gzip' ? zlib.gunzipSync(reply.body) : reply.body;
      assert.deepEqual(decoded, plain, acceptEncoding);
    }
  });

  it('writes the Host a browser sent into the page on a wildcard bind, and refuses any Host that is no host name', async () => {
    const accepted: [string, string][] = [
      ['voxd.example:3000', `http://voxd.example:${apiPort}`],
      ['Voxd.Example', `http://voxd.example:${apiPort}`],
      ['my_service.local.', `http://my_service.local.:${apiPort}`],
      ['192.168.1.7:80', `http://192.168.1.7:${apiPort}`],
      ['[::1]:3000', `http://[::1]:${apiPort}`],
    ];
    for (const [host, apiBase] of accepted) {
      const reply = await rawGet(ui, '/', { Host: host });
      assert.equal(reply.status, 200, host);
      const config = JSON.parse(/<script id="voxd-config" type="application\/json">(.*?)<\/script>/.exec(reply.body.toString('utf8'))![1]!) as {
        apiBase: string;
      };
      assert.equal(config.apiBase, apiBase, host);
      assert.match(reply.headers.get('content-security-policy') ?? '', new RegExp(`connect-src 'self' blob: ${apiBase.replace(/[.[\]]/g, '\\$&')} `), host);
    }
    for (const host of [
      // each of these used to reach the page's Content-Security-Policy, the first two as a directive of their own
      'evil.example;default-src',
      'x%3b.example',
      "evil.example;script-src 'unsafe-inline'",
      'evil.example/path',
      'user@evil.example',
      'evil example',
      '"evil.example"',
      '::1',
      '[evil.example]',
      'evil.example:99999',
      'evil.example:port',
      '-evil.example',
      `${'a'.repeat(64)}.example`,
    ]) {
      const reply = await rawGet(ui, '/', { Host: host });
      assert.equal(reply.status, 400, host);
      assert.equal(envelopeCode(reply.body), 'invalid_request', host);
      assert.match(reply.body.toString('utf8'), /is not a host name with an optional port/, host);
    }
  });
});
