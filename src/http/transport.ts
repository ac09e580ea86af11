/**
 * What the HTTP toolkit needs of a transport: connections, request heads and bodies, responses written with
 * backpressure, and WebSocket upgrades. Two transports implement it: uWebSockets.js (uws-transport.ts), fast but
 * only where its native binary loads, and node:http with `ws` (node-transport.ts), everywhere. Everything above
 * this interface (router, replies, bodies, WebSocket routes) is the same on both.
 */
import type { RequestHead } from './request.js';

export type TransportName = 'uws' | 'node';

/** A response being written. Every method is a no-op once the connection is gone or the response completed. */
export interface ResponseChannel {
  /** Aborted when the connection closed before the response completed (client gone, `close()`, `cancelWork()`). */
  readonly signal: AbortSignal;
  /** The connection was lost before the response completed. */
  readonly aborted: boolean;
  /** Settles when the whole response was handed to the connection, or the connection was lost. */
  readonly done: Promise<void>;
  /** The whole response was handed to the connection. */
  readonly completed: boolean;
  /**
   * Request body chunks, in order (`isLast` on the final one); must be set before the request handler returns. Set
   * only for a request that has a body (by its Content-Length or Transfer-Encoding).
   */
  onBody(sink: (chunk: Buffer, isLast: boolean) => void): void;
  /**
   * The reader admitted the body (its declared length within the route's limit and the upload budget) and reads it
   * now. A client that sent `Expect: 100-continue` sends its body only once asked, here; a body refused (413, 503)
   * is never asked for, so its client gets the refusal instead of `100 Continue` and never sends the body.
   */
  bodyWanted(): void;
  /** Stops reading the request body until `resume()`, so unread uploads do not fill memory. */
  pause(): void;
  resume(): void;
  /**
   * A whole response; `headers` are names and values alternating (a flat list costs the hot path nothing to build
   * or walk); `closeConnection` closes the connection once it went out.
   */
  send(status: number, headers: readonly string[], body: Uint8Array, closeConnection: boolean): void;
  /** The status and headers (as for `send`) of a streamed (chunked) body. */
  startStream(status: number, headers: readonly string[], closeConnection: boolean): void;
  /** Stream bytes, always taken; false when the client is behind: wait for `writable()` before writing more. */
  write(data: Uint8Array): boolean;
  /** Resolves once the client took enough to write again (at once when the connection is gone). */
  writable(): Promise<void>;
  /** Ends the stream once what was written went out. */
  end(): void;
  /** Closes the connection at once: the client sees a truncated transfer. */
  close(): void;
  /** Fires `signal` as if the client had left, so the request's work stops; the response stays usable. */
  cancelWork(): void;
}

/** One WebSocket as the transport holds it. */
export interface TransportSocket {
  /** Queues a message; false when the transport dropped it (the client is far behind). */
  send(data: string | Uint8Array, binary: boolean): boolean;
  end(code: number, reason: string): void;
  readonly bufferedAmount: number;
}

/** The decision on an upgrade request: refuse it with an HTTP answer, or accept it with a subprotocol. */
export type UpgradeDecision<C> = { refuse: { status: number; headers: Record<string, string>; body: string } } | { protocol: string; context: C };

export interface WsHandlers<C> {
  /** Decides from the copied request head, synchronously. */
  upgrade(head: RequestHead): UpgradeDecision<C>;
  open(socket: TransportSocket, context: C): void;
  message(context: C, data: string | Buffer, isBinary: boolean): void;
  /** A message over `maxMessageBytes`, dropped unread. */
  oversized(context: C, bytes: number): void;
  /** The socket closed, either side; 1006 when the connection dropped. */
  close(context: C, code: number, reason: string): void;
  drain?(context: C): void;
}

export interface WsOptions {
  maxMessageBytes: number;
  /** Past this size the transport drops the connection without reading the message (at least maxMessageBytes). */
  dropAboveBytes: number;
  /** Seconds without any message (the transport pings) before the socket is closed; 0 = never. */
  idleTimeoutSeconds: number;
}

/** What a transport bounds besides its timeouts. */
export interface TransportLimits {
  /**
   * Connections open at once; one more is answered `503 too_many_connections` and closed (node:http only: uWS has
   * no connection hook in JavaScript, docs/deploy.md). Undefined: no limit.
   */
  maxConnections?: number;
}

export interface Transport {
  readonly name: TransportName;
  /** Every HTTP request (upgrades to WebSocket routes excepted), with its head copied and its channel. */
  onRequest(handler: (head: RequestHead, channel: ResponseChannel) => void): void;
  websocket<C>(pattern: string, handlers: WsHandlers<C>, options: WsOptions): void;
  /**
   * Resolves with the bound port (0 picks a free one). `acceptFailed` hears of a connection the listener could not
   * accept afterwards (the process out of descriptors, say): a transient failure, so the listener serves on.
   */
  listen(host: string, port: number, acceptFailed: (error: Error) => void): Promise<number>;
  /** Stops accepting connections. */
  stopListening(): void;
  /** Closes every connection still open. */
  closeAll(): void;
}

/** How long a response waits for a client that takes no bytes before it is cut (README: a paused stream). */
export const MAX_STALL_SECONDS = 300;
