/**
 * A Wyoming client written from the protocol's documentation (a JSON header line, then `data_length` bytes of JSON
 * data and `payload_length` bytes of payload), apart from voxd's own reader, so the two check each other.
 */
import { execFile, spawn, spawnSync } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';
import readline from 'node:readline';
import { promisify } from 'node:util';
import { PYTHON, ROOT } from './paths.js';

export interface ClientEvent {
  type: string;
  data: Record<string, unknown>;
  payload: Buffer | null;
}

export interface WyomingClient {
  send(type: string, data?: Record<string, unknown>, payload?: Buffer): void;
  /** Raw bytes, for malformed input. */
  write(bytes: Buffer | string): void;
  /** The next event; rejects when the connection closes first or after `ms`. */
  next(ms?: number): Promise<ClientEvent>;
  /** Events until one of `type` (included). */
  until(type: string, ms?: number): Promise<ClientEvent[]>;
  /** Resolves once the server closed the connection. */
  closed: Promise<void>;
  close(): void;
}

export async function connectWyoming(port: number, host = '127.0.0.1'): Promise<WyomingClient> {
  const socket = net.connect(port, host);
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  let buffered = Buffer.alloc(0);
  const events: ClientEvent[] = [];
  const waiters: ((event: ClientEvent | null) => void)[] = [];
  let ended = false;
  const deliver = (event: ClientEvent | null): void => {
    const waiter = waiters.shift();
    if (waiter) waiter(event);
    else if (event) events.push(event);
  };
  const parse = (): void => {
    for (;;) {
      const newline = buffered.indexOf(0x0a);
      if (newline < 0) return;
      const header = JSON.parse(buffered.subarray(0, newline).toString('utf8')) as Record<string, unknown>;
      const dataLength = (header.data_length as number | undefined) ?? 0;
      const payloadLength = (header.payload_length as number | undefined) ?? 0;
      if (buffered.length < newline + 1 + dataLength + payloadLength) return;
      const dataStart = newline + 1;
      const data = {
        ...((header.data as Record<string, unknown> | undefined) ?? {}),
        ...(dataLength > 0 ? (JSON.parse(buffered.subarray(dataStart, dataStart + dataLength).toString('utf8')) as Record<string, unknown>) : {}),
      };
      const payload = payloadLength > 0 ? Buffer.from(buffered.subarray(dataStart + dataLength, dataStart + dataLength + payloadLength)) : null;
      buffered = buffered.subarray(dataStart + dataLength + payloadLength);
      deliver({ type: header.type as string, data, payload });
    }
  };
  socket.on('data', (chunk: Buffer) => {
    buffered = Buffer.concat([buffered, chunk]);
    parse();
  });
  const closed = new Promise<void>((resolve) =>
    socket.once('close', () => {
      ended = true;
      while (waiters.length > 0) deliver(null);
      resolve();
    }),
  );
  socket.on('error', () => undefined);
  const client: WyomingClient = {
    send(type, data = {}, payload) {
      const body = Object.keys(data).length > 0 ? Buffer.from(JSON.stringify(data)) : null;
      const header = { type, version: '1.8.0', ...(body ? { data_length: body.length } : {}), ...(payload?.length ? { payload_length: payload.length } : {}) };
      socket.write(Buffer.concat([Buffer.from(`${JSON.stringify(header)}\n`), ...(body ? [body] : []), ...(payload?.length ? [payload] : [])]));
    },
    write(bytes) {
      socket.write(bytes);
    },
    next(ms = 30_000) {
      const ready = events.shift();
      if (ready) return Promise.resolve(ready);
      if (ended) return Promise.reject(new Error('the server closed the connection'));
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no event within ${ms} ms`)), ms);
        waiters.push((event) => {
          clearTimeout(timer);
          if (event) resolve(event);
          else reject(new Error('the server closed the connection'));
        });
      });
    },
    async until(type, ms = 30_000) {
      const seen: ClientEvent[] = [];
      for (;;) {
        const event = await client.next(ms);
        seen.push(event);
        if (event.type === type) return seen;
      }
    },
    closed,
    close() {
      socket.destroy();
    },
  };
  return client;
}

/** A change a zeroconf browser saw: a service resolved (`added`) or gone (`removed`). */
export interface ZeroconfChange {
  event: 'added' | 'removed';
  /** The full instance name, as `voxd-host._wyoming._tcp.local.`. */
  name: string;
  port?: number;
  addresses?: string[];
}

export interface ZeroconfBrowser {
  /** The first change (seen already or still to come) that `match` accepts; rejects after `ms`. */
  change(match: (change: ZeroconfChange) => boolean, ms: number): Promise<ZeroconfChange>;
  seen: ZeroconfChange[];
  close(): Promise<void>;
}

const BROWSE_SCRIPT = path.join(ROOT, 'test', 'helpers', 'zeroconf-browse.py');

/** Why Home Assistant's mDNS library cannot browse here (a skip message), or false when it can. */
export function zeroconfBrowserUnavailable(): string | false {
  const probe = spawnSync(PYTHON, ['-c', 'import zeroconf'], { encoding: 'utf8' });
  return probe.status === 0 ? false : `${PYTHON} cannot import zeroconf (Debian: apt-get install python3-zeroconf)`;
}

/** Browses for `_wyoming._tcp` with python-zeroconf (test/helpers/zeroconf-browse.py), once it is browsing. */
export async function browseWyoming(): Promise<ZeroconfBrowser> {
  const child = spawn(PYTHON, [BROWSE_SCRIPT], { stdio: ['pipe', 'pipe', 'inherit'] });
  const seen: ZeroconfChange[] = [];
  const waiters = new Set<() => void>();
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  let onReady!: () => void;
  const ready = new Promise<void>((resolve) => (onReady = resolve));
  readline.createInterface({ input: child.stdout }).on('line', (line) => {
    const change = JSON.parse(line) as ZeroconfChange | { event: 'ready' };
    if (change.event === 'ready') return onReady();
    seen.push(change);
    for (const waiter of waiters) waiter();
  });
  await Promise.race([ready, exited.then(() => Promise.reject(new Error(`${BROWSE_SCRIPT} exited before browsing`)))]);
  return {
    seen,
    change(match, ms) {
      return new Promise((resolve, reject) => {
        const check = (): void => {
          const found = seen.find(match);
          if (!found) return;
          waiters.delete(check);
          clearTimeout(timer);
          resolve(found);
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`no such zeroconf change within ${ms} ms; seen: ${JSON.stringify(seen)}`));
        }, ms);
        waiters.add(check);
        check();
      });
    },
    async close() {
      child.stdin.end();
      await exited;
    },
  };
}

/**
 * The python that runs the protocol's reference implementation (the `wyoming` package, which Home Assistant's
 * integration is built on): `VOXD_TEST_WYOMING_PYTHON`, else Debian's. Neither Debian nor npm packages it, so a
 * fresh machine has it only where someone installed it (docs/building.md).
 */
const REFERENCE_PYTHON = process.env.VOXD_TEST_WYOMING_PYTHON ?? PYTHON;
const REFERENCE_SCRIPT = path.join(ROOT, 'test', 'helpers', 'wyoming-reference.py');

/** Why the reference implementation cannot run here (a skip message), or false when it can. */
export function wyomingReferenceUnavailable(): string | false {
  const probe = spawnSync(REFERENCE_PYTHON, ['-c', 'from wyoming.tts import SynthesizeStart'], { encoding: 'utf8' });
  return probe.status === 0
    ? false
    : `${REFERENCE_PYTHON} cannot import wyoming 1.7+ (pip install wyoming in a virtual environment; VOXD_TEST_WYOMING_PYTHON=its python)`;
}

/** What test/helpers/wyoming-reference.py reports after driving the listener on `port` (it says what each part is). */
export interface WyomingReferenceReport {
  info: {
    asr: { name: string; supports_transcript_streaming: boolean; models: { name: string; installed: boolean; languages: string[] }[] };
    tts: { name: string; supports_synthesize_streaming: boolean; voices: { name: string; installed: boolean; languages: string[] }[] };
    satellite: boolean;
  };
  transcripts: Record<'16000' | '22050', { events: string[]; chunks: string[]; text: string; language: string }>;
  speech: { text: string; rate: number; width: number; channels: number; chunks: number };
  streamed: { groups: { rate: number; chunks: number }[] };
  error: { text: string; code: string; closed: boolean };
}

/** Runs the reference client against the listener on `port` (asynchronously: the server may be in this process); its audio files go to `outDir`. */
export async function runWyomingReference(port: number, clip: string, voice: string, outDir: string): Promise<WyomingReferenceReport> {
  const { stdout } = await promisify(execFile)(REFERENCE_PYTHON, [REFERENCE_SCRIPT, String(port), clip, voice, outDir], { timeout: 120_000 });
  return JSON.parse(stdout) as WyomingReferenceReport;
}
