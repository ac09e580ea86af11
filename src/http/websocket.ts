/**
 * WebSocket routes on uWS behind a small interface, so that session code never touches uWS objects: the upgrade
 * is decided from a copied request head (a refusal is an ordinary HTTP error envelope), the subprotocol is chosen
 * by the route, messages arrive copied (uWS reuses its buffers once the callback returns), and a `WsConnection`
 * guards every send and close against a socket that is already gone.
 */
import { randomUUID } from 'node:crypto';
import { STATUS_CODES } from 'node:http';
import { ApiError } from './errors.js';
import { readRequestHead, type RequestHead } from './request.js';
import type { UwsApp, WebSocket } from './uws.js';

/** What a route sees of the upgrade request. */
export interface WsRequest {
  /** `ws_…`, also in the server's log lines. */
  readonly id: string;
  readonly path: string;
  readonly query: URLSearchParams;
  readonly headers: Readonly<Record<string, string>>;
  /** Subprotocols the client offered (`Sec-WebSocket-Protocol`), in its order. */
  readonly protocols: readonly string[];
}

export interface WsConnection {
  readonly id: string;
  /** The subprotocol the route selected, or '' for none. */
  readonly protocol: string;
  readonly closed: boolean;
  /** Bytes queued for the client that the socket has not taken yet (backpressure). */
  readonly bufferedAmount: number;
  /** Sends a text message (strings, and objects as JSON) or a binary one; false once closed. */
  send(message: string | Uint8Array | object): boolean;
  close(code?: number, reason?: string): void;
}

export interface WsRoute<Session> {
  /** The subprotocol to select among the offered ones (none when omitted or undefined). Throw ApiError to refuse. */
  accept?(request: WsRequest): { protocol?: string } | void;
  open(connection: WsConnection, request: WsRequest): Session;
  message(session: Session, data: string | Buffer, isBinary: boolean): void;
  /** A message over `WsLimits.maxMessageBytes` arrived and was dropped unread; the socket stays open. */
  oversized(session: Session, bytes: number): void;
  /** The socket closed (either side); `code` is the close code (1006 when the connection dropped). */
  close(session: Session, code: number, reason: string): void;
  /** The client took the queued bytes: producers that waited on `bufferedAmount` may go on. */
  drain?(session: Session): void;
}

export interface WsLimits {
  /**
   * A larger message goes to the route's `oversized` instead of `message`. uWS buffers a message whole before it
   * hands it over, so it drops the connection (no close frame) only past twice this size.
   */
  maxMessageBytes: number;
  /** Seconds without any message (uWS sends pings) before the socket is closed; 0 = never. */
  idleTimeoutSeconds: number;
}

interface UserData {
  request: WsRequest;
  protocol: string;
  connection?: GuardedConnection;
  session?: unknown;
}

class GuardedConnection implements WsConnection {
  #socket: WebSocket<UserData> | null;
  constructor(
    socket: WebSocket<UserData>,
    readonly id: string,
    readonly protocol: string,
  ) {
    this.#socket = socket;
  }
  get closed(): boolean {
    return this.#socket === null;
  }
  get bufferedAmount(): number {
    return this.#socket?.getBufferedAmount() ?? 0;
  }
  send(message: string | Uint8Array | object): boolean {
    const socket = this.#socket;
    if (!socket) return false;
    const binary = message instanceof Uint8Array;
    const data = typeof message === 'string' || binary ? message : JSON.stringify(message);
    let sent = false;
    socket.cork(() => {
      sent = socket.send(data, binary) !== 2; // 2 = dropped (over the backpressure limit)
    });
    return sent;
  }
  close(code = 1000, reason = ''): void {
    const socket = this.#socket;
    if (!socket) return;
    this.#socket = null;
    socket.end(code, reason.slice(0, 123)); // a close frame's reason is at most 123 bytes
  }
  /** The socket is gone: nothing may touch it any more. */
  detach(): void {
    this.#socket = null;
  }
}

function wsRequest(head: RequestHead): WsRequest {
  return {
    id: `ws_${randomUUID().replace(/-/g, '').slice(0, 24)}`,
    path: head.path,
    query: new URLSearchParams(head.rawQuery),
    headers: head.headers,
    protocols: (head.headers['sec-websocket-protocol'] ?? '')
      .split(',')
      .map((p) => p.trim())
      .filter(Boolean),
  };
}

/** Registers `route` at `pattern`; returns a function that closes every open socket of it (shutdown). */
export interface WsPolicy {
  /** Headers every upgrade answer carries (request id, CORS). */
  baseHeaders(request: WsRequest): Record<string, string>;
  /** Whether the page that opens the socket may (--allowed-origins). */
  originAllowed(origin: string | undefined): boolean;
}

export function mountWebSocket<Session>(app: UwsApp, pattern: string, route: WsRoute<Session>, limits: WsLimits, policy: WsPolicy): () => void {
  const open = new Set<GuardedConnection>();
  app.ws<UserData>(pattern, {
    maxPayloadLength: 2 * limits.maxMessageBytes,
    idleTimeout: limits.idleTimeoutSeconds,
    maxBackpressure: 16 * 1024 * 1024,
    sendPingsAutomatically: true,
    upgrade: (res, req, context) => {
      const head = readRequestHead(req);
      const request = wsRequest(head);
      let protocol = '';
      try {
        const origin = head.headers.origin;
        if (!policy.originAllowed(origin)) throw new ApiError('origin_not_allowed', `origin ${origin} is not allowed (--allowed-origins)`);
        protocol = route.accept?.(request)?.protocol ?? '';
      } catch (error) {
        // refused: an ordinary HTTP answer with the error envelope instead of the 101
        const refusal = ApiError.from(error);
        const headers = { ...policy.baseHeaders(request), ...refusal.headers, 'content-type': 'application/json' };
        return void res.cork(() => {
          res.writeStatus(`${refusal.status} ${STATUS_CODES[refusal.status] ?? ''}`);
          for (const [name, value] of Object.entries(headers)) res.writeHeader(name, value);
          res.end(JSON.stringify(refusal.toEnvelope()));
        });
      }
      res.upgrade<UserData>({ request, protocol }, head.headers['sec-websocket-key'] ?? '', protocol, head.headers['sec-websocket-extensions'] ?? '', context);
    },
    open: (socket) => {
      const data = socket.getUserData();
      const connection = new GuardedConnection(socket, data.request.id, data.protocol);
      open.add(connection);
      data.connection = connection;
      data.session = route.open(connection, data.request);
    },
    message: (socket, message, isBinary) => {
      const data = socket.getUserData();
      if (message.byteLength > limits.maxMessageBytes) return route.oversized(data.session as Session, message.byteLength);
      // copied: uWS reuses the buffer once this callback returns
      const copy = isBinary ? Buffer.from(message.slice(0)) : Buffer.from(message).toString('utf8');
      route.message(data.session as Session, copy, isBinary);
    },
    drain: (socket) => {
      route.drain?.(socket.getUserData().session as Session);
    },
    close: (socket, code, message) => {
      const data = socket.getUserData();
      data.connection?.detach();
      if (data.connection) open.delete(data.connection);
      route.close(data.session as Session, code, Buffer.from(message).toString('utf8'));
    },
  });
  return () => {
    for (const connection of open) connection.close(1001, 'server shutting down');
  };
}
