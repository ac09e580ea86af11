/**
 * What a hostile or unlucky client does to a running voxd, each as a probe that returns what it saw: the
 * regression tests of test/server/robustness.test.ts assert on these, and bench/hostile.ts prints them against a server
 * of its own.
 */
import net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import WebSocket from 'ws';

export interface Reply {
  status: number;
  /** The error envelope's code, when there is one. */
  code: string | null;
  headers: Headers;
  bytes: number;
  ms: number;
}

/** POSTs `body` as JSON and reads the whole answer. */
export async function postJson(base: string, route: string, body: unknown, headers: Record<string, string> = {}): Promise<Reply> {
  const started = performance.now();
  const response = await fetch(base + route, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
  const data = Buffer.from(await response.arrayBuffer());
  return { status: response.status, code: envelopeCode(data), headers: response.headers, bytes: data.length, ms: performance.now() - started };
}

export function envelopeCode(data: Buffer): string | null {
  try {
    return (JSON.parse(data.toString('utf8')) as { error?: { code?: string } }).error?.code ?? null;
  } catch {
    return null;
  }
}

export async function healthy(base: string): Promise<boolean> {
  return fetch(`${base}/healthz`, { signal: AbortSignal.timeout(5000) }).then(
    (r) => r.ok,
    () => false,
  );
}

/**
 * Writes `request` on a fresh connection and returns every byte the server sent until it closed (or `ms` passed),
 * and when the connection closed.
 */
export async function rawExchange(base: string, request: string | Buffer, ms = 3000): Promise<{ text: string; closed: boolean; closedAfterMs: number }> {
  const { hostname, port } = new URL(base);
  const started = performance.now();
  return new Promise((resolve) => {
    const socket = net.connect(Number(port), hostname, () => socket.write(request));
    let text = '';
    const finish = (closed: boolean): void => {
      clearTimeout(timer);
      socket.destroy();
      resolve({ text, closed, closedAfterMs: performance.now() - started });
    };
    const timer = setTimeout(() => finish(false), ms);
    socket.on('data', (chunk) => (text += chunk.toString('latin1')));
    socket.on('error', () => undefined);
    socket.on('close', () => finish(true));
  });
}

/** The status lines of every response in a raw exchange. */
export function statusLines(text: string): string[] {
  return [...text.matchAll(/HTTP\/1\.1 (\d{3})[^\r\n]*/g)].map((m) => m[1] as string);
}

/**
 * Requests that are unusual or malformed on the wire, each with node:http's answer and uWebSockets.js 20.30's
 * (null: none: its parser keeps waiting for a request it can take, and closes the connection at its idle timeout;
 * docs/deploy.md). A large head sent in one write is read whole by uWS, which bounds only heads that come in pieces
 * (to 4 KiB).
 */
export const UNUSUAL_REQUESTS: Readonly<Record<string, { request: string; nodeStatus: string; uwsStatus: string | null }>> = {
  'HTTP/1.0': { request: 'GET /healthz HTTP/1.0\r\n\r\n', nodeStatus: '200', uwsStatus: null },
  'HTTP/1.1 without Host': { request: 'GET /healthz HTTP/1.1\r\n\r\n', nodeStatus: '400', uwsStatus: null },
  'obs-fold': { request: 'GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: a\r\n b\r\n\r\n', nodeStatus: '400', uwsStatus: null },
  'space before a colon': { request: 'GET /healthz HTTP/1.1\r\nHost: x\r\nX-A : a\r\n\r\n', nodeStatus: '400', uwsStatus: null },
  'bare LF': { request: 'GET /healthz HTTP/1.1\nHost: x\n\n', nodeStatus: '400', uwsStatus: null },
  'bare CR': { request: 'GET /healthz HTTP/1.1\r\nHost: x\rX-A: a\r\n\r\n', nodeStatus: '400', uwsStatus: null },
  'NUL in a header': { request: 'GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: a\0b\r\n\r\n', nodeStatus: '400', uwsStatus: null },
  'header without a colon': { request: 'GET /healthz HTTP/1.1\r\nHost: x\r\nX-A\r\n\r\n', nodeStatus: '400', uwsStatus: null },
  '120 headers': {
    request: `GET /healthz HTTP/1.1\r\nHost: x\r\n${Array.from({ length: 120 }, (_, i) => `X-H${i}: v\r\n`).join('')}\r\n`,
    nodeStatus: '200',
    uwsStatus: null,
  },
  'a 20 KiB head': { request: `GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: ${'a'.repeat(20 * 1024)}\r\n\r\n`, nodeStatus: '431', uwsStatus: '200' },
  'absolute-form target': { request: 'GET http://x/healthz HTTP/1.1\r\nHost: x\r\n\r\n', nodeStatus: '200', uwsStatus: null },
  'OPTIONS *': { request: 'OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n', nodeStatus: '404', uwsStatus: null },
};

/** A request whose answer takes a while (on a voxd server: a speech request) with a quick one pipelined behind it. */
export function pipelinedBehindSlow(slow: string): string {
  return `${slow}GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`;
}

/** What a client that holds connections open saw of them. */
export interface HeldConnections {
  /** How many the server closed within the time given. */
  closed: number;
  /** When the last of those closed. */
  slowestCloseMs: number;
  /** How many got each answer before they closed, by status (`none` for no answer). */
  answers: Record<string, number>;
}

/**
 * Opens `count` connections that send nothing (`dribble` false) or a request head one header line every 2 s, and
 * waits up to `seconds` for the server to close them.
 */
export async function heldConnections(base: string, count: number, dribble: boolean, seconds: number): Promise<HeldConnections> {
  const { hostname, port } = new URL(base);
  const started = performance.now();
  const outcomes = await Promise.all(
    Array.from(
      { length: count },
      () =>
        new Promise<{ closedAfterMs: number | null; answer: string }>((resolve) => {
          const socket = net.connect(Number(port), hostname);
          let answer = '';
          let lines = 0;
          const dribbler = dribble ? setInterval(() => socket.write(lines++ === 0 ? 'GET /healthz HTTP/1.1\r\n' : `X-Line-${lines}: a\r\n`), 2000) : null;
          const finish = (closedAfterMs: number | null): void => {
            clearTimeout(deadline);
            if (dribbler) clearInterval(dribbler);
            socket.destroy();
            resolve({ closedAfterMs, answer: statusLines(answer)[0] ?? 'none' });
          };
          const deadline = setTimeout(() => finish(null), seconds * 1000);
          socket.on('data', (chunk) => (answer += chunk.toString('latin1')));
          socket.on('error', () => undefined);
          socket.on('close', () => finish(performance.now() - started));
        }),
    ),
  );
  const closedAfter = outcomes.flatMap((o) => (o.closedAfterMs === null ? [] : [o.closedAfterMs]));
  const answers: Record<string, number> = {};
  for (const { answer } of outcomes) answers[answer] = (answers[answer] ?? 0) + 1;
  return { closed: closedAfter.length, slowestCloseMs: Math.max(0, ...closedAfter), answers };
}

/** `count` connections opened and kept, sending nothing (the caller closes them). */
export async function openConnections(base: string, count: number): Promise<net.Socket[]> {
  const { hostname, port } = new URL(base);
  return Promise.all(
    Array.from(
      { length: count },
      () =>
        new Promise<net.Socket>((resolve) => {
          const socket = net.connect(Number(port), hostname, () => resolve(socket));
          socket.on('error', () => undefined);
        }),
    ),
  );
}

/**
 * Opens `count` connections at once that send nothing and never close their side (a flood past the connection
 * limit): once the server answered, reset or closed each, how many got each answer (`reset`, `closed` for none),
 * and the sockets, still open, for the caller to close.
 */
export async function halfOpenFlood(base: string, count: number): Promise<{ answers: Record<string, number>; sockets: net.Socket[] }> {
  const { hostname, port } = new URL(base);
  const sockets: net.Socket[] = [];
  const outcomes = await Promise.all(
    Array.from(
      { length: count },
      () =>
        new Promise<string>((resolve) => {
          const socket = net.connect({ port: Number(port), host: hostname, allowHalfOpen: true });
          sockets.push(socket);
          let answer = '';
          socket.on('data', (chunk) => {
            answer += chunk.toString('latin1');
            if (answer.includes('\r\n\r\n')) resolve(statusLines(answer)[0] ?? 'garbled');
          });
          socket.on('error', () => resolve(statusLines(answer)[0] ?? 'reset'));
          socket.on('end', () => resolve(statusLines(answer)[0] ?? 'closed'));
          socket.on('close', () => resolve(statusLines(answer)[0] ?? 'closed'));
        }),
    ),
  );
  const answers: Record<string, number> = {};
  for (const answer of outcomes) answers[answer] = (answers[answer] ?? 0) + 1;
  return { answers, sockets };
}

/**
 * Sends a POST head with `Expect: 100-continue` declaring `declaredBytes` (the body's length by default), and
 * `body` only once the server asks for it: the status lines the server sent (interim ones included) until the
 * final answer was whole, and whether the server then closed the connection.
 */
export async function expectContinue(
  base: string,
  route: string,
  body: string,
  declaredBytes = Buffer.byteLength(body),
  contentType = 'application/json',
): Promise<{ statuses: string[]; closed: boolean }> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve) => {
    const socket = net.connect(Number(port), hostname, () =>
      socket.write(`POST ${route} HTTP/1.1\r\nHost: x\r\nContent-Type: ${contentType}\r\nExpect: 100-continue\r\nContent-Length: ${declaredBytes}\r\n\r\n`),
    );
    let text = '';
    let closed = false;
    let settled = false;
    const finish = (): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      resolve({ statuses: statusLines(text), closed });
    };
    const timer = setTimeout(finish, 5000);
    socket.on('data', (chunk) => {
      const invited = text === '' && chunk.toString('latin1').startsWith('HTTP/1.1 100 ');
      text += chunk.toString('latin1');
      if (invited) socket.write(body);
      // the final answer is whole: a moment more to see whether the server closes the connection
      const final = /HTTP\/1\.1 [2-5]\d\d [^]*?\r\n\r\n/.exec(text);
      const length = Number(/\r\ncontent-length: *(\d+)/i.exec(final?.[0] ?? '')?.[1] ?? NaN);
      if (final && text.length >= final.index + final[0].length + length) setTimeout(finish, 200);
    });
    socket.on('error', () => undefined);
    socket.on('end', () => (closed = true));
    socket.on('close', () => {
      closed = true;
      finish();
    });
  });
}

/**
 * A request whose Content-Length headers disagree, with a second request behind the shorter body: the server must
 * answer 400 (or drop the connection) and never serve the hidden request.
 */
export async function conflictingContentLength(base: string): Promise<{ statuses: string[]; closed: boolean }> {
  const body = '{"model_name":"x"}';
  const hidden = 'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n';
  const request =
    `POST /v1/models HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n` +
    `Content-Length: ${body.length}\r\nContent-Length: ${body.length + hidden.length}\r\n\r\n${body}${hidden}`;
  const { text, closed } = await rawExchange(base, request);
  return { statuses: statusLines(text), closed };
}

/**
 * Streams an upload whose headers declare `megabytes` MiB (or that is sent chunked) to a route with a smaller
 * limit, as fast as the socket takes it: the client must read the 413, not a reset.
 */
export async function oversizedUpload(base: string, megabytes: number, declareLength: boolean): Promise<string> {
  const { hostname, port } = new URL(base);
  const size = megabytes * 1024 * 1024;
  const piece = Buffer.alloc(256 * 1024, 0x41);
  return new Promise((resolve) => {
    const socket = net.connect(Number(port), hostname);
    let answer = '';
    let settled = false;
    const finish = (outcome: string): void => {
      if (settled) return;
      settled = true;
      socket.destroy();
      resolve(outcome);
    };
    socket.on('data', (chunk) => {
      answer += chunk.toString('latin1');
      if (/\r\n\r\n[\s\S]*\}\}/.test(answer)) finish(statusLines(answer)[0] ?? 'garbled');
    });
    socket.on('error', (error: NodeJS.ErrnoException) => finish(answer ? (statusLines(answer)[0] ?? 'garbled') : `reset (${error.code})`));
    socket.on('close', () => finish(answer ? (statusLines(answer)[0] ?? 'garbled') : 'closed without an answer'));
    socket.write(
      'POST /v1/audio/transcriptions HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=b\r\n' +
        (declareLength ? `Content-Length: ${size}\r\n\r\n` : 'Transfer-Encoding: chunked\r\n\r\n'),
    );
    const fileHead = '--b\r\nContent-Disposition: form-data; name="file"; filename="big.wav"\r\n\r\n';
    socket.write(declareLength ? fileHead : `${fileHead.length.toString(16)}\r\n${fileHead}\r\n`);
    let sent = fileHead.length;
    const pump = (): void => {
      while (sent < size && !settled) {
        sent += piece.length;
        const framed = declareLength ? piece : Buffer.concat([Buffer.from(`${piece.length.toString(16)}\r\n`), piece, Buffer.from('\r\n')]);
        if (!socket.write(framed)) return void socket.once('drain', pump);
      }
    };
    pump();
    setTimeout(() => finish('no answer within 20 s'), 20_000).unref();
  });
}

/**
 * Text whose speech (about 18 MB of WAV from the built-in voice) is more than the kernel's socket buffers hold on
 * loopback (about 4 MB), so a server streaming it must wait on a client that stops reading. 9000 characters.
 */
export function longSpeechText(): string {
  return Array.from({ length: 150 }, (_, i) => `This is sentence number ${i + 1} of a text that keeps going.`).join(' ');
}

/**
 * A streamed speech response whose client stops reading for `pauseSeconds` after the first bytes (an audio player
 * on pause), then reads on: the body it gets, and whether it was whole (the chunked body's last chunk arrived).
 */
export async function pausedSpeechStream(base: string, input: string, pauseSeconds: number): Promise<{ body: Buffer; whole: boolean; ms: number }> {
  const { hostname, port } = new URL(base);
  const json = JSON.stringify({ model: 'tts-1', input, response_format: 'wav', stream: true });
  const started = performance.now();
  return new Promise((resolve) => {
    const socket = net.connect(Number(port), hostname);
    const received: Buffer[] = [];
    let paused = false;
    const finish = (): void => {
      const raw = Buffer.concat(received);
      const { body, whole } = dechunk(raw.subarray(raw.indexOf('\r\n\r\n') + 4));
      socket.destroy();
      resolve({ body, whole, ms: performance.now() - started });
    };
    socket.on('data', (chunk) => {
      received.push(chunk);
      if (!paused) {
        paused = true;
        socket.pause();
        setTimeout(() => socket.resume(), pauseSeconds * 1000);
      }
      if (chunk.subarray(-5).toString('latin1') === '0\r\n\r\n') finish();
    });
    socket.on('error', () => undefined);
    socket.on('close', finish);
    socket.write(`POST /v1/audio/speech HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(json)}\r\n\r\n${json}`);
  });
}

/** The payload of a chunked transfer coding, and whether its terminating chunk came. */
function dechunk(raw: Buffer): { body: Buffer; whole: boolean } {
  const parts: Buffer[] = [];
  let at = 0;
  for (;;) {
    const lineEnd = raw.indexOf('\r\n', at);
    if (lineEnd < 0) return { body: Buffer.concat(parts), whole: false };
    const size = Number.parseInt(raw.toString('latin1', at, lineEnd), 16);
    if (!Number.isFinite(size)) return { body: Buffer.concat(parts), whole: false };
    if (size === 0) return { body: Buffer.concat(parts), whole: true };
    parts.push(raw.subarray(lineEnd + 2, Math.min(raw.length, lineEnd + 2 + size)));
    at = lineEnd + 2 + size + 2;
    if (at > raw.length) return { body: Buffer.concat(parts), whole: false };
  }
}

/** Opens a WebSocket and reports how the upgrade went: 101, or the refusal's status and error code. */
export async function wsUpgrade(url: string, headers: Record<string, string> = {}): Promise<{ status: number; code: string | null }> {
  const socket = new WebSocket(url, { headers });
  socket.on('error', () => undefined);
  return new Promise((resolve) => {
    socket.once('open', () => {
      socket.close();
      resolve({ status: 101, code: null });
    });
    socket.once('unexpected-response', (_request, response) => {
      let body = '';
      response.on('data', (chunk: Buffer) => (body += chunk.toString()));
      response.on('end', () => {
        socket.terminate();
        resolve({ status: response.statusCode ?? 0, code: envelopeCode(Buffer.from(body)) });
      });
    });
  });
}

/** A WS /v1/realtime client that keeps every event it got. */
export class RealtimeProbe {
  readonly events: Record<string, unknown>[] = [];
  closeCode: number | null = null;
  private readonly socket: WebSocket;
  private readonly opened: Promise<void>;

  constructor(url: string) {
    this.socket = new WebSocket(url);
    this.socket.on('error', () => undefined);
    this.socket.on('message', (data) => this.events.push(JSON.parse(String(data)) as Record<string, unknown>));
    this.socket.on('close', (code) => (this.closeCode = code));
    this.opened = new Promise((resolve, reject) => {
      this.socket.once('open', () => resolve());
      this.socket.once('close', () => reject(new Error('closed before it opened')));
    });
  }

  async send(message: string | object): Promise<void> {
    await this.opened;
    this.socket.send(typeof message === 'string' ? message : JSON.stringify(message));
  }

  /** Takes out the first event of `type` received so far or within `ms`; fails when the socket closes first. */
  async next(type: string, ms = 10_000): Promise<Record<string, unknown>> {
    const deadline = performance.now() + ms;
    for (;;) {
      const found = this.events.find((e) => e.type === type);
      if (found) {
        this.events.splice(this.events.indexOf(found), 1);
        return found;
      }
      if (this.closeCode !== null) throw new Error(`the socket closed (${this.closeCode}) before a ${type} event`);
      if (performance.now() > deadline) throw new Error(`no ${type} event within ${ms} ms`);
      await sleep(10);
    }
  }

  close(): void {
    this.socket.close();
  }
}
