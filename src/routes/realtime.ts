/**
 * The live transcription WebSockets: WS /v1/realtime (the vendor's realtime protocol, sessions/realtime.ts) and
 * WS /v1/audio/transcriptions/realtime (VAD-cut utterances over binary PCM16, sessions/vad-transcription.ts).
 * Both count against --max-realtime-sessions and close after --realtime-idle-timeout. The routes pick the
 * subprotocol and the query's model.
 */
import type { HttpServer } from '../http/server.js';
import { LiveSessions } from '../sessions/live-sessions.js';
import { MAX_APPEND_BYTES, RealtimeSession } from '../sessions/realtime.js';
import { MAX_FRAME_BYTES, VadTranscriptionSession } from '../sessions/vad-transcription.js';
import type { RouteContext } from './context.js';

/** Room for a 15 MiB append as base64 inside its JSON event; a larger message gets an error event (dropped unread). */
const MAX_EVENT_BYTES = Math.ceil((MAX_APPEND_BYTES * 4) / 3) + 64 * 1024;
/** uWS pings idle sockets; a peer that answers nothing for this long is gone. */
const IDLE_TIMEOUT_SECONDS = 120;

/** Mounts both live transcription WebSockets; returns their sessions, which the server drains at shutdown. */
export function mountRealtimeRoutes(http: HttpServer, { config, registry, stt, logger, metrics }: RouteContext): LiveSessions {
  const sessions = new LiveSessions({ maxSessions: config.maxRealtimeSessions, idleTimeoutSeconds: config.realtimeIdleTimeout }, metrics, logger);
  const engines = { stt, registry, sessions, logger };

  http.websocket<RealtimeSession>(
    '/v1/realtime',
    {
      accept: (request) => {
        sessions.admit();
        // clients that offer `realtime` (beside openai-insecure-api-key.*) expect it back
        return request.protocols.includes('realtime') ? { protocol: 'realtime' } : {};
      },
      open: (connection, request) => {
        // beta clients say so in a header (`OpenAI-Beta: realtime=v1`) or, from browsers, a subprotocol
        const beta = /realtime=v1/.test(request.headers['openai-beta'] ?? '') || request.protocols.includes('openai-beta.realtime-v1');
        return new RealtimeSession(
          connection,
          { ...engines, defaultModel: config.realtimeModel },
          request.query.get('model')?.trim() || null,
          beta ? 'beta' : 'ga',
        );
      },
      message: (session, data, isBinary) => session.receive(data, isBinary),
      oversized: (session, bytes) => session.refuseOversized(bytes, MAX_EVENT_BYTES),
      close: (session) => void session.close(),
    },
    { maxMessageBytes: MAX_EVENT_BYTES, idleTimeoutSeconds: IDLE_TIMEOUT_SECONDS },
  );

  http.websocket<VadTranscriptionSession>(
    '/v1/audio/transcriptions/realtime',
    {
      accept: () => sessions.admit(),
      open: (connection) => new VadTranscriptionSession(connection, { ...engines, defaultModel: config.sttModel }),
      message: (session, data, isBinary) => session.receive(data, isBinary),
      oversized: (session, bytes) => session.refuseOversized(bytes, MAX_FRAME_BYTES),
      close: (session) => void session.close(),
    },
    { maxMessageBytes: MAX_FRAME_BYTES, idleTimeoutSeconds: IDLE_TIMEOUT_SECONDS },
  );
  return sessions;
}
