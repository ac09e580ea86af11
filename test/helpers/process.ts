/**
 * Running the real `voxd` CLI as a child process in tests: free ports, an isolated environment (temporary log dir, hub
 * cache and voxd cache, so nothing touches ~/.cache), output capture, health polling and cleanup with deadlines.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fsp from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { TestContext } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { CLI, ROOT } from './paths.js';

/** A temporary directory removed after the test. */
export async function tempDir(t: TestContext, prefix: string): Promise<string> {
  const dir = await fsp.mkdtemp(path.join(os.tmpdir(), prefix));
  t.after(() => fsp.rm(dir, { recursive: true, force: true }));
  return dir;
}

/** A port that was free on 127.0.0.1 a moment ago. */
export async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** Whether nothing listens on 127.0.0.1:port (we can bind it ourselves). */
export async function portIsFree(port: number): Promise<boolean> {
  const server = net.createServer();
  const bound = await new Promise<boolean>((resolve) => {
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => resolve(true));
  });
  if (bound) await new Promise<void>((resolve) => server.close(() => resolve()));
  return bound;
}

/**
 * The environment of a CLI child: the test's own, without any VOXD_* / HF_* setting that could leak in, with a hub
 * that cannot be reached and caches under `scratch`; `extra` overrides.
 */
export function cliEnv(scratch: string, extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) if (!/^(VOXD_|HF_)/.test(key)) env[key] = value;
  return {
    ...env,
    HF_ENDPOINT: 'http://127.0.0.1:9',
    HF_HOME: path.join(scratch, 'hf-home'),
    HF_HUB_CACHE: path.join(scratch, 'hub'),
    VOXD_CACHE_DIR: path.join(scratch, 'voxd-cache'),
    NO_COLOR: '1',
    ...extra,
  };
}

export interface ExitStatus {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface CliProcess {
  child: ChildProcess;
  /** Everything written so far. */
  readonly stdout: string;
  readonly stderr: string;
  /** Settles when the process has exited (and its output streams have closed). */
  readonly exited: Promise<ExitStatus>;
  /** The exit status once exited, else null. */
  readonly exitStatus: ExitStatus | null;
  /** Waits for the exit, failing after `ms` with the captured stderr in the message. */
  waitExit(ms: number): Promise<ExitStatus>;
  /** Waits until stderr matches `pattern` (from character `from` on), failing after `ms` or when the process exits. */
  waitStderr(pattern: RegExp, ms: number, from?: number): Promise<void>;
}

/**
 * Spawns `node dist/src/cli.js ...args` in its own process group (so the test can take down whatever it started,
 * grandchildren of `--reload` included). The group is killed after the test (`scope.after`: a test's context, or a
 * fuzz target's own cleanup list) if anything of it is still alive. `ownGroup: false` leaves the child in this
 * process's group, so that a Ctrl-C in a terminal stops it too (the fuzzer); only the child itself is then killed.
 */
export function spawnCli(
  scope: { after(fn: () => Promise<void>): void },
  args: string[],
  env: NodeJS.ProcessEnv,
  { ownGroup = true }: { ownGroup?: boolean } = {},
): CliProcess {
  const child = spawn(process.execPath, [CLI, ...args], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'], detached: ownGroup });
  let stdout = '';
  let stderr = '';
  let exitStatus: ExitStatus | null = null;
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const exited = new Promise<ExitStatus>((resolve) => {
    child.once('close', (code, signal) => {
      exitStatus = { code, signal };
      resolve(exitStatus);
    });
    child.once('error', () => {
      exitStatus = { code: null, signal: null };
      resolve(exitStatus);
    });
  });
  scope.after(async () => {
    if (ownGroup) killGroup(child.pid);
    else if (!exitStatus) child.kill('SIGKILL');
    await Promise.race([exited, sleep(5000, null, { ref: false })]);
  });

  const proc: CliProcess = {
    child,
    get stdout() {
      return stdout;
    },
    get stderr() {
      return stderr;
    },
    exited,
    get exitStatus() {
      return exitStatus;
    },
    async waitExit(ms) {
      const status = await Promise.race([exited, sleep(ms, null, { ref: false })]);
      if (!status) throw new Error(`the CLI did not exit within ${ms} ms; stderr:\n${stderr}`);
      return status;
    },
    async waitStderr(pattern, ms, from = 0) {
      const deadline = Date.now() + ms;
      while (!pattern.test(stderr.slice(from))) {
        if (exitStatus) throw new Error(`the CLI exited (${JSON.stringify(exitStatus)}) before stderr matched ${pattern}; stderr:\n${stderr}`);
        if (Date.now() > deadline) throw new Error(`stderr did not match ${pattern} within ${ms} ms; stderr:\n${stderr}`);
        await sleep(25);
      }
    },
  };
  return proc;
}

/** SIGKILL to the whole process group led by `pid`, if any of it is still there. */
export function killGroup(pid: number | undefined): void {
  if (pid === undefined) return;
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    // already gone
  }
}

/** Whether any process of the group led by `pid` is still alive. */
export function groupAlive(pid: number): boolean {
  try {
    process.kill(-pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Runs the CLI to completion (killed after `ms`): for commands that are expected to exit by themselves. */
export async function runCli(t: TestContext, args: string[], env: NodeJS.ProcessEnv, ms = 10_000): Promise<ExitStatus & { stdout: string; stderr: string }> {
  const proc = spawnCli(t, args, env);
  const status = await proc.waitExit(ms);
  return { ...status, stdout: proc.stdout, stderr: proc.stderr };
}

/** Polls `GET {base}{route}` until `accept` takes the response, failing after `ms` or when `proc` exits. */
export async function pollUntil(
  base: string,
  route: string,
  accept: (status: number, body: string) => boolean,
  ms: number,
  proc?: CliProcess,
): Promise<{ status: number; body: string }> {
  const deadline = Date.now() + ms;
  let last = 'no answer yet';
  for (;;) {
    if (proc?.exitStatus) throw new Error(`the CLI exited (${JSON.stringify(proc.exitStatus)}) while polling ${route}; stderr:\n${proc.stderr}`);
    try {
      const response = await fetch(base + route, { signal: AbortSignal.timeout(1000) });
      const body = await response.text();
      if (accept(response.status, body)) return { status: response.status, body };
      last = `${response.status} ${body}`;
    } catch (error) {
      last = String(error);
    }
    if (Date.now() > deadline) throw new Error(`GET ${route} not as expected within ${ms} ms (last: ${last}); stderr:\n${proc?.stderr ?? ''}`);
    await sleep(50);
  }
}

/** Waits until `/healthz` answers 200. */
export async function waitHealthy(base: string, proc: CliProcess, ms = 15_000): Promise<void> {
  await pollUntil(base, '/healthz', (status) => status === 200, ms, proc);
}
