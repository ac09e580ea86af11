/**
 * WebSocket routes behind a small interface, so that session code never touches a transport's sockets: the upgrade
 * is decided from a copied request head (a refusal is an ordinary HTTP error envelope), the subprotocol is chosen
 * by the route, messages arrive copied, and a `WsConnection` guards every send and close against a socket that is
 * already gone.
 */
import { randomUUID } from 'node:crypto';
import { ApiError } from '../errors.js';
import { errorEnvelope } from './errors.js';
import type { RequestHead } from './request.js';
import type { Transport, TransportSocket } from './transport.js';

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
   * A larger message goes to the route's `oversized` instead of `message`. The transport reads a message whole
   * before it hands it over, so it drops the connection (no close frame) only past twice this size.
   */
  maxMessageBytes: number;
  /** Seconds without any message (pings answered count) before the socket is closed; 0 = never. */
  idleTimeoutSeconds: number;
}

export interface WsPolicy {
  /** Headers every upgrade answer carries (request id, CORS). */
  baseHeaders(request: WsRequest): Record<string, string>;
  /** Whether the page that opens the socket may (--allowed-origins). */
  originAllowed(origin: string | undefined): boolean;
}

interface SocketState<Session> {
  request: WsRequest;
  protocol: string;
  connection?: GuardedConnection;
  session?: Session;
}

class GuardedConnection implements WsConnection {
  #socket: TransportSocket | null;
  constructor(
    socket: TransportSocket,
    readonly id: string,
    readonly protocol: string,
  ) {
    this.#socket = socket;
  }
  get closed(): boolean {
    return this.#socket === null;
  }
  get bufferedAmount(): number {
    return this.#socket?.bufferedAmount ?? 0;
  }
  send(message: string | Uint8Array | object): boolean {
    const socket = this.#socket;
    if (!socket) return false;
    const binary = message instanceof Uint8Array;
    return socket.send(typeof message === 'string' || binary ? message : JSON.stringify(message), binary);
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
export function mountWebSocket<Session>(transport: Transport, pattern: string, route: WsRoute<Session>, limits: WsLimits, policy: WsPolicy): () => void {
  const open = new Set<GuardedConnection>();
  transport.websocket<SocketState<Session>>(
    pattern,
    {
      upgrade: (head) => {
        const request = wsRequest(head);
        try {
          const origin = head.headers.origin;
          if (!policy.originAllowed(origin)) throw new ApiError('origin_not_allowed', `origin ${origin} is not allowed (--allowed-origins)`);
          const protocol = route.accept?.(request)?.protocol ?? '';
          return { protocol, context: { request, protocol } };
        } catch (error) {
          // refused: an ordinary HTTP answer with the error envelope instead of the 101
          const refusal = ApiError.from(error);
          const headers = { ...policy.baseHeaders(request), ...refusal.headers, 'content-type': 'application/json' };
          return { refuse: { status: refusal.status, headers, body: JSON.stringify(errorEnvelope(refusal)) } };
        }
      },
      open: (socket, state) => {
        const connection = new GuardedConnection(socket, state.request.id, state.protocol);
        open.add(connection);
        state.connection = connection;
        state.session = route.open(connection, state.request);
      },
      message: (state, data, isBinary) => route.message(state.session as Session, data, isBinary),
      oversized: (state, bytes) => route.oversized(state.session as Session, bytes),
      drain: (state) => route.drain?.(state.session as Session),
      close: (state, code, reason) => {
        state.connection?.detach();
        if (state.connection) open.delete(state.connection);
        route.close(state.session as Session, code, reason);
      },
    },
    { maxMessageBytes: limits.maxMessageBytes, dropAboveBytes: 2 * limits.maxMessageBytes, idleTimeoutSeconds: limits.idleTimeoutSeconds },
  );
  return () => {
    for (const connection of open) connection.close(1001, 'server shutting down');
  };
}
