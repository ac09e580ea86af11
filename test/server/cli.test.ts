/**
 * The `voxd` command line, run as a real process: flag validation, help vs docs/configuration.md, flag/env precedence, log files,
 * graceful shutdown, a broken addon, --preload and /readyz, --reload. Each server gets its own port, log dir and
 * caches, and an unreachable hub (or a hub double); every wait has a deadline and every process is killed afterwards.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import http from 'node:http';
import path from 'node:path';
import { describe, it, type TestContext } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { SERVE_SETTINGS, UI_SETTINGS, withConfigurationTables } from '../../src/config.js';
import { HubDouble } from '../helpers/hub-double.js';
import { JFK_WAV, ROOT, SILERO_V6 } from '../helpers/paths.js';
import { cliEnv, freePort, groupAlive, pollUntil, portIsFree, runCli, spawnCli, tempDir, waitHealthy, type CliProcess } from '../helpers/process.js';

const STACK_LINE = /^\s+at /m;
const TEST_TIMEOUT = 30_000;

/** Non-empty lines of a process output. */
function lines(text: string): string[] {
  return text.split('\n').filter((line) => line.trim() !== '');
}

/** One request on a fresh connection (no keep-alive pool), with a deadline. */
function request(
  url: string,
  options: { method?: string; headers?: Record<string, string> } = {},
  ms = 10_000,
): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: options.method ?? 'GET', headers: options.headers ?? {}, agent: false, timeout: ms }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`no answer from ${url} within ${ms} ms`)));
    req.on('error', reject);
    req.end();
  });
}

interface Served {
  proc: CliProcess;
  base: string;
  port: number;
  scratch: string;
  logDir: string;
}

/** `voxd serve` on 127.0.0.1 and a free port, with a temporary log dir and caches; resolves once /healthz answers. */
async function serve(t: TestContext, args: string[] = [], env: NodeJS.ProcessEnv = {}, options: { logDir?: string } = {}): Promise<Served> {
  const scratch = await tempDir(t, 'voxd-cli-test-');
  const port = await freePort();
  const logDir = options.logDir ?? path.join(scratch, 'logs');
  const proc = spawnCli(t, ['serve', '--host', '127.0.0.1', '--port', String(port), '--log-dir', logDir, ...args], cliEnv(scratch, env));
  const base = `http://127.0.0.1:${port}`;
  await waitHealthy(base, proc);
  return { proc, base, port, scratch, logDir };
}

/** SIGTERM, then the exit status (failing after `ms`). */
async function terminate(proc: CliProcess, ms = 10_000) {
  proc.child.kill('SIGTERM');
  return proc.waitExit(ms);
}

describe('voxd command line', { timeout: 120_000 }, () => {
  it('rejects invalid values with status 2 and one line naming the flag or variable', { timeout: TEST_TIMEOUT }, async (t) => {
    const scratch = await tempDir(t, 'voxd-cli-invalid-');
    const port = String(await freePort());
    const common = ['--host', '127.0.0.1', '--log-dir', path.join(scratch, 'logs')];
    const cases: { args: string[]; env?: NodeJS.ProcessEnv; names: string }[] = [
      { args: ['serve', ...common, '--port', 'abc'], names: '--port' },
      { args: ['serve', ...common, '--port', '70000'], names: '--port' },
      { args: ['serve', ...common, '--port', port, '--tts-max-batch-size', '0'], names: '--tts-max-batch-size' },
      { args: ['serve', ...common, '--port', port], env: { VOXD_TTS_MAX_BATCH_SIZE: 'abc' }, names: 'VOXD_TTS_MAX_BATCH_SIZE' },
      { args: ['serve', ...common, '--port', port, '--log-level', 'loud'], names: '--log-level' },
      {
        args: ['serve', ...common, '--port', port, '--voices-dir', path.join(scratch, 'no-voices')],
        names: `--voices-dir: directory ${path.join(scratch, 'no-voices')}`,
      },
      { args: ['serve', ...common, '--port', port], env: { VOXD_VOICES_DIR: path.join(scratch, 'no-voices') }, names: 'VOXD_VOICES_DIR' },
    ];
    for (const { args, env, names } of cases) {
      const what = `${env ? Object.entries(env).map(([k, v]) => `${k}=${v} `) : ''}${args.slice(-2).join(' ')}`;
      const result = await runCli(t, args, cliEnv(scratch, env));
      assert.equal(result.code, 2, `${what}: exit status (stderr: ${result.stderr})`);
      const errorLines = lines(result.stderr);
      assert.equal(errorLines.length, 1, `${what}: one line on stderr, got:\n${result.stderr}`);
      assert.ok(errorLines[0]!.includes(names), `${what}: the message names ${names}: ${errorLines[0]}`);
      assert.doesNotMatch(result.stderr, STACK_LINE, `${what}: no stack trace`);
    }
    // the variable is named only when it is the source: a valid flag overrides a bad variable
    const overridden = await runCli(t, ['serve', ...common, '--port', 'abc', '--tts-max-batch-size', '4'], cliEnv(scratch, { VOXD_TTS_MAX_BATCH_SIZE: 'abc' }));
    assert.equal(overridden.code, 2);
    assert.match(overridden.stderr, /--port/);
    assert.doesNotMatch(overridden.stderr, /VOXD_TTS_MAX_BATCH_SIZE|--tts-max-batch-size/);
  });

  it('keeps the tables of docs/configuration.md as the settings make them', () => {
    const doc = fs.readFileSync(path.join(ROOT, 'docs', 'configuration.md'), 'utf8');
    assert.equal(withConfigurationTables(doc), doc, 'docs/configuration.md differs from the settings in src/config.ts: run `npm run docs:config`');
  });

  it('lists every setting of `serve` and `ui` in their --help, and nothing else', { timeout: TEST_TIMEOUT }, async (t) => {
    const scratch = await tempDir(t, 'voxd-cli-help-');
    for (const [command, settings] of [
      ['serve', SERVE_SETTINGS],
      ['ui', UI_SETTINGS],
    ] as const) {
      const result = await runCli(t, [command, '--help'], cliEnv(scratch));
      assert.equal(result.code, 0, result.stderr);
      const helpFlags = lines(result.stdout)
        .map((line) => /^ {2}(?:-\w, )?(--[a-z][a-z0-9-]*)/.exec(line)?.[1])
        .filter((flag): flag is string => flag !== undefined && flag !== '--help');
      assert.deepEqual(
        helpFlags,
        Object.values(settings).map((setting) => setting.flag),
        `${command} --help:\n${result.stdout}`,
      );
    }
  });

  it('takes CORS origins from VOXD_ALLOWED_ORIGINS unless --allowed-origins is given', { timeout: TEST_TIMEOUT }, async (t) => {
    const env = { VOXD_ALLOWED_ORIGINS: 'http://a.test,http://b.test' };
    const allowed = async (base: string, origin: string) =>
      (await request(`${base}/healthz`, { headers: { Origin: origin } })).headers['access-control-allow-origin'];

    const fromEnv = await serve(t, [], env);
    assert.equal(await allowed(fromEnv.base, 'http://b.test'), 'http://b.test');
    assert.equal(await allowed(fromEnv.base, 'http://a.test'), 'http://a.test');
    assert.equal(await allowed(fromEnv.base, 'http://c.test'), undefined);
    assert.equal((await terminate(fromEnv.proc)).code, 0);

    const fromFlag = await serve(t, ['--allowed-origins', 'http://c.test'], env);
    assert.equal(await allowed(fromFlag.base, 'http://c.test'), 'http://c.test');
    assert.equal(await allowed(fromFlag.base, 'http://b.test'), undefined);
    assert.equal(await allowed(fromFlag.base, 'http://a.test'), undefined);
    assert.equal((await terminate(fromFlag.proc)).code, 0);
  });

  it('creates --log-dir and writes one JSON line per request', { timeout: TEST_TIMEOUT }, async (t) => {
    const parent = await tempDir(t, 'voxd-cli-logs-');
    const logDir = path.join(parent, 'not', 'yet', 'logs');
    const { proc, base } = await serve(t, [], {}, { logDir });
    const sent = [
      { method: 'GET', url: '/healthz', route: '/healthz', status: 200 },
      { method: 'GET', url: '/readyz', route: '/readyz', status: 200 },
      { method: 'GET', url: '/v1/models', route: '/v1/models', status: 200 },
      { method: 'GET', url: '/no/such/route', route: 'unmatched', status: 404 },
      { method: 'DELETE', url: '/healthz', route: '/healthz', status: 405 },
    ];
    const ids: string[] = [];
    for (const { method, url, status } of sent) {
      const response = await request(base + url, { method });
      assert.equal(response.status, status, `${method} ${url}`);
      ids.push(String(response.headers['x-request-id']));
    }
    assert.equal((await terminate(proc)).code, 0, proc.stderr);

    const files = (await fsp.readdir(logDir)).filter((name) => /^voxd\..*\.log$/.test(name));
    assert.ok(files.length >= 1, `a voxd.*.log file in ${logDir}: ${(await fsp.readdir(logDir)).join(', ')}`);
    const records = (await Promise.all(files.map((name) => fsp.readFile(path.join(logDir, name), 'utf8'))))
      .flatMap(lines)
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    sent.forEach(({ method, route, status }, i) => {
      const matching = records.filter((r) => r.reqId === ids[i]);
      assert.equal(matching.length, 1, `one log line for request ${ids[i]} (${method} ${route})`);
      const record = matching[0]!;
      assert.equal(record.method, method);
      assert.equal(record.route, route);
      assert.equal(record.status, status);
      assert.equal(typeof record.ms, 'number');
      assert.ok((record.ms as number) >= 0);
    });
  });

  it('finishes in-flight requests on SIGTERM, refuses new ones and exits 0', { timeout: TEST_TIMEOUT }, async (t) => {
    const repo = 'ggml-org/whisper-vad';
    const file = 'ggml-silero-v6.2.0.bin';
    const double = await HubDouble.start();
    t.after(() => double.close());
    double.addRepo(repo, { files: { [file]: SILERO_V6 } });
    double.setFaults(repo, file, { chunkDelayMs: 100 }); // 14 chunks of 64 KiB: about 1.4 s
    const { proc, base, port } = await serve(t, [], { HF_ENDPOINT: double.endpoint });

    const load = request(`${base}/v1/models?model_name=${repo}/${file}`, { method: 'POST' }, 20_000);
    load.catch(() => {}); // awaited below; avoids an unhandled rejection if an assertion fails first
    const deadline = Date.now() + 10_000;
    while (double.contentTransfers(repo, file).length === 0) {
      assert.ok(Date.now() < deadline, `the download did not start; stderr:\n${proc.stderr}`);
      await sleep(20);
    }
    await sleep(200);
    assert.equal(double.contentTransfers(repo, file)[0]!.status, undefined, 'the download is still running when the signal comes');
    const stderrBefore = proc.stderr.length;
    proc.child.kill('SIGTERM');
    await proc.waitStderr(/draining/, 5000, stderrBefore);

    const late = await request(`${base}/healthz`, {}, 5000).then(
      (response) => response.status,
      (error: NodeJS.ErrnoException) => error.code ?? String(error),
    );
    assert.ok(['ECONNREFUSED', 'ECONNRESET', 503].includes(late as string | number), `a new connection after SIGTERM: ${late}`);

    const response = await load;
    assert.equal(response.status, 200, response.body);
    assert.equal((JSON.parse(response.body) as { status: string }).status, 'success');
    assert.equal(double.contentTransfers(repo, file).length, 1, 'one uninterrupted download');
    const exit = await proc.waitExit(10_000);
    assert.deepEqual(exit, { code: 0, signal: null }, proc.stderr);
    assert.ok(await portIsFree(port), 'the port is released');
  });

  it('exits 1 with one line naming `npm run build:native` when the addon is broken', { timeout: TEST_TIMEOUT }, async (t) => {
    const scratch = await tempDir(t, 'voxd-cli-addon-');
    const addon = path.join(scratch, 'x.node');
    await fsp.writeFile(addon, Buffer.from(Array.from({ length: 4096 }, (_, i) => (i * 131 + 7) % 256)));
    const port = String(await freePort());
    const result = await runCli(
      t,
      ['serve', '--host', '127.0.0.1', '--port', port, '--log-dir', path.join(scratch, 'logs')],
      cliEnv(scratch, { VOXD_ADDON: addon }),
    );
    assert.equal(result.code, 1, result.stderr);
    const errorLines = lines(result.stderr);
    assert.equal(errorLines.length, 1, `one line on stderr, got:\n${result.stderr}`);
    assert.match(errorLines[0]!, /npm run build:native/);
    assert.doesNotMatch(result.stderr, STACK_LINE);
  });

  it('--preload: /readyz is ready once the model is loaded, and failed (server still up) when it cannot load', { timeout: TEST_TIMEOUT }, async (t) => {
    const good = await serve(t, ['--preload', SILERO_V6]);
    const ready = await pollUntil(good.base, '/readyz', (status, body) => status === 200 || body.includes('failed'), 10_000, good.proc);
    assert.equal(ready.status, 200, ready.body);
    assert.deepEqual(JSON.parse(ready.body), { status: 'ready' });
    const list = JSON.parse((await request(`${good.base}/v1/models`)).body) as { data: { id: string; loaded: boolean; task: string }[] };
    assert.deepEqual(
      list.data.map((m) => [m.id, m.loaded, m.task]),
      [[SILERO_V6, true, 'vad']],
    );
    assert.equal((await terminate(good.proc)).code, 0);

    const bad = await serve(t, ['--preload', JFK_WAV]);
    const failed = await pollUntil(bad.base, '/readyz', (status, body) => status === 200 || body.includes('failed'), 10_000, bad.proc);
    assert.equal(failed.status, 503, failed.body);
    assert.equal((JSON.parse(failed.body) as { status: string }).status, 'failed');
    assert.equal((await request(`${bad.base}/healthz`)).status, 200, 'the server keeps running');
    assert.equal(bad.proc.exitStatus, null);
    assert.equal((await terminate(bad.proc)).code, 0);
  });

  it('--reload restarts the server when dist/src changes, and SIGTERM takes down the whole tree', { timeout: TEST_TIMEOUT }, async (t) => {
    const { proc, base, port } = await serve(t, ['--reload']);
    await proc.waitStderr(/voxd listening on/, 5000);
    assert.equal(proc.stderr.match(/voxd listening on/g)?.length, 1, proc.stderr);

    const touched = path.join(ROOT, 'dist', 'src', 'routes', 'operations.js');
    const from = proc.stderr.length;
    const now = new Date();
    await fsp.utimes(touched, now, now);
    await proc.waitStderr(/restart/i, 10_000, from);
    // a second server process starts listening after the restart message
    await proc.waitStderr(/restart[^]*voxd listening on/i, 15_000, from);
    await waitHealthy(base, proc, 10_000);

    const pid = proc.child.pid!;
    const exit = await terminate(proc, 15_000);
    assert.equal(exit.code, 0, proc.stderr);
    const deadline = Date.now() + 5000;
    while (groupAlive(pid)) {
      assert.ok(Date.now() < deadline, 'every process of the --reload tree has exited');
      await sleep(50);
    }
    assert.ok(await portIsFree(port), `port ${port} is free again`);
  });
});
