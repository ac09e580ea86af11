/**
 * A real voxd server for the fuzz targets that talk HTTP or WebSocket: `voxd serve` in a child process, so that a
 * crash is a finding (the child exits) and not the fuzzer's own death; on a free loopback port, with a hub that
 * cannot be reached, caches and logs in a scratch directory, and limits that keep each case cheap. One server per
 * transport (uWebSockets.js and node:http), each started on first use and again after a finding.
 */
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { TransportName } from '../../src/http/transport.js';
import { loadUws } from '../../src/http/uws.js';
import { healthy } from '../helpers/hostile.js';
import { SILERO_V6 } from '../helpers/paths.js';
import { cliEnv, freePort, spawnCli, waitHealthy, type CliProcess } from '../helpers/process.js';
import type { Finding } from './target.js';
import { tail } from './worker-child.js';

/** Limits that keep every case cheap: short texts, small uploads, little audio, few sessions. */
const SERVER_FLAGS = [
  // the console then holds what a finding needs: warnings and errors, not a line per request
  ['--log-level', 'warn'],
  ['--max-upload-mb', '2'],
  ['--max-input-chars', '600'],
  ['--max-audio-seconds', '20'],
  ['--max-separation-seconds', '20'],
  ['--max-realtime-sessions', '4'],
  // the file the default VAD model ID names: with the hub out of reach, the default would be built from ONNX first
  ['--vad-model', SILERO_V6],
].flat();

const START_MS = 30_000;
/**
 * An error the server logged (pino-pretty's console line, and the indented lines of its `err` after it): an
 * unexpected failure, whatever the client was told.
 */
const ERROR_ENTRY = /^\[[\d:.]+\] (ERROR|FATAL): .*(\n {4}.*)*/m;

/** The transports voxd can serve on here: node:http always, uWebSockets.js where its binary loads. */
export const TRANSPORTS: readonly TransportName[] = (() => {
  try {
    loadUws();
    return ['uws', 'node'];
  } catch {
    return ['node'];
  }
})();

export class FuzzServer {
  private proc: CliProcess | null = null;
  private cleanups: (() => Promise<void>)[] = [];
  private portNumber = 0;
  /** How much of the server's stderr was already searched for error lines. */
  private errorsSeen = 0;

  constructor(
    readonly transport: TransportName,
    private readonly scratch: string,
    /** Flags of the target's own, after the shared ones. */
    private readonly extraFlags: readonly string[] = [],
  ) {}

  get port(): number {
    return this.portNumber;
  }

  get base(): string {
    return `http://127.0.0.1:${this.portNumber}`;
  }

  get wsBase(): string {
    return `ws://127.0.0.1:${this.portNumber}`;
  }

  async start(): Promise<void> {
    this.portNumber = await freePort();
    const args = [
      'serve',
      '--host',
      '127.0.0.1',
      '--port',
      String(this.portNumber),
      '--transport',
      this.transport,
      '--log-dir',
      path.join(this.scratch, 'logs'),
    ];
    // in this process's group, so that a Ctrl-C of `npm run fuzz` stops it too
    this.proc = spawnCli({ after: (fn) => void this.cleanups.push(fn) }, [...args, ...SERVER_FLAGS, ...this.extraFlags], cliEnv(this.scratch), {
      ownGroup: false,
    });
    this.errorsSeen = 0;
    await waitHealthy(this.base, this.proc, START_MS);
  }

  async stop(): Promise<void> {
    this.proc = null;
    for (const cleanup of this.cleanups.splice(0)) await cleanup();
  }

  /** A fresh server, after a finding: whatever state the case left is gone. */
  async restart(): Promise<void> {
    await this.stop();
    await this.start();
  }

  /**
   * What the last case did to the server: it died (crash), it no longer answers /healthz (hang), or it logged an
   * error (failure); null when none of these. The caller restarts it after a finding.
   */
  async check(): Promise<Finding | null> {
    const proc = this.proc;
    if (!proc) throw new Error('the server is not running');
    if (!(await healthy(this.base))) {
      // a process that is going down may still take a moment to be gone
      const status = proc.exitStatus ?? (await Promise.race([proc.exited, sleep(2000, null)]));
      if (status) return { kind: 'crash', detail: `the server died (${status.signal ?? `exit code ${status.code}`}): ${tail(proc.stderr)}` };
      return { kind: 'hang', detail: 'the server no longer answers /healthz' };
    }
    const logged = proc.stderr.slice(this.errorsSeen);
    this.errorsSeen = proc.stderr.length;
    const error = ERROR_ENTRY.exec(logged)?.[0];
    return error ? { kind: 'failure', detail: `the server logged: ${error.replace(/\s+/g, ' ').slice(0, 600)}` } : null;
  }
}

/** A server per transport, started on first use; all of them share one scratch directory, removed at the end. */
export class FuzzServers {
  private readonly servers = new Map<TransportName, FuzzServer>();
  private scratch: string | null = null;

  /** `extraFlags`: what a target needs of its servers beyond the shared limits. */
  constructor(private readonly extraFlags: readonly string[] = []) {}

  /** The running server of `transport` (node:http's where uWebSockets.js does not load: a crasher found elsewhere). */
  async get(transport: TransportName): Promise<FuzzServer> {
    const name = TRANSPORTS.includes(transport) ? transport : 'node';
    let server = this.servers.get(name);
    if (!server) {
      this.scratch ??= await fsp.mkdtemp(path.join(os.tmpdir(), 'voxd-fuzz-'));
      const dir = path.join(this.scratch, name);
      await fsp.mkdir(dir, { recursive: true });
      server = new FuzzServer(name, dir, this.extraFlags);
      await server.start().catch(async (error: unknown) => {
        await server?.stop();
        throw error;
      });
      this.servers.set(name, server);
    }
    return server;
  }

  async close(): Promise<void> {
    for (const server of this.servers.values()) await server.stop();
    this.servers.clear();
    if (this.scratch) await fsp.rm(this.scratch, { recursive: true, force: true });
    this.scratch = null;
  }
}
