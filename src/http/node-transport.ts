/**
 * The node:http transport, with `ws` for WebSockets: voxd's transport wherever uWebSockets.js has no binary for
 * the running Node ABI and libc (transport.ts). It keeps uWS's behaviour where clients can see it: a request head
 * that has not arrived 10 s after the connection opened (or after the previous answer, on a kept-alive one) ends
 * the connection, as do 10 s without a request on a kept-alive one and a body that stops arriving for 10 s; a
 * WebSocket that sends nothing (pings answered count) for its idle timeout is closed, and a client that takes no
 * bytes for MAX_STALL_SECONDS is cut. Where node:http would answer without the error envelope or not at all, it
 * answers with the envelope: a request its parser refuses (conflicting lengths, say), an HTTP/1.1 request without
 * `Host`, a head too large (431) or too slow (408), a connection beyond `maxConnections` (503).
 */
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import net from 'node:net';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type RawData, type WebSocket } from 'ws';
import { ApiError } from '../errors.js';
import { errorEnvelope } from './errors.js';
import { emptyHeaders, type RequestHead } from './request.js';
import {
  MAX_STALL_SECONDS,
  type ResponseChannel,
  type Transport,
  type TransportLimits,
  type TransportSocket,
  type WsHandlers,
  type WsOptions,
} from './transport.js';

/** As uWS: a request body that stops arriving for this long ends the connection. */
const BODY_IDLE_MS = 10_000;
/** As uWS: a request head must be whole this long after the connection opened or its first byte came (408 then). */
const HEAD_TIMEOUT_MS = 10_000;
/** As uWS: a kept-alive connection with no request for this long is closed (node:http adds up to a second). */
const KEEP_ALIVE_MS = 10_000;
/** How often node:http looks for heads past their time: its default, 30 s, would let one take 40 s. */
const HEAD_CHECK_INTERVAL_MS = 1000;
/** How long a connection refused with 503 (over `maxConnections`) is kept for its client to read the answer. */
const REFUSED_LINGER_MS = 2000;
/**
 * Refused connections kept at once for their clients to read the 503: each holds a descriptor, so beyond these a
 * flood of connections would use up the open-file limit anyway (docs/configuration.md, "Connections and timeouts").
 */
const MAX_REFUSED_LINGERING = 64;
/** As uWS's maxBackpressure: messages for a client this far behind are dropped. */
const MAX_SOCKET_BACKLOG_BYTES = 16 * 1024 * 1024;

function readRequestHead(req: IncomingMessage): RequestHead {
  const headers = emptyHeaders();
  for (let i = 0; i < req.rawHeaders.length; i += 2) {
    const name = (req.rawHeaders[i] as string).toLowerCase();
    const value = req.rawHeaders[i + 1] as string;
    headers[name] = name in headers ? `${headers[name]}, ${value}` : value;
  }
  // an absolute-form target (http://host/path) is served by its path, as uWS does
  const target = (req.url ?? '/').replace(/^[a-z][a-z0-9+.-]*:\/\/[^/?#]*/i, '') || '/';
  const query = target.indexOf('?');
  return { method: req.method ?? 'GET', path: query < 0 ? target : target.slice(0, query), rawQuery: query < 0 ? '' : target.slice(query + 1), headers };
}

const SETTLED: Promise<void> = Promise.resolve();

class NodeChannel implements ResponseChannel {
  readonly #req: IncomingMessage;
  readonly #res: ServerResponse;
  /** The client sent `Expect: 100-continue` and waits to be asked for its body (`bodyWanted`). */
  #awaitingContinue: boolean;
  /** Whether the body's idle timeout is armed on the socket (only for a request with a body: see onBody). */
  #bodyTimeout = false;
  /** Made on first use (most requests never look at their signal): an AbortController costs a few µs. */
  #abort: AbortController | null = null;
  #workCancelled = false;
  /** `done`, made only when asked for before the response settled. */
  #done: Promise<void> | null = null;
  #settle: (() => void) | null = null;
  #settled = false;
  #state: 'open' | 'finished' | 'aborted' = 'open';
  /** Cuts the response when the client took nothing for MAX_STALL_SECONDS. */
  #stallTimer: NodeJS.Timeout | null = null;
  #drainWatched = false;

  constructor(req: IncomingMessage, res: ServerResponse, awaitingContinue: boolean) {
    this.#req = req;
    this.#res = res;
    this.#awaitingContinue = awaitingContinue;
    res.once('finish', () => {
      this.#state = 'finished';
      this.#unstall();
      this.#markSettled();
    });
    res.once('close', () => {
      if (this.#state !== 'open') return;
      this.#state = 'aborted';
      this.#unstall();
      this.cancelWork();
      this.#markSettled();
    });
  }

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
    return this.#state === 'finished';
  }

  onBody(sink: (chunk: Buffer, isLast: boolean) => void): void {
    const socket = this.#req.socket;
    this.#bodyTimeout = true;
    socket.setTimeout(BODY_IDLE_MS); // node:http destroys a socket whose timeout nobody handles
    this.#req.on('data', (chunk: Buffer) => sink(chunk, false));
    this.#req.once('end', () => {
      socket.setTimeout(0);
      sink(Buffer.alloc(0), true);
    });
  }

  bodyWanted(): void {
    if (!this.#awaitingContinue) return;
    this.#awaitingContinue = false;
    this.#res.writeContinue();
  }

  pause(): void {
    this.#req.pause();
  }

  resume(): void {
    this.#req.resume();
  }

  send(status: number, headers: readonly string[], body: Uint8Array, closeConnection: boolean): void {
    if (this.#state !== 'open') return;
    this.#writeHead(status, headers, closeConnection);
    // node:http sends no body after a HEAD, and no length unless told
    if (this.#req.method === 'HEAD' && status !== 204 && status !== 304) this.#res.setHeader('content-length', body.byteLength);
    this.#res.end(status === 204 || status === 304 ? undefined : body);
    if (this.#res.writableNeedDrain) this.#stall();
  }

  startStream(status: number, headers: readonly string[], closeConnection: boolean): void {
    if (this.#state !== 'open') return;
    this.#writeHead(status, headers, closeConnection);
  }

  write(data: Uint8Array): boolean {
    if (this.#state !== 'open') return true;
    const ok = this.#res.write(data);
    if (!ok) this.#stall();
    return ok;
  }

  writable(): Promise<void> {
    if (this.#state !== 'open' || !this.#res.writableNeedDrain) return Promise.resolve();
    return new Promise((resolve) => {
      const settle = (): void => {
        this.#res.off('drain', settle);
        this.#res.off('close', settle);
        resolve();
      };
      this.#res.on('drain', settle);
      this.#res.on('close', settle);
    });
  }

  end(): void {
    if (this.#state !== 'open') return;
    this.#res.end();
  }

  close(): void {
    if (this.#state === 'open') this.#res.destroy();
  }

  cancelWork(): void {
    this.#workCancelled = true;
    this.#abort?.abort();
  }

  #markSettled(): void {
    this.#settled = true;
    this.#settle?.();
  }

  #writeHead(status: number, headers: readonly string[], closeConnection: boolean): void {
    // the response takes over from the body's idle timeout; a stalled client is bounded by #stall
    if (this.#bodyTimeout) this.#req.socket.setTimeout(0);
    this.#res.statusCode = status;
    for (let i = 0; i < headers.length; i += 2) this.#res.setHeader(headers[i] as string, headers[i + 1] as string);
    if (closeConnection) this.#res.shouldKeepAlive = false;
  }

  #stall(): void {
    if (!this.#drainWatched) {
      this.#drainWatched = true;
      this.#res.on('drain', () => this.#unstall());
    }
    this.#stallTimer ??= setTimeout(() => this.close(), MAX_STALL_SECONDS * 1000);
  }

  #unstall(): void {
    if (this.#stallTimer) clearTimeout(this.#stallTimer);
    this.#stallTimer = null;
  }
}

class NodeSocket implements TransportSocket {
  constructor(
    private readonly socket: WebSocket,
    /** Reports the close at once, as uWS does, rather than after the client answered the closing handshake. */
    private readonly closed: (code: number, reason: string) => void,
  ) {}
  get bufferedAmount(): number {
    return this.socket.bufferedAmount;
  }
  send(data: string | Uint8Array, binary: boolean): boolean {
    if (this.socket.readyState !== this.socket.OPEN || this.socket.bufferedAmount > MAX_SOCKET_BACKLOG_BYTES) return false;
    this.socket.send(data, { binary });
    return true;
  }
  end(code: number, reason: string): void {
    this.socket.close(code, reason);
    this.closed(code, reason);
  }
}

function rawData(data: RawData): Buffer {
  if (Buffer.isBuffer(data)) return data;
  return Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data);
}

/** An HTTP answer written on a socket that is not (or no longer) an HTTP response: refusals of upgrades and parse errors. */
function writeRawAnswer(socket: Duplex, status: number, headers: Record<string, string>, body: string): void {
  const lines = [`HTTP/1.1 ${status} ${http.STATUS_CODES[status] ?? 'Unknown'}`];
  for (const [name, value] of Object.entries({ ...headers, 'content-length': String(Buffer.byteLength(body)), connection: 'close' }))
    lines.push(`${name}: ${value}`);
  socket.end(`${lines.join('\r\n')}\r\n\r\n${body}`);
}

/** `writeRawAnswer` with an error's envelope. */
function writeRawRefusal(socket: Duplex, refusal: ApiError): void {
  writeRawAnswer(socket, refusal.status, { ...refusal.headers, 'content-type': 'application/json' }, JSON.stringify(errorEnvelope(refusal)));
}

/** What node:http's parser reports (clientError) as the client's answer. */
function parseFailure(error: NodeJS.ErrnoException): ApiError {
  switch (error.code) {
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return new ApiError('request_timeout', `The request head did not arrive within ${HEAD_TIMEOUT_MS / 1000} s`);
    case 'HPE_HEADER_OVERFLOW':
      return new ApiError('headers_too_large', `The request head is larger than ${http.maxHeaderSize} bytes`);
    default:
      return new ApiError('invalid_request', `Malformed request: ${error.message.replace(/^Parse Error: /, '')}`);
  }
}

/**
 * Answers a connection beyond the limit with 503 and closes it. What its client sends meanwhile is read and
 * dropped: closing with unread bytes would reset the connection, and the client could lose the answer with it.
 */
function refuseConnection(socket: net.Socket, maxConnections: number): void {
  socket.on('error', () => socket.destroy());
  const linger = setTimeout(() => socket.destroy(), REFUSED_LINGER_MS);
  socket.once('close', () => clearTimeout(linger));
  socket.resume();
  writeRawRefusal(
    socket,
    new ApiError('too_many_connections', `The server has ${maxConnections} connections open, its limit; retry later`, { headers: { 'retry-after': '1' } }),
  );
}

const MISSING_HOST = 'Malformed request: an HTTP/1.1 request must have a Host header';

/** Answers a request with an error's envelope, without the server's layers, and closes its connection. */
function refuseRequest(res: ServerResponse, refusal: ApiError): void {
  const body = JSON.stringify(errorEnvelope(refusal));
  res.shouldKeepAlive = false;
  res.writeHead(refusal.status, { ...refusal.headers, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

interface WsRouteEntry {
  accept(req: IncomingMessage, socket: Duplex, head: Buffer): void;
}

export function createNodeTransport(limits: TransportLimits = {}): Transport {
  const server = http.createServer({
    // requests get no overall deadline: a 100 MiB upload over a slow link may take minutes (the body's idle timeout
    // bounds stalls); the head gets its own (node:http would derive 0, none, from requestTimeout)
    requestTimeout: 0,
    headersTimeout: HEAD_TIMEOUT_MS,
    connectionsCheckingInterval: HEAD_CHECK_INTERVAL_MS,
    keepAliveTimeout: KEEP_ALIVE_MS,
    // node:http's own refusal has no envelope: see `serve`
    requireHostHeader: false,
  });
  const wsRoutes = new Map<string, WsRouteEntry>();
  const sockets = new Set<WebSocket>();
  const { maxConnections } = limits;
  let connections = 0;
  let refusedLingering = 0;
  // node:http's own limit (`maxConnections`) closes a connection beyond it unanswered, so connections are accepted
  // here, answered 503 beyond the limit, and handed to node:http (its documented 'connection' event) below it
  const listener = net.createServer({ allowHalfOpen: true, noDelay: true }, (socket) => {
    if (maxConnections === undefined || connections < maxConnections) {
      connections++;
      socket.once('close', () => connections--);
      server.emit('connection', socket);
    } else if (refusedLingering < MAX_REFUSED_LINGERING) {
      refusedLingering++;
      socket.once('close', () => refusedLingering--);
      refuseConnection(socket, maxConnections);
    } else {
      // a flood: an answer would hold this descriptor for REFUSED_LINGER_MS more. Reset, not closed: a client that
      // sees the connection end before it sent its request may wait for an answer (Node's fetch does, 5 minutes)
      socket.resetAndDestroy();
    }
  });

  server.on('clientError', (error: NodeJS.ErrnoException, socket: Duplex & { _httpMessage?: ServerResponse | null }) => {
    // as node:http's own handler: no answer in the middle of one already going out (pipelined requests)
    if (!socket.writable || error.code === 'ECONNRESET' || socket._httpMessage?.headersSent) return void socket.destroy();
    writeRawRefusal(socket, parseFailure(error));
  });
  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    const { path } = readRequestHead(req);
    const route = wsRoutes.get(path);
    if (route) return route.accept(req, socket, head);
    writeRawRefusal(socket, new ApiError('not_found', `No WebSocket route for ${path}`));
  });

  return {
    name: 'node',

    onRequest(handler) {
      // a request without a body ends unread: node:http discards it once the response is sent
      const serve = (req: IncomingMessage, res: ServerResponse, awaitingContinue: boolean): void => {
        const head = readRequestHead(req);
        if (head.headers.host === undefined && req.httpVersion === '1.1') return refuseRequest(res, new ApiError('invalid_request', MISSING_HOST));
        handler(head, new NodeChannel(req, res, awaitingContinue));
      };
      server.on('request', (req: IncomingMessage, res: ServerResponse) => serve(req, res, false));
      // `Expect: 100-continue`: 100 Continue waits for the reader to admit the body (bodyWanted); a refusal goes out
      // instead, and node:http then closes the connection (the client never sent the body)
      server.on('checkContinue', (req: IncomingMessage, res: ServerResponse) => serve(req, res, true));
      // another expectation: served as if it were not there, as uWS does (node:http would answer 417, no envelope)
      server.on('checkExpectation', (req: IncomingMessage, res: ServerResponse) => serve(req, res, false));
    },

    websocket<C>(pattern: string, handlers: WsHandlers<C>, options: WsOptions) {
      const protocolOf = new WeakMap<IncomingMessage, string>();
      const wss = new WebSocketServer({
        noServer: true,
        maxPayload: options.dropAboveBytes,
        perMessageDeflate: false,
        handleProtocols: (_offered, req) => protocolOf.get(req) || false,
      });
      wsRoutes.set(pattern, {
        accept(req, socket, head) {
          const decision = handlers.upgrade(readRequestHead(req));
          if ('refuse' in decision) return writeRawAnswer(socket, decision.refuse.status, decision.refuse.headers, decision.refuse.body);
          protocolOf.set(req, decision.protocol);
          wss.handleUpgrade(req, socket, head, (ws) => {
            sockets.add(ws);
            const { context } = decision;
            let lastHeard = performance.now();
            const idle =
              options.idleTimeoutSeconds > 0
                ? setInterval(
                    () => {
                      if (performance.now() - lastHeard > options.idleTimeoutSeconds * 1000) ws.terminate();
                      else ws.ping();
                    },
                    (options.idleTimeoutSeconds * 1000) / 2,
                  ).unref()
                : null;
            ws.on('pong', () => (lastHeard = performance.now()));
            ws.on('message', (data, isBinary) => {
              lastHeard = performance.now();
              const bytes = rawData(data);
              if (bytes.byteLength > options.maxMessageBytes) return handlers.oversized(context, bytes.byteLength);
              handlers.message(context, isBinary ? bytes : bytes.toString('utf8'), isBinary);
            });
            // a protocol error (a message over dropAboveBytes, say) closes the socket; its message is the close's reason
            let failure = '';
            ws.on('error', (error) => (failure ||= error.message));
            let reported = false;
            const closed = (code: number, reason: string): void => {
              if (idle) clearInterval(idle);
              sockets.delete(ws);
              if (reported) return;
              reported = true;
              handlers.close(context, code, reason);
            };
            ws.once('close', (code, reason) => closed(code, reason.toString('utf8') || failure));
            handlers.open(new NodeSocket(ws, closed), context);
          });
        },
      });
    },

    listen(host, port, acceptFailed) {
      return new Promise((resolve, reject) => {
        listener.once('error', reject);
        listener.listen(port, host, () => {
          // from now on an 'error' is a failed accept, which would end the process if no one listened. (libuv, since
          // 1.45 and so under every Node voxd supports, sheds such connections itself and reports none: a guard.)
          listener.off('error', reject).on('error', acceptFailed);
          // node:http starts watching heads' times (and the list closeAllConnections walks) when it hears this
          server.emit('listening');
          const address = listener.address();
          resolve(typeof address === 'object' && address ? address.port : port);
        });
      });
    },

    stopListening() {
      listener.close();
      server.close(); // closes kept-alive connections that are idle
    },

    closeAll() {
      for (const ws of sockets) ws.terminate();
      server.closeAllConnections();
    },
  };
}
