/**
 * The HTTP hot path against a bare uWebSockets.js handler (`npm run bench:http`): wrk (Debian's, 1 thread, 64
 * connections, `--seconds` each) sends `GET /v1/models` to, in turn,
 *   - a bare uWS app in a child process that answers with the same JSON body voxd gives, and nothing else;
 *   - voxd (`node dist/src/cli.js serve --transport uws`) at `--log-level warn`;
 *   - voxd at `--log-level info`, which writes one log line per request.
 * With two cores or more, each server's main thread (the one that serves requests) runs on CPU 1 and wrk on CPU 0, so
 * that where the scheduler puts them cannot change a run by a third (measured here unpinned: the same server's rate
 * swung 0.6x-1.0x); the servers' other threads (voxd's log writer among them) go where the scheduler puts them.
 * Each round runs all three back to back (in an order that rotates, so none always comes first); a round's ratios
 * compare runs seconds apart, and the median of `--rounds` rounds is printed: on a shared machine whose speed drifts
 * over minutes, that is steadier than comparing medians of whole runs. The targets
 * (docs/performance.md#http-hot-path): at least 0.85 of the bare handler at `warn`, 0.6 with request logs.
 */
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { startCliServer, stopCliServer, type CliServer } from './cli-server.js';
import { loadUws } from '../src/http/uws.js';
import { freePort } from '../test/helpers/process.js';
import { ROOT } from '../test/helpers/paths.js';

const { values: flags } = parseArgs({ options: { seconds: { type: 'string', default: '3' }, rounds: { type: 'string', default: '7' } } });
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

/** The load generator on one core and the server on another (see the header); null when they cannot be pinned. */
const PINNED = ['0', '1'].every((cpu) => spawnSync('taskset', ['-c', cpu, 'true']).status === 0) ? { wrk: '0', server: '1' } : null;

/** Moves the main thread of process `pid` onto the server's core. */
function pinServer(pid: number): void {
  if (PINNED && spawnSync('taskset', ['-cp', PINNED.server, String(pid)], { stdio: 'ignore' }).status !== 0) {
    throw new Error(`taskset could not pin process ${pid}`);
  }
}

/** wrk's requests per second; run asynchronously, so that this process keeps reading the servers' output. */
async function wrkRate(port: number): Promise<number> {
  const wrk = ['wrk', '-t1', '-c64', `-d${SECONDS}s`, `http://127.0.0.1:${port}/v1/models`];
  const [command, ...args] = PINNED ? ['taskset', '-c', PINNED.wrk, ...wrk] : wrk;
  const child = spawn(command as string, args, { stdio: ['ignore', 'pipe', 'pipe'] });
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
  pinServer(child.pid as number);
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
  try {
    loadUws();
  } catch (error) {
    // both sides are uWebSockets.js: on a Node line it has no binary for, there is nothing to compare
    console.error(`bench:http measures voxd's uWebSockets.js transport, which does not load here: ${(error as Error).message}`);
    console.error('Run it under a Node line uWebSockets.js has a binary for (Node 20: README.md#platforms).');
    return 2;
  }
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'voxd-bench-http-'));
  const servers: Record<'warn' | 'info', CliServer | null> = { warn: null, info: null };
  let bare: Awaited<ReturnType<typeof startBare>> | null = null;
  try {
    for (const level of ['warn', 'info'] as const) {
      servers[level] = await startCliServer(path.join(scratch, level), ['--transport', 'uws', '--log-level', level]);
      pinServer((servers[level] as CliServer).pid);
    }
    const body = await (await fetch(`${(servers.warn as CliServer).base}/v1/models`)).text();
    bare = await startBare(body);
    const ports = {
      bare: bare.port,
      warn: Number(new URL((servers.warn as CliServer).base).port),
      info: Number(new URL((servers.info as CliServer).base).port),
    };
    console.log(
      `GET /v1/models (${body.length} bytes of JSON), wrk -t1 -c64 -d${SECONDS}s, ${ROUNDS} rounds, ${os.cpus().length} cores, ${PINNED ? `servers on CPU ${PINNED.server}, wrk on CPU ${PINNED.wrk}` : 'unpinned'}, Node ${process.version}`,
    );
    const names = Object.keys(ports) as (keyof typeof ports)[];
    const rates: Record<keyof typeof ports, number[]> = { bare: [], warn: [], info: [] };
    for (let round = 0; round < ROUNDS; round++) {
      for (let i = 0; i < names.length; i++) {
        const name = names[(round + i) % names.length] as keyof typeof ports;
        rates[name].push(await wrkRate(ports[name]));
        await sleep(300);
      }
    }
    let ok = true;
    console.log('  server                          req/s (median)  vs bare (median of rounds)   target');
    console.log(`  bare uWS handler               ${median(rates.bare).toFixed(0).padStart(15)}     1.00`);
    for (const level of ['warn', 'info'] as const) {
      const ratio = median(rates[level].map((rate, round) => rate / (rates.bare[round] as number)));
      const met = ratio >= TARGETS[level];
      ok &&= met;
      const label = level === 'warn' ? 'voxd --log-level warn' : 'voxd --log-level info (logs)';
      console.log(
        `  ${label.padEnd(30)} ${median(rates[level]).toFixed(0).padStart(15)}     ${ratio.toFixed(2).padEnd(29)}≥ ${TARGETS[level]} ${met ? 'met' : 'MISSED'}`,
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
