/**
 * Serving the web interface from the command line: `voxd ui` alone (its page, the API address it is given, the
 * assets' types, caching and compression) and `voxd serve --start-ui` refusing to half-start when the UI's port
 * is taken. Browser flows are in ui.test.ts.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { describe, it } from 'node:test';
import zlib from 'node:zlib';
import { cliEnv, freePort, portIsFree, spawnCli, tempDir, type CliProcess } from '../helpers/process.js';
import { transportUnderTest } from '../helpers/transport.js';

/** Resolves once `proc` said it serves the interface. */
async function uiStarted(proc: CliProcess): Promise<void> {
  const deadline = Date.now() + 15_000;
  while (!/voxd web interface on/.test(proc.stdout + proc.stderr)) {
    assert.ok(Date.now() < deadline && proc.exitStatus === null, `voxd ui did not start: ${proc.stderr}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe('voxd ui and --start-ui', { timeout: 60_000 }, () => {
  it('serves the page with the given API address, and hashed assets compressed and cached for good', async (t) => {
    const scratch = await tempDir(t, 'voxd-ui-cli-');
    const port = await freePort();
    const apiUrl = 'http://127.0.0.1:9/'; // nothing listens there: the page reports it, the UI server does not care
    const proc = spawnCli(
      t,
      ['ui', '--host', '127.0.0.1', '--port', String(port), '--api-url', apiUrl, '--transport', transportUnderTest(), '--log-dir', path.join(scratch, 'logs')],
      cliEnv(scratch),
    );
    await uiStarted(proc);
    const base = `http://127.0.0.1:${port}`;

    const page = await fetch(`${base}/`);
    assert.equal(page.status, 200);
    assert.equal(page.headers.get('content-type'), 'text/html; charset=utf-8');
    assert.equal(page.headers.get('cache-control'), 'no-cache');
    assert.match(page.headers.get('content-security-policy') ?? '', /connect-src 'self' blob: http:\/\/127\.0\.0\.1:9 ws:\/\/127\.0\.0\.1:9/);
    const html = await page.text();
    const config = JSON.parse(html.match(/<script id="voxd-config" type="application\/json">(.*?)<\/script>/)![1]!) as { apiBase: string };
    assert.equal(config.apiBase, 'http://127.0.0.1:9', 'the trailing slash is dropped');

    const script = html.match(/src="(\/assets\/main-\w+\.js)"/)![1]!;
    const stylesheet = html.match(/href="(\/assets\/main-\w+\.css)"/)![1]!;
    for (const [asset, type] of [
      [script, 'text/javascript; charset=utf-8'],
      [stylesheet, 'text/css; charset=utf-8'],
    ] as const) {
      // node's fetch decodes for us: ask over a raw request to see the encoding
      const raw = await rawGet(`${base}${asset}`, { 'accept-encoding': 'br, gzip' });
      assert.equal(raw.headers['content-type'], type, asset);
      assert.equal(raw.headers['cache-control'], 'public, max-age=31536000, immutable', asset);
      assert.equal(raw.headers['content-encoding'], 'br', asset);
      const plain = Buffer.from(await (await fetch(`${base}${asset}`, { headers: { 'accept-encoding': 'identity' } })).arrayBuffer());
      assert.deepEqual(zlib.brotliDecompressSync(raw.body), plain, asset);
    }
    assert.equal((await fetch(`${base}/assets/missing.js`)).status, 404);
    assert.doesNotMatch(
      html + (await (await fetch(`${base}${script}`)).text()),
      /https?:\/\/(?!localhost|127\.0\.0\.1|www\.w3\.org)[\w.-]+\.\w+\//,
      'no address elsewhere',
    );

    proc.child.kill('SIGTERM');
    assert.equal((await proc.waitExit(10_000)).code, 0);
  });

  it('--start-ui with its port taken fails naming the port, and releases the API port', async (t) => {
    const scratch = await tempDir(t, 'voxd-ui-busy-');
    const blocker = net.createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
    t.after(() => new Promise<void>((resolve) => blocker.close(() => resolve())));
    const uiPort = (blocker.address() as net.AddressInfo).port;
    const apiPort = await freePort();
    const proc = spawnCli(
      t,
      ['serve', '--host', '127.0.0.1', '--port', String(apiPort), '--start-ui', '--ui-host', '127.0.0.1', '--ui-port', String(uiPort)].concat([
        '--transport',
        transportUnderTest(),
        '--log-dir',
        path.join(scratch, 'logs'),
      ]),
      cliEnv(scratch),
    );
    const status = await proc.waitExit(20_000);
    assert.notEqual(status.code, 0);
    assert.match(proc.stderr, new RegExp(`web interface cannot listen on 127\\.0\\.0\\.1:${uiPort}`));
    assert.doesNotMatch(proc.stderr, /^\s+at /m, 'no stack trace');
    assert.ok(await portIsFree(apiPort), 'the API port was released');
  });
});

/** One GET with node:http, body left encoded. */
function rawGet(url: string, headers: Record<string, string>): Promise<{ headers: Record<string, string | string[] | undefined>; body: Buffer }> {
  return new Promise((resolve, reject) => {
    http
      .get(url, { headers, agent: false }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => resolve({ headers: res.headers, body: Buffer.concat(chunks) }));
      })
      .on('error', reject);
  });
}
