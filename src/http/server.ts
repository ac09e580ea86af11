/**
 * The HTTP server: the transport (uWebSockets.js or node:http, transport.ts) hands every request to the router,
 * so that 404, 405, preflights, CORS, request ids, error envelopes and the per-request hook live in one place and
 * route handlers never see a transport's objects.
 */
import { performance } from 'node:perf_hooks';
import { corsHeaderList, corsHeaders, originAllowed, preflightHeaders } from './cors.js';
import { ApiError } from '../errors.js';
import { HttpReply } from './reply.js';
import { RequestBody } from './request-body.js';
import { bodyFraming, HttpRequest } from './request.js';
import { Router, type Route, type RouteMatch } from './router.js';
import type { Transport, TransportName } from './transport.js';
import { mountWebSocket, type WsLimits, type WsRoute } from './websocket.js';

export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

/** Answers through `reply` before returning (or settling); a thrown ApiError becomes its envelope. */
export type RouteHandler = (req: HttpRequest, reply: HttpReply) => Promise<void> | void;

/** The part of a pino logger the server uses. */
export interface HttpLogger {
  error(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  info(obj: object, msg?: string): void;
}

export interface ResponseInfo {
  id: string;
  method: string;
  /** The matched route pattern (e.g. `/v1/models/*`), or `unmatched` when no route has the path. */
  route: string;
  /** 499 when the client disconnected before a response began. */
  status: number;
  ms: number;
  /** Body bytes handed to the connection. */
  bytes: number;
  /** The response began but did not complete: the client left or stopped reading too long, or the server cut it. */
  cut: boolean;
}

export interface HttpServerOptions {
  /** The transport to serve on (transports.ts picks one). */
  transport: Transport;
  logger: HttpLogger;
  /** Origins whose pages may read responses; `['*']` (the default) for any. */
  allowedOrigins?: readonly string[];
  /** Called once per request, when its response completed or the connection was aborted. */
  onResponse?: (info: ResponseInfo) => void;
}

export interface HttpServer {
  route(method: HttpMethod, pattern: string, handler: RouteHandler): void;
  /** A WebSocket route; its sockets are closed with 1001 when the server closes. */
  websocket<Session>(pattern: string, route: WsRoute<Session>, limits: WsLimits): void;
  /** Resolves with the bound port (port 0 picks a free one). */
  listen(host: string, port: number): Promise<number>;
  /**
   * Stops accepting connections and waits for in-flight requests; those still running after `timeoutMs` are
   * aborted. WebSockets get until `socketsDrained` settles (bounded by the same timeout) to close on their own; then
   * every remaining connection is closed.
   */
  close(timeoutMs?: number, socketsDrained?: Promise<void>): Promise<void>;
  readonly inFlight: number;
  readonly transport: TransportName;
}

const CLIENT_CLOSED_REQUEST = 499;

/** An error that reports stopped work: an AbortError, or a native call that saw its abort flag (code `aborted`). */
function isAbort(error: unknown): boolean {
  return error instanceof Error && (error.name === 'AbortError' || (error as { code?: unknown }).code === 'aborted');
}

export function createHttpServer(options: HttpServerOptions): HttpServer {
  const { logger } = options;
  const allowedOrigins = options.allowedOrigins ?? ['*'];
  const anyOrigin = allowedOrigins.includes('*');
  const anyOriginHeaders = corsHeaderList(allowedOrigins, undefined);
  const { transport } = options;
  const router = new Router<RouteHandler>();
  const inFlight = new Set<HttpReply>();
  let idleWaiters: (() => void)[] = [];
  let listening = false;
  let closing: Promise<void> | null = null;
  const closeSockets: (() => void)[] = [];
  // made once, not per request: whether a response's connection must close after it
  const closingNow = (): boolean => closing !== null;
  const always = (): boolean => true;

  /**
   * Every request, synchronously inside the transport's callback. A route that answers before returning (most GETs)
   * is handled, reported and done before this returns, with no promise made on the way; a route that awaits goes on
   * asynchronously with the same steps.
   */
  transport.onRequest((head, channel) => {
    const framing = bodyFraming(head.headers);
    // uWS delivers the body only to a data handler set before this function returns; a request without one needs none
    const body = new RequestBody(channel, framing.length, framing.chunked);
    if (!body.complete) channel.onBody((chunk, isLast) => body.push(chunk, isLast));
    const match = router.match(head.method, head.path);
    const request = new HttpRequest(head, match.kind === 'found' ? match.params : {}, body, channel);
    const reply = new HttpReply(channel, {
      requestId: request.id,
      baseHeaders: anyOrigin ? anyOriginHeaders : corsHeaderList(allowedOrigins, request.header('origin')),
      closeConnection: framing.error === null ? closingNow : always,
    });
    const started = performance.now();
    let pending: Promise<void> | undefined;
    try {
      if (framing.error !== null) pending = refuseMalformed(framing.error);
      else if (closing) throw new ApiError('shutting_down', 'The server is shutting down');
      else pending = dispatch(match, request, reply);
    } catch (error) {
      fail(error, request, reply);
    }
    // in flight from here on only when not done already (nothing else runs while a route answers synchronously, so
    // no one can tell; and a Set that empties at every request reallocates its table every time)
    const tracked = pending !== undefined || !reply.settled;
    if (tracked) inFlight.add(reply);
    if (pending) {
      pending.then(
        () => finish(match, request, reply, started, tracked),
        (error: unknown) => {
          fail(error, request, reply);
          finish(match, request, reply, started, tracked);
        },
      );
    } else {
      finish(match, request, reply, started, tracked);
    }
  });

  /**
   * A request whose framing cannot be trusted, answered on a later tick: uWS, finding a request pipelined behind one
   * still unanswered, drops the connection; answered at once, it would serve that request by its own framing (a
   * smuggled one). node:http never gets here: its parser refuses such requests itself.
   */
  async function refuseMalformed(framingError: string): Promise<void> {
    await new Promise((resolve) => setImmediate(resolve));
    throw new ApiError('invalid_request', `Malformed request: ${framingError}`);
  }

  /** Once the response completed or the connection was lost: out of the in-flight set (when `tracked` there), and reported. */
  function finish(match: RouteMatch<RouteHandler>, request: HttpRequest, reply: HttpReply, started: number, tracked: boolean): void {
    if (!reply.settled) {
      void reply.done.then(() => finish(match, request, reply, started, tracked));
      return;
    }
    if (tracked) {
      inFlight.delete(reply);
      if (inFlight.size === 0) for (const resolve of idleWaiters.splice(0)) resolve();
    }
    try {
      options.onResponse?.({
        id: request.id,
        method: request.method,
        route: match.kind === 'found' ? match.route.pattern : match.kind === 'method_not_allowed' ? match.pattern : 'unmatched',
        status: reply.aborted && !reply.sent ? CLIENT_CLOSED_REQUEST : reply.statusCode,
        ms: performance.now() - started,
        bytes: reply.bytesSent,
        cut: reply.sent && !reply.completed,
      });
    } catch (error) {
      logger.error({ err: error, requestId: request.id }, 'onResponse hook failed');
    }
  }

  /** Runs the route; a promise only when the handler returned one (it has not answered yet, or may not have). */
  function dispatch(match: RouteMatch<RouteHandler>, request: HttpRequest, reply: HttpReply): Promise<void> | undefined {
    if (match.kind === 'not_found') throw new ApiError('not_found', `No route for ${request.method} ${request.path}`);
    if (match.kind === 'method_not_allowed') {
      const allowed = [...match.allowed, 'OPTIONS'];
      if (request.method === 'OPTIONS') {
        for (const [name, value] of Object.entries(preflightHeaders(allowed, request.header('access-control-request-headers')))) reply.header(name, value);
        reply.status(204).end();
        return undefined;
      }
      throw new ApiError('method_not_allowed', `Method ${request.method} is not allowed for ${request.path}`, { headers: { allow: allowed.join(', ') } });
    }
    const { route } = match;
    const result = route.handler(request, reply) as Promise<void> | undefined;
    if (result && typeof result.then === 'function') return result.then(() => assertAnswered(route, reply));
    assertAnswered(route, reply);
    return undefined;
  }

  function assertAnswered(route: Route<RouteHandler>, reply: HttpReply): void {
    if (reply.aborted || (reply.sent && !reply.streaming)) return;
    throw new Error(`the handler of ${route.method} ${route.pattern} returned without ${reply.streaming ? 'ending its stream' : 'responding'}`);
  }

  /**
   * Answers a handler's failure: its error envelope, or a cut connection when a byte stream already began. Work
   * stopped because the client left (or the server interrupted it) is nobody's error: there is no one to answer.
   */
  function fail(error: unknown, request: HttpRequest, reply: HttpReply): void {
    const context = { err: error, requestId: request.id, method: request.method, path: request.path };
    if (reply.aborted && isAbort(error)) return;
    if (reply.sent && !reply.aborted) logger.warn(context, 'request failed after its response began');
    else if (!(error instanceof ApiError)) logger.error(context, 'request failed');
    reply.error(ApiError.from(error)); // a no-op once the client is gone or the response finished
  }

  return {
    route(method, pattern, handler) {
      router.add(method, pattern, handler);
    },

    websocket(pattern, route, limits) {
      closeSockets.push(
        mountWebSocket(transport, pattern, route, limits, {
          baseHeaders: (request) => ({ 'x-request-id': request.id, ...corsHeaders(allowedOrigins, request.headers.origin) }),
          originAllowed: (origin) => originAllowed(allowedOrigins, origin),
        }),
      );
    },

    async listen(host, port) {
      if (closing || listening) throw new Error('the server is already listening or closed');
      listening = true;
      return transport.listen(host, port, (error) => logger.warn({ err: error }, 'a connection could not be accepted; serving on'));
    },

    close(timeoutMs = 10_000, socketsDrained = Promise.resolve()) {
      closing ??= (async () => {
        if (listening) transport.stopListening();
        listening = false;
        const idle = new Promise<void>((resolve) => (inFlight.size === 0 ? resolve() : idleWaiters.push(resolve)));
        let timer: NodeJS.Timeout | undefined;
        const deadline = new Promise<'timed out'>((resolve) => (timer = setTimeout(resolve, timeoutMs, 'timed out')));
        const timedOut = (await Promise.race([idle, deadline])) === 'timed out';
        await Promise.race([socketsDrained, deadline]);
        clearTimeout(timer);
        if (timedOut) {
          logger.warn({ requests: inFlight.size, timeoutMs }, 'interrupting requests still running at shutdown');
          const interruption = new ApiError('shutting_down', 'The server is shutting down and could not finish this request in time; retry it');
          for (const reply of inFlight) reply.interrupt(interruption);
        }
        idleWaiters = [];
        for (const close of closeSockets) close();
        transport.closeAll();
      })();
      return closing;
    },

    get inFlight() {
      return inFlight.size;
    },

    get transport() {
      return transport.name;
    },
  };
}
