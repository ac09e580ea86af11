/**
 * The HTTP hot path against a bare uWebSockets.js handler (`npm run bench:http`): wrk (Debian's, 1 thread, 64
 * connections, `--seconds` each) sends `GET /v1/models` to, in turn,
 *   - a bare uWS app in a child process that answers with the same JSON body voxd gives, and nothing else;
 *   - voxd (`node dist/src/cli.js serve --transport uws`) at `--log-level warn`;
 *   - voxd at `--log-level info`, which writes one log line per request.
 * Each is run `--rounds` times, interleaved, and the median is printed with its ratio to the bare handler. The
 * targets (docs/performance.md#http-hot-path): at least 0.85 of the bare handler at `warn`, 0.6 with request logs.
 */
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { startCliServer, stopCliServer, type CliServer } from './cli-server.js';
import { freePort } from '../test/helpers/process.js';
import { ROOT } from '../test/helpers/paths.js';

const { values: flags } = parseArgs({ options: { seconds: { type: 'string', default: '5' }, rounds: { type: 'string', default: '3' } } });
const SECONDS = Number(flags.seconds);
const ROUNDS = Number(flags.rounds);
const TARGETS = { warn: 0.85, info: 0.6 };

/** The bare handler: uWS's App, one route, the body it is given, nothing per request but the write. */
const BARE_SERVER = `
const { createRequire } = require('node:module');
const uws = createRequire(${JSON.stringify(path.join(ROOT, 'package.json'))})('@trufflesuite/uws-js-unofficial/binaries/uws_' + process.platform + '_' + process.arch + '_' + process.versions.modules + '.node');
const [port, body] = [Number(process.argv[1]), process.argv[2]];
uws.App().get('/v1/models', (res) => {
  res.cork(() => res.writeHeader('content-type', 'application/json').end(body));
}).listen('127.0.0.1', port, (socket) => { if (!socket) process.exit(1); console.log('ready'); });
`;

/** wrk's requests per second; run asynchronously, so that this process keeps reading the servers' output. */
async function wrkRate(port: number): Promise<number> {
  const child = spawn('wrk', ['-t1', '-c64', `-d${SECONDS}s`, `http://127.0.0.1:${port}/v1/models`], { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  await new Promise((resolve) => child.once('close', resolve));
  const rate = /Requests\/sec:\s+([\d.]+)/.exec(output);
  const errors = /Non-2xx or 3xx responses: (\d+)|Socket errors: (.*)/.exec(output);
  if (!rate) throw new Error(`wrk failed: ${output}`);
  if (errors) throw new Error(`wrk saw errors: ${errors[0]}`);
  return Number(rate[1]);
}

async function startBare(body: string): Promise<{ port: number; stop(): Promise<void> }> {
  const port = await freePort();
  const child = spawn(process.execPath, ['-e', BARE_SERVER, String(port), body], { stdio: ['ignore', 'pipe', 'inherit'] });
  await new Promise<void>((resolve, reject) => {
    child.stdout.once('data', () => resolve());
    child.once('exit', (code) => reject(new Error(`the bare server exited (${code})`)));
  });
  return {
    port,
    stop: async () => {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    },
  };
}

const median = (values: number[]): number => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] as number;

async function main(): Promise<number> {
  if (spawnSync('wrk', ['--version']).error) throw new Error("wrk is not installed (Debian's package wrk: apt-get install wrk)");
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'voxd-bench-http-'));
  const servers: Record<'warn' | 'info', CliServer | null> = { warn: null, info: null };
  let bare: Awaited<ReturnType<typeof startBare>> | null = null;
  try {
    for (const level of ['warn', 'info'] as const) {
      servers[level] = await startCliServer(path.join(scratch, level), ['--transport', 'uws', '--log-level', level]);
    }
    const body = await (await fetch(`${(servers.warn as CliServer).base}/v1/models`)).text();
    bare = await startBare(body);
    const ports = {
      bare: bare.port,
      warn: Number(new URL((servers.warn as CliServer).base).port),
      info: Number(new URL((servers.info as CliServer).base).port),
    };
    console.log(
      `GET /v1/models (${body.length} bytes of JSON), wrk -t1 -c64 -d${SECONDS}s, ${ROUNDS} rounds interleaved, ${os.cpus().length} cores, Node ${process.version}`,
    );
    const rates: Record<keyof typeof ports, number[]> = { bare: [], warn: [], info: [] };
    for (let round = 0; round < ROUNDS; round++) {
      for (const name of Object.keys(ports) as (keyof typeof ports)[]) {
        rates[name].push(await wrkRate(ports[name]));
        await sleep(500);
      }
    }
    const bareRate = median(rates.bare);
    let ok = true;
    console.log('  server                          req/s (median)  vs bare   target');
    console.log(`  bare uWS handler               ${bareRate.toFixed(0).padStart(15)}     1.00`);
    for (const level of ['warn', 'info'] as const) {
      const ratio = median(rates[level]) / bareRate;
      const met = ratio >= TARGETS[level];
      ok &&= met;
      const label = level === 'warn' ? 'voxd --log-level warn' : 'voxd --log-level info (logs)';
      console.log(
        `  ${label.padEnd(30)} ${median(rates[level]).toFixed(0).padStart(15)}     ${ratio.toFixed(2)}   ≥ ${TARGETS[level]} ${met ? 'met' : 'MISSED'}`,
      );
    }
    console.log(
      `  (each round: ${Object.entries(rates)
        .map(([name, r]) => `${name} ${r.map((x) => x.toFixed(0)).join('/')}`)
        .join(', ')})`,
    );
    return ok ? 0 : 1;
  } finally {
    await bare?.stop();
    for (const server of Object.values(servers)) if (server) await stopCliServer(server);
    fs.rmSync(scratch, { recursive: true, force: true });
  }
}

process.exitCode = await main();
