/**
 * The uWebSockets.js transport: the only code that touches uWS objects. uWS is fast but unforgiving, and this
 * file enforces its rules: `onAborted` and `onData` attached synchronously in the request handler, request data
 * copied before the handler returns, every write outside a uWS callback corked, nothing touched after an abort or
 * after completion (uWS crashes on it), big bodies and streams through `onWritable` backpressure.
 *
 * uWS closes a connection about 10 s after a write it could not pass on, unless the client drains it. A client
 * may stop reading for a while (an audio player on pause), so while the client takes nothing a response queues what
 * it is given and every 2 s hands uWS queued bytes until one write is held back again, which restarts uWS's timer;
 * it gives up, cutting the response, after MAX_STALL_SECONDS.
 */
import { STATUS_CODES } from 'node:http';
import { emptyHeaders, type RequestHead } from './request.js';
import { MAX_STALL_SECONDS, type ResponseChannel, type Transport, type TransportSocket, type WsHandlers, type WsOptions } from './transport.js';
import type { UwsApp, UwsListenSocket, UwsModule, UwsRequest, UwsResponse, WebSocket } from './uws.js';

/** Stream bytes a stalled response takes before `write()` asks the producer to wait. */
const STALLED_QUEUE_BYTES = 1024 * 1024;
/** Well under uWS's 10 s timeout: how often a stalled response hands uWS what waits. */
const KEEP_ALIVE_MS = 2000;
/** Larger than uWS's 16 KiB cork buffer, so each write's outcome is known at once. */
const KEEP_ALIVE_PIECE_BYTES = 64 * 1024;
/**
 * A body this small goes out with `end`, not `tryEnd`: written corked (as every write here is), it lands in uWS's
 * 16 KiB cork buffer, where `tryEnd` always reports it done too; `end` spares building `tryEnd`'s result array
 * (about a tenth of a small response's cost). The two differ only when the cork buffer is full or the socket
 * already holds unsent bytes, i.e. with a client that pipelines requests and reads no answers: `end` then leaves
 * the small rest to uWS, which drops such a client after its usual 10 s, rather than to the stall handling below.
 */
const SMALL_BODY_BYTES = 4 * 1024;

/** The headers `readRequestHead` is filling (its callback is made once, not per request). */
let collecting: Record<string, string> = emptyHeaders();
function collectHeader(name: string, value: string): void {
  collecting[name] = name in collecting ? `${collecting[name]}, ${value}` : value;
}

/**
 * The method as one of the program's own strings: uWS makes a new one per request, which the Maps it is looked up in
 * (the router's, the metrics') would hash once more and compare by content rather than by reference.
 */
function knownMethod(method: string): string {
  switch (method) {
    case 'GET':
      return 'GET';
    case 'POST':
      return 'POST';
    case 'HEAD':
      return 'HEAD';
    case 'DELETE':
      return 'DELETE';
    case 'OPTIONS':
      return 'OPTIONS';
    default:
      return method;
  }
}

/** Copies what the request offers; the uWS request is invalid once its handler returns. */
function readRequestHead(req: UwsRequest): RequestHead {
  const headers = (collecting = emptyHeaders());
  req.forEach(collectHeader);
  // getQuery() is undefined, not '', when the target has no `?`
  return { method: knownMethod(req.getCaseSensitiveMethod()), path: req.getUrl(), rawQuery: req.getQuery() ?? '', headers };
}

const SETTLED: Promise<void> = Promise.resolve();
const EMPTY = new Uint8Array(0);

/** `200 OK` and the like, made once per status. */
const statusLines = new Map<number, string>();

class UwsChannel implements ResponseChannel {
  readonly #res: UwsResponse;
  /** A HEAD request: its answer has the headers of the GET's, no body. */
  readonly #head: boolean;
  #state: 'open' | 'finished' | 'aborted' = 'open';
  /** Made on first use (most requests never look at their signal): an AbortController costs a few µs. */
  #abort: AbortController | null = null;
  #workCancelled = false;
  /** Whether `onAborted` and `onData` are set on the response (see `attach`). */
  #attached = false;
  /** Still inside uWS's request handler, where uWS has the socket corked already: writes need no `cork` call. */
  #inHandler = true;
  /** `done`, made only when asked for before the response settled (most are answered at once). */
  #done: Promise<void> | null = null;
  #settle: (() => void) | null = null;
  #settled = false;
  #completed = false;
  #bodySink: ((chunk: Buffer, isLast: boolean) => void) | null = null;
  /** A body uWS has not fully taken yet; the rest goes out from the writable handler. */
  #unsentBody: Uint8Array | null = null;
  #writableHandlerSet = false;
  #writableWaiters: (() => void)[] = [];
  /** Stream bytes waiting while the client takes nothing. */
  #queued: Buffer[] = [];
  #queuedBytes = 0;
  /** When the client stopped taking bytes; null while it keeps up. */
  #stalledSince: number | null = null;
  #keepAlive: NodeJS.Timeout | null = null;
  /** end() was called while bytes still queued: the stream ends once they went out. */
  #endWhenDrained = false;

  /** Made inside the uWS request handler; `attach()` must run before that handler returns. */
  constructor(res: UwsResponse, head: boolean) {
    this.#res = res;
    this.#head = head;
  }

  /**
   * Sets the abort and body handlers uWS requires of a response still open when its request handler returns (and
   * delivers the body to only). A response already sent in full needs neither, and may not be touched any more:
   * most requests are answered before their handler returns, so they cost uWS no callbacks at all.
   */
  attach(): void {
    this.#inHandler = false;
    if (this.#state !== 'open' || this.#attached) return;
    this.#attached = true;
    this.#res.onAborted(() => {
      this.#state = 'aborted';
      this.#lost();
    });
    // uWS reuses a chunk's memory once this returns: copied
    this.#res.onData((chunk, isLast) => this.#bodySink?.(Buffer.copyBytesFrom(new Uint8Array(chunk)), isLast));
  }

  /** Settles when the whole response was handed to the connection, or the connection was lost. */
  get done(): Promise<void> {
    if (this.#settled) return SETTLED;
    return (this.#done ??= new Promise((resolve) => (this.#settle = resolve)));
  }

  get signal(): AbortSignal {
    if (!this.#abort) {
      this.#abort = new AbortController();
      if (this.#workCancelled) this.#abort.abort();
    }
    return this.#abort.signal;
  }

  get aborted(): boolean {
    return this.#state === 'aborted';
  }

  get completed(): boolean {
    return this.#completed;
  }

  onBody(sink: (chunk: Buffer, isLast: boolean) => void): void {
    this.#bodySink = sink;
  }

  /** uWS answers `Expect: 100-continue` itself, before the handler runs. */
  bodyWanted(): void {}

  pause(): void {
    this.#use((res) => res.pause());
  }

  resume(): void {
    this.#use((res) => res.resume());
  }

  send(status: number, headers: readonly string[], body: Uint8Array, closeConnection: boolean): void {
    if (this.#state !== 'open') return;
    if (this.#inHandler) this.#sendNow(status, headers, body, closeConnection);
    else this.#res.cork(() => this.#sendNow(status, headers, body, closeConnection));
  }

  /** `send`, corked. */
  #sendNow(status: number, headers: readonly string[], body: Uint8Array, closeConnection: boolean): void {
    const res = this.#res;
    writeHead(res, status, headers);
    if (this.#head) {
      this.#endHead(res, body.byteLength, status, closeConnection);
    } else if (closeConnection) {
      res.end(body, true); // uWS adds `Connection: close`
    } else if (status === 204 || status === 304) {
      res.endWithoutBody(); // no Content-Length for statuses that never have a body
    } else if (body.byteLength <= SMALL_BODY_BYTES) {
      res.end(body);
    } else if (!res.tryEnd(body, body.byteLength)[1]) {
      this.#unsentBody = body;
      this.#stall();
      return;
    }
    this.#complete();
  }

  startStream(status: number, headers: readonly string[], closeConnection: boolean): void {
    if (this.#head) {
      // the head of a stream has no length to give; the stream's writes go nowhere
      if (this.#state !== 'open') return;
      this.#use((res) => {
        writeHead(res, status, headers);
        this.#endHead(res, null, status, closeConnection);
      });
      this.#complete();
      return;
    }
    this.#use((res) => {
      writeHead(res, status, headers);
      // uWS's own end(…, closeConnection) would write its Connection header into a chunked body: said up front
      if (closeConnection) res.writeHeader('connection', 'close');
    });
  }

  /**
   * Ends the answer to a HEAD request, whose head goes out as the GET's would, with its `length` but no body. uWS's
   * `endWithoutBody` writes no Content-Length and cannot close the connection (given a length it writes nothing at
   * all, in this build): a closing answer goes out through `end`, with a length of 0 (only answers to malformed
   * framing and those during shutdown close).
   */
  #endHead(res: UwsResponse, length: number | null, status: number, closeConnection: boolean): void {
    if (closeConnection) {
      res.end(EMPTY, true);
    } else {
      if (length !== null && status !== 204 && status !== 304) res.writeHeader('content-length', String(length));
      res.endWithoutBody();
    }
  }

  write(data: Uint8Array): boolean {
    if (this.#state !== 'open') return true;
    if (this.#stalledSince !== null) {
      this.#queued.push(Buffer.from(data.buffer, data.byteOffset, data.byteLength));
      this.#queuedBytes += data.byteLength;
      return this.#queuedBytes < STALLED_QUEUE_BYTES;
    }
    if (this.#use((res) => res.write(data)) === false) this.#stall();
    return true;
  }

  writable(): Promise<void> {
    if (this.#state !== 'open' || this.#queuedBytes < STALLED_QUEUE_BYTES) return Promise.resolve();
    return new Promise((resolve) => this.#writableWaiters.push(resolve));
  }

  end(): void {
    if (this.#state !== 'open') return;
    if (this.#queuedBytes > 0) {
      this.#endWhenDrained = true; // the writable handler ends it
      return;
    }
    this.#use((res) => res.end());
    this.#complete();
  }

  close(): void {
    if (this.#state !== 'open') return;
    this.#res.close();
    // uWS runs the abort handler, when there is one yet; without, the response is as lost, and may not be touched
    if (this.#state === 'open') {
      this.#state = 'aborted';
      this.#lost();
    }
  }

  cancelWork(): void {
    this.#workCancelled = true;
    this.#abort?.abort();
  }

  /** Runs `fn` with the response corked, unless it was aborted or completed (then `fn` does not run). */
  #use<T>(fn: (res: UwsResponse) => T): T | undefined {
    if (this.#state !== 'open') return undefined;
    if (this.#inHandler) return fn(this.#res);
    let result: T | undefined;
    this.#res.cork(() => {
      result = fn(this.#res);
    });
    return result;
  }

  #complete(): void {
    this.#state = 'finished';
    this.#completed = true;
    this.#unstall();
    this.#markSettled();
  }

  #lost(): void {
    this.#unstall();
    this.cancelWork();
    this.#releaseWriters();
    this.#markSettled();
  }

  #markSettled(): void {
    this.#settled = true;
    this.#settle?.();
  }

  /** The client takes no more for now: watch for writable, and keep the connection alive meanwhile. */
  #stall(): void {
    if (this.#stalledSince !== null) return;
    this.#stalledSince = performance.now();
    this.#use((res) => {
      if (this.#writableHandlerSet) return;
      this.#writableHandlerSet = true;
      res.onWritable((offset) => this.#onWritable(offset));
    });
    this.#keepAlive = setInterval(() => this.#keepConnectionAlive(), KEEP_ALIVE_MS);
  }

  #unstall(): void {
    this.#stalledSince = null;
    if (this.#keepAlive) clearInterval(this.#keepAlive);
    this.#keepAlive = null;
  }

  /**
   * uWS restarts its timer only when a write cannot be passed on at once, so this hands it what waits, piece by
   * piece, until one piece is held back (the kernel's buffers are full: the client really takes nothing).
   */
  #keepConnectionAlive(): void {
    if (this.#stalledSince === null || this.#state !== 'open') return this.#unstall();
    if (performance.now() - this.#stalledSince > MAX_STALL_SECONDS * 1000) {
      this.#unstall();
      this.close();
      return;
    }
    this.#use((res) => {
      const body = this.#unsentBody;
      if (body) {
        for (let offset = res.getWriteOffset(); offset < body.byteLength - 1; offset = res.getWriteOffset()) {
          if (!res.tryEnd(body.subarray(offset, Math.min(offset + KEEP_ALIVE_PIECE_BYTES, body.byteLength - 1)), body.byteLength)[0]) return;
        }
        return;
      }
      // nothing left to send when the queue runs dry: then uWS's own timer ends the connection
      while (this.#queued.length > 0) {
        const head = this.#queued[0] as Buffer;
        const piece = head.subarray(0, KEEP_ALIVE_PIECE_BYTES);
        this.#queued[0] = head.subarray(piece.byteLength);
        if (this.#queued[0].byteLength === 0) this.#queued.shift();
        this.#queuedBytes -= piece.byteLength;
        if (!res.write(piece)) break;
      }
    });
    if (this.#queuedBytes < STALLED_QUEUE_BYTES) this.#releaseWriters();
  }

  #onWritable(offset: number): boolean {
    const body = this.#unsentBody;
    if (body) {
      const [ok, done] = this.#use((res) => res.tryEnd(body.subarray(offset), body.byteLength)) ?? [true, true];
      if (done) {
        this.#unsentBody = null;
        this.#complete();
      }
      return ok;
    }
    const queued = this.#queued.length > 0 ? Buffer.concat(this.#queued) : null;
    this.#queued = [];
    this.#queuedBytes = 0;
    // while a writable handler is set, uWS leaves its buffered bytes alone; the uncork at the end of #use sends them
    const ok = this.#use((res) => (queued ? res.write(queued) : true)) ?? true;
    if (!ok) return false;
    this.#unstall();
    if (this.#endWhenDrained) {
      this.#use((res) => res.end());
      this.#complete();
    }
    this.#releaseWriters();
    return true;
  }

  #releaseWriters(): void {
    const waiters = this.#writableWaiters;
    this.#writableWaiters = [];
    for (const resolve of waiters) resolve();
  }
}

/**
 * Header names, and the values of headers whose values repeat (content types, CORS), as bytes: uWS copies an
 * ArrayBuffer as it is, but converts each string to UTF-8 first (a measure, an allocation, a copy and a free: most
 * of what a header cost), and reaches a Buffer's bytes through its view. Encoded once each, kept per name (one
 * lookup a header; the value last written under a name is compared before its own lookup); bounded, in case a route
 * makes up names or values.
 */
interface HeaderEncoding {
  name: ArrayBuffer;
  /** The encoded values of a header whose values repeat; null for one whose values differ per response. */
  values: Map<string, ArrayBuffer> | null;
  lastValue: string;
  lastValueBytes: ArrayBuffer | null;
}
const headerEncodings = new Map<string, HeaderEncoding>();
const MAX_HEADER_NAMES_KEPT = 128;
const MAX_VALUES_KEPT_PER_NAME = 64;
const REPEATED_VALUES = new Set([
  'content-type',
  'cache-control',
  'vary',
  'allow',
  'access-control-expose-headers',
  'access-control-allow-origin',
  'access-control-allow-methods',
  'access-control-max-age',
]);

const utf8 = new TextEncoder();

/** A buffer of its own, exactly the text's bytes. */
const encode = (text: string): ArrayBuffer => utf8.encode(text).buffer as ArrayBuffer;

function encodingOf(name: string): HeaderEncoding | null {
  let encoding = headerEncodings.get(name);
  if (encoding === undefined) {
    if (headerEncodings.size >= MAX_HEADER_NAMES_KEPT) return null;
    encoding = { name: encode(name), values: REPEATED_VALUES.has(name) ? new Map() : null, lastValue: '', lastValueBytes: null };
    headerEncodings.set(name, encoding);
  }
  return encoding;
}

function valueBytes(encoding: HeaderEncoding, value: string): ArrayBuffer | string {
  const { values } = encoding;
  if (values === null) return value;
  if (encoding.lastValueBytes !== null && encoding.lastValue === value) return encoding.lastValueBytes;
  let bytes = values.get(value);
  if (bytes === undefined) {
    if (values.size >= MAX_VALUES_KEPT_PER_NAME) return value;
    bytes = encode(value);
    values.set(value, bytes);
  }
  encoding.lastValue = value;
  encoding.lastValueBytes = bytes;
  return bytes;
}

/** Writes the status line (uWS's own default is `200 OK`) and `headers` (names and values alternating). */
function writeHead(res: UwsResponse, status: number, headers: readonly string[]): void {
  if (status !== 200) {
    let line = statusLines.get(status);
    if (line === undefined) {
      line = `${status} ${STATUS_CODES[status] ?? 'Unknown'}`;
      if (Number.isInteger(status) && status >= 100 && status <= 999) statusLines.set(status, line);
    }
    res.writeStatus(line);
  }
  for (let i = 0; i < headers.length; i += 2) {
    const name = headers[i] as string;
    const value = headers[i + 1] as string;
    const encoding = encodingOf(name);
    if (encoding === null) res.writeHeader(name, value);
    else res.writeHeader(encoding.name, valueBytes(encoding, value));
  }
}

interface SocketData<C> {
  context: C;
}

class UwsSocket<C> implements TransportSocket {
  constructor(private readonly socket: WebSocket<SocketData<C>>) {}
  get bufferedAmount(): number {
    return this.socket.getBufferedAmount();
  }
  send(data: string | Uint8Array, binary: boolean): boolean {
    let sent = false;
    this.socket.cork(() => {
      sent = this.socket.send(data, binary) !== 2; // 2 = dropped (over the backpressure limit)
    });
    return sent;
  }
  end(code: number, reason: string): void {
    this.socket.end(code, reason);
  }
}

export function createUwsTransport(uws: UwsModule): Transport {
  const app = uws.App() as UwsApp;
  let listenSocket: UwsListenSocket | null = null;
  return {
    name: 'uws',

    onRequest(handler) {
      app.any('/*', (res, req) => {
        const head = readRequestHead(req);
        const channel = new UwsChannel(res, head.method === 'HEAD');
        try {
          handler(head, channel);
        } finally {
          channel.attach();
        }
      });
    },

    websocket<C>(pattern: string, handlers: WsHandlers<C>, options: WsOptions) {
      app.ws<SocketData<C>>(pattern, {
        maxPayloadLength: options.dropAboveBytes,
        idleTimeout: options.idleTimeoutSeconds,
        maxBackpressure: 16 * 1024 * 1024,
        sendPingsAutomatically: true,
        upgrade: (res, req, context) => {
          const head = readRequestHead(req);
          const decision = handlers.upgrade(head);
          if ('refuse' in decision) {
            const { status, headers, body } = decision.refuse;
            return void res.cork(() => {
              writeHead(res, status, Object.entries(headers).flat());
              res.end(body);
            });
          }
          const { protocol, context: socketContext } = decision;
          res.upgrade<SocketData<C>>(
            { context: socketContext },
            head.headers['sec-websocket-key'] ?? '',
            protocol,
            head.headers['sec-websocket-extensions'] ?? '',
            context,
          );
        },
        open: (socket) => handlers.open(new UwsSocket(socket), socket.getUserData().context),
        message: (socket, message, isBinary) => {
          const { context } = socket.getUserData();
          if (message.byteLength > options.maxMessageBytes) return handlers.oversized(context, message.byteLength);
          // copied: uWS reuses the buffer once this callback returns
          handlers.message(context, isBinary ? Buffer.from(message.slice(0)) : Buffer.from(message).toString('utf8'), isBinary);
        },
        drain: (socket) => handlers.drain?.(socket.getUserData().context),
        close: (socket, code, message) => handlers.close(socket.getUserData().context, code, Buffer.from(message).toString('utf8')),
      });
    },

    listen(host, port) {
      return new Promise((resolve, reject) => {
        app.listen(host, port, (socket) => {
          if (!socket) return reject(new Error(`cannot listen on ${host}:${port} (address in use, or not permitted)`));
          listenSocket = socket;
          resolve(uws.us_socket_local_port(socket));
        });
      });
    },

    stopListening() {
      if (listenSocket) uws.us_listen_socket_close(listenSocket);
      listenSocket = null;
    },

    closeAll() {
      app.close();
    },
  };
}
