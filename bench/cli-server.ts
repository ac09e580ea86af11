/**
 * A real voxd server for a benchmark: `node dist/src/cli.js serve` as a child process on a free loopback port,
 * with caches and logs under `scratch`, the hub out of reach, and its stderr kept for the error of a failed start.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { cliEnv, freePort } from '../test/helpers/process.js';
import { ROOT } from '../test/helpers/paths.js';

export interface CliServer {
  child: ChildProcess;
  pid: number;
  base: string;
  /** The last 4000 characters the server wrote to stderr. */
  stderr(): string;
}

/**
 * Starts the server with `flags` (after host, port and log dir) on `port` (a free one when not given) and waits until
 * /readyz answers 200.
 */
export async function startCliServer(scratch: string, flags: string[] = [], env: NodeJS.ProcessEnv = {}, port?: number): Promise<CliServer> {
  port ??= await freePort();
  const args = ['serve', '--host', '127.0.0.1', '--port', String(port), '--log-dir', path.join(scratch, 'logs'), ...flags];
  const child = spawn(process.execPath, [path.join(ROOT, 'dist', 'src', 'cli.js'), ...args], {
    cwd: ROOT,
    env: cliEnv(scratch, env),
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (stderr = (stderr + chunk).slice(-4000)));
  const base = `http://127.0.0.1:${port}`;
  const deadline = performance.now() + 30_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`the server exited (${child.exitCode}): ${stderr}`);
    const ready = await fetch(`${base}/readyz`).then(
      (r) => r.ok,
      () => false,
    );
    if (ready) return { child, pid: child.pid as number, base, stderr: () => stderr };
    if (performance.now() > deadline) throw new Error(`the server was not ready within 30 s: ${stderr}`);
    await sleep(100);
  }
}

/** SIGTERM, and the exit status once it exited. */
export async function stopCliServer(server: CliServer): Promise<number | null> {
  const exited = new Promise<number | null>((resolve) => server.child.once('exit', (code) => resolve(code)));
  server.child.kill('SIGTERM');
  return exited;
}

/** A process's resident memory (VmRSS), MiB. */
export function rssMiB(pid: number): number {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = /^VmRSS:\s+(\d+) kB/m.exec(status);
  if (!kib) throw new Error(`no VmRSS for process ${pid}`);
  return Number(kib[1]) / 1024;
}
