/**
 * Debian's nginx running deploy/nginx/voxd.conf as shipped, with its ports moved to free loopback ones, under a
 * temporary prefix: for the deployment test (stand-in instances) and bench/scale-out (real voxd instances).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { ROOT } from './paths.js';
import { freePort } from './process.js';

export const NGINX_CONF = path.join(ROOT, 'deploy', 'nginx', 'voxd.conf');
/** The upstream ports the shipped configuration names, in order. */
const SHIPPED_UPSTREAM_PORTS = [8001, 8002, 8003];

function findNginx(): string | null {
  for (const candidate of ['nginx', '/usr/sbin/nginx']) {
    if (spawnSync(candidate, ['-v']).status === 0) return candidate;
  }
  return null;
}

/** The nginx binary, or null where none is installed. */
export const NGINX = findNginx();
/** A test's `skip` value: false, or why it cannot run. */
export const NO_NGINX = NGINX ? false : "nginx is not installed (`npm test` installs Debian's nginx: scripts/system-deps.mjs TEST_DEPS)";

export interface RunningNginx {
  /** The loopback port nginx listens on. */
  port: number;
  /** The -p prefix: error.log and access.log are there. */
  prefix: string;
  /** Text of the error log so far. */
  errorLog(): string;
  /** SIGTERM (nginx's fast shutdown), then removes the prefix. */
  stop(): Promise<void>;
}

/**
 * Starts nginx with the shipped configuration in front of `upstreams` (one loopback port per `server` line of the
 * shipped upstream block), listening on a free port, with one worker (each worker balances on its own, so one makes
 * the order of tries predictable). `edit` may change the configuration text further.
 */
export async function startNginx(upstreams: number[], edit: (conf: string) => string = (conf) => conf): Promise<RunningNginx> {
  if (!NGINX) throw new Error(NO_NGINX as string);
  if (upstreams.length !== SHIPPED_UPSTREAM_PORTS.length) throw new Error(`the shipped configuration names ${SHIPPED_UPSTREAM_PORTS.length} instances`);
  const port = await freePort();
  const prefix = fs.mkdtempSync(path.join(os.tmpdir(), 'voxd-nginx-'));
  fs.chmodSync(prefix, 0o755); // nginx's workers run as nobody when the test runs as root
  let conf = fs
    .readFileSync(NGINX_CONF, 'utf8')
    .replace(/^(\s*listen )8000;/m, `$1127.0.0.1:${port};`)
    .replace(/^worker_processes auto;/m, 'worker_processes 1;');
  SHIPPED_UPSTREAM_PORTS.forEach((shipped, i) => (conf = conf.replace(`server 127.0.0.1:${shipped} `, `server 127.0.0.1:${upstreams[i]} `)));
  fs.writeFileSync(path.join(prefix, 'voxd.conf'), edit(conf));
  const startupLog = path.join(prefix, 'startup.log');
  const child: ChildProcess = spawn(NGINX, ['-p', prefix, '-c', path.join(prefix, 'voxd.conf'), '-e', startupLog, '-g', 'daemon off;'], {
    stdio: 'ignore',
  });
  const stop = async (): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    }
    fs.rmSync(prefix, { recursive: true, force: true });
  };
  for (let i = 0; ; i++) {
    const up = await new Promise<boolean>((resolve) => {
      const socket = net.connect(port, '127.0.0.1', () => resolve(true)).on('error', () => resolve(false));
      socket.on('connect', () => socket.destroy());
    });
    if (up) break;
    if (i >= 100 || child.exitCode !== null) {
      const log = fs.existsSync(startupLog) ? fs.readFileSync(startupLog, 'utf8') : `exit code ${child.exitCode}`;
      await stop();
      throw new Error(`nginx did not start: ${log}`);
    }
    await sleep(50);
  }
  const errorLog = (): string => {
    const file = path.join(prefix, 'error.log');
    return fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : '';
  };
  return { port, prefix, errorLog, stop };
}
