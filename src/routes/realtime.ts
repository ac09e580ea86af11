/**
 * WS /v1/realtime: the vendor's realtime protocol for transcription sessions. The route picks the subprotocol
 * and the model from the query; `sessions/realtime.ts` speaks the protocol.
 */
import { ApiError } from '../http/errors.js';
import type { HttpServer } from '../http/server.js';
import { MAX_APPEND_BYTES, RealtimeSession } from '../sessions/realtime.js';
import type { RouteContext } from './context.js';

/** Room for a 15 MiB append as base64 inside its JSON event; larger messages drop the connection. */
const MAX_MESSAGE_BYTES = Math.ceil((MAX_APPEND_BYTES * 4) / 3) + 64 * 1024;
/** uWS pings idle sockets; a peer that answers nothing for this long is gone. */
const IDLE_TIMEOUT_SECONDS = 120;

export function mountRealtimeRoutes(http: HttpServer, { config, registry, scheduler, logger }: RouteContext): void {
  let open = 0;
  http.websocket<RealtimeSession>(
    '/v1/realtime',
    {
      accept: (request) => {
        if (open >= config.maxRealtimeSessions) {
          throw new ApiError('too_many_sessions', `${open} realtime sessions are open, the limit (--max-realtime-sessions); retry later`, {
            headers: { 'Retry-After': '5' },
          });
        }
        // clients that offer `realtime` (beside openai-insecure-api-key.*) expect it back
        return request.protocols.includes('realtime') ? { protocol: 'realtime' } : {};
      },
      open: (connection, request) => {
        open++;
        return new RealtimeSession(
          connection,
          { registry, scheduler, logger, defaultModel: config.realtimeModel, vadModel: config.vadModel, delayMs: config.realtimeTranscriptionDelayMs },
          request.query.get('model')?.trim() || null,
        );
      },
      message: (session, data, isBinary) => session.receive(data, isBinary),
      close: (session) => {
        open--;
        void session.close();
      },
    },
    { maxMessageBytes: MAX_MESSAGE_BYTES, idleTimeoutSeconds: IDLE_TIMEOUT_SECONDS },
  );
}
