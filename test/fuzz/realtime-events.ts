/**
 * Fuzz target `realtime-events`: sessions of the two live transcription WebSockets of a real voxd server in a child
 * process (voxd-server.ts, either transport): WS /v1/realtime (JSON events, base64 PCM16) and
 * WS /v1/audio/transcriptions/realtime (a configuration message, binary PCM16 frames, `{"action":"stop"}`). Seeds
 * (test/fuzz/corpus/realtime-events/) are sessions of the vendor's GA and beta events and of the simple protocol;
 * mutations change events' structure and values, add events and audio (valid, odd-length, not base64, huge), turn
 * events into text or binary frames, and change the endpoint, query model, headers, subprotocols and transport.
 *
 * Every session ends with a probe that must be answered once all messages before it were handled (messages are
 * handled in order): an unknown event on /v1/realtime (its `error` echoes the probe's event_id), a stop on the
 * other (it closes with 1000).
 *
 * Findings: the server dies (crash); the probe gets no answer within SESSION_MS, the session is still counted
 * open SESSION_RELEASE_MS after the socket closed, or /healthz stops answering (hang); an `error` with code or
 * type `server_error` (`internal server error` on the simple protocol), a close the protocol does not allow
 * (1011 only after an error that ends the session, FATAL_CODES; 1000 only after a stop on the simple protocol), a
 * dropped connection, an upgrade refused with an undocumented 5xx, fewer answers than messages that must
 * be answered, a committed turn without its `completed`, deltas that do not add up to the transcript, or an error
 * in the server's log (failure).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import WebSocket from 'ws';
import type { TransportName } from '../../src/http/transport.js';
import { envelopeCode } from '../helpers/hostile.js';
import { LANGUAGES, MODEL_IDS, modelId } from './dictionary.js';
import { awkwardJson, jsonText, mutateJson, mutateText, type Json, type JsonVocabulary } from './mutators.js';
import type { Rng } from './random.js';
import { jsonFormat, type Finding, type FuzzTarget } from './target.js';
import { FuzzServers, TRANSPORTS, type FuzzServer } from './voxd-server.js';

export const REALTIME_PATH = '/v1/realtime';
export const VAD_PATH = '/v1/audio/transcriptions/realtime';

/** A message to the server: a JSON event, any text, or a binary frame (base64 in the file). */
export type WsMessage = { event: Json } | { text: string } | { binary: string };

export interface RealtimeCase {
  transport: TransportName;
  endpoint: string;
  query: string;
  headers: Record<string, string>;
  protocols: string[];
  messages: WsMessage[];
}

export const REALTIME_CASE_FORMAT = jsonFormat<RealtimeCase>();

/** How long a session's messages and its probe may take: at most some seconds of audio through sphinx. */
const SESSION_MS = 30_000;
/** How long a closed session may still count against --max-realtime-sessions (its last engine call ending). */
const SESSION_RELEASE_MS = 10_000;
const PROBE_ID = 'voxd-fuzz-probe';
/**
 * The errors that may end a /v1/realtime session (docs/api.md): no model, a model that cannot stream, an unknown model
 * (or one on the hub, which is out of reach here), an unsupported language.
 */
const FATAL_CODES = ['model_not_set', 'model_not_streaming', 'model_not_found', 'invalid_model', 'model_download_failed', 'invalid_request'];
const MAX_MESSAGES = 60;
/** The longest slice of audio one generated message carries: 0.5 s at 16 kHz. */
const MAX_AUDIO_BYTES = 16_000;
/** Appends beyond the server's 15 MiB limit, under the ~20 MiB past which a message is refused unread. */
const HUGE_AUDIO_BYTES = 16 * 1024 * 1024;

const EVENT_TYPES = [
  'session.update',
  'transcription_session.update',
  'input_audio_buffer.append',
  'input_audio_buffer.commit',
  'input_audio_buffer.clear',
  'response.create',
  'conversation.item.create',
  'session.created',
  'SESSION.UPDATE',
  'input_audio_buffer.append ',
  '',
];
const PROTOCOLS = ['realtime', 'openai-beta.realtime-v1', 'openai-insecure-api-key.sk-unused', 'openai-organization.org'];
const TURN_DETECTIONS: Json[] = [
  null,
  { type: 'server_vad' },
  { type: 'server_vad', threshold: 0.9, prefix_padding_ms: 0, silence_duration_ms: 0 },
  { type: 'server_vad', threshold: 0, prefix_padding_ms: 10000, silence_duration_ms: 10000 },
  { type: 'semantic_vad' },
  { type: 'none' },
  {},
  'server_vad',
];
const VOCABULARY: JsonVocabulary = {
  keys: [
    'type',
    'event_id',
    'session',
    'audio',
    'input',
    'format',
    'rate',
    'transcription',
    'model',
    'language',
    'prompt',
    'turn_detection',
    'threshold',
    'prefix_padding_ms',
    'silence_duration_ms',
    'noise_reduction',
    'input_audio_transcription',
    'input_audio_format',
    'item_id',
    'action',
    'sample_rate',
    'streaming',
  ],
  values: {
    type: [...EVENT_TYPES, 'transcription', 'server_vad', 'audio/pcm'],
    event_id: ['e1', '', 42, null, 'x'.repeat(1000)],
    session: [{}, null, 'x', { type: 'transcription' }, { audio: { input: {} } }],
    model: [...MODEL_IDS.slice(0, 12), null],
    language: [...LANGUAGES, null],
    prompt: ['dashwood', '', null],
    rate: [16000, 24000, 8000, 1000, 384000, 999, 384001, 44100, 16000.5, '16000', 0, -1],
    sample_rate: [16000, 8000, 1000, 384000, 999, 16000.5, '16000', null],
    format: [{ type: 'audio/pcm', rate: 16000 }, { type: 'audio/pcmu' }, { rate: 8000 }, 'pcm16'],
    turn_detection: TURN_DETECTIONS,
    threshold: [0, 1, 0.5, -0.1, 1.1, '0.5'],
    prefix_padding_ms: [0, 300, 10000, 10001, -1],
    silence_duration_ms: [0, 500, 10000, 10001, -1],
    streaming: [true, false, 'true', null],
    action: ['stop', 'STOP', 'start', ''],
  },
};

// ---- generation ----

interface SeedPool {
  cases: RealtimeCase[];
  events: Json[];
  /** All the seeds' audio, PCM16 at 16 kHz, to cut appends and frames from. */
  pcm: Buffer;
}

const pools = new WeakMap<readonly Uint8Array[], SeedPool>();

function poolOf(seeds: readonly Uint8Array[]): SeedPool {
  let pool = pools.get(seeds);
  if (pool) return pool;
  const cases = seeds.map((seed) => REALTIME_CASE_FORMAT.decode(Buffer.from(seed).toString('utf8')));
  const messages = cases.flatMap((c) => c.messages);
  const events = messages.flatMap((m) => ('event' in m ? [m.event] : []));
  const audio = messages.map((m) => {
    if ('binary' in m) return Buffer.from(m.binary, 'base64');
    const event = 'event' in m ? (m.event as { audio?: unknown } | null) : null;
    return typeof event?.audio === 'string' ? Buffer.from(event.audio, 'base64') : Buffer.alloc(0);
  });
  pools.set(seeds, (pool = { cases, events, pcm: Buffer.concat(audio) }));
  return pool;
}

/** A slice of the seeds' speech (or silence, or noise), an even number of bytes. */
function audioBytes(rng: Rng, pool: SeedPool): Buffer {
  const length = 2 * rng.length(MAX_AUDIO_BYTES / 2);
  return rng.weighted<() => Buffer>([
    [
      8,
      () => {
        const start = 2 * rng.below(Math.max(0, pool.pcm.length - length) / 2 + 1);
        return pool.pcm.subarray(start, start + length);
      },
    ],
    [1, () => Buffer.alloc(length)],
    [1, () => Buffer.from(Array.from({ length }, () => rng.below(256)))],
  ])();
}

/** An append's `audio`: valid base64 of PCM16 mostly, else the ways clients get it wrong. */
function audioText(rng: Rng, pool: SeedPool): string {
  const base64 = audioBytes(rng, pool).toString('base64');
  const at = rng.below(base64.length + 1);
  return rng.weighted<() => string>([
    [10, () => base64],
    [1, () => audioBytes(rng, pool).subarray(1).toString('base64')], // an odd number of bytes
    [1, () => base64.slice(0, at) + rng.pick(['!', '-', '_', ' ', '\n', '=', '\u00e9']) + base64.slice(at)],
    [1, () => base64.replace(/=+$/, '')],
    [1, () => `data:audio/pcm;base64,${base64}`],
    [1, () => ''],
    [0.2, () => Buffer.alloc(2 * rng.length(HUGE_AUDIO_BYTES / 2)).toString('base64')],
  ])();
}

/** A new message for `endpoint`: an event or configuration from the vocabulary, or audio. */
function newMessage(rng: Rng, endpoint: string, pool: SeedPool): WsMessage {
  if (endpoint === VAD_PATH) {
    return rng.weighted<() => WsMessage>([
      [
        6,
        () => ({
          binary: audioBytes(rng, pool)
            .subarray(0, rng.chance(0.2) ? -1 : undefined)
            .toString('base64'),
        }),
      ],
      [
        2,
        () => ({
          event: { model: rng.pick(['sphinx', 'whisper-1', modelId(rng)]), language: rng.pick(LANGUAGES), sample_rate: rng.pick([16000, 8000, 24000]) },
        }),
      ],
      [1, () => ({ event: { action: 'stop' } })],
      [1, () => ({ event: awkwardJson(rng, 2) })],
    ])();
  }
  const type = rng.pick(EVENT_TYPES);
  return rng.weighted<() => WsMessage>([
    [6, () => ({ event: { type: 'input_audio_buffer.append', audio: audioText(rng, pool) } })],
    [2, () => ({ event: { type: 'input_audio_buffer.commit' } })],
    [
      2,
      () => ({
        event: {
          type: rng.chance(0.5) ? 'session.update' : 'transcription_session.update',
          session: { audio: { input: { transcription: { model: rng.pick(['sphinx', modelId(rng)]) }, turn_detection: rng.pick(TURN_DETECTIONS) } } },
        },
      }),
    ],
    [2, () => ({ event: { type, event_id: `e${rng.below(100)}`, ...(rng.chance(0.5) ? { session: awkwardJson(rng, 2) } : {}) } })],
    [1, () => ({ event: awkwardJson(rng, 2) })],
  ])();
}

type Mutation = (rng: Rng, input: RealtimeCase, pool: SeedPool) => void;

const mutateEvent: Mutation = (rng, input, pool) => {
  const events = input.messages.filter((m): m is { event: Json } => 'event' in m);
  if (events.length === 0) return addMessage(rng, input, pool);
  const message = rng.pick(events);
  message.event = mutateJson(rng, message.event, VOCABULARY, pool.events);
};

const addMessage: Mutation = (rng, input, pool) => {
  input.messages.splice(rng.below(input.messages.length + 1), 0, newMessage(rng, input.endpoint, pool));
};

const changeAudio: Mutation = (rng, input, pool) => {
  const appends = input.messages.filter((m) => 'event' in m && (m.event as { type?: unknown } | null)?.type === 'input_audio_buffer.append');
  const message = appends.length > 0 ? rng.pick(appends) : null;
  if (message && 'event' in message) (message.event as { audio: Json }).audio = audioText(rng, pool);
  else addMessage(rng, input, pool);
};

const rewrapMessage: Mutation = (rng, input) => {
  const index = rng.below(input.messages.length);
  const message = input.messages[index];
  if (!message) return;
  const text = 'event' in message ? jsonText(rng, message.event) : 'text' in message ? message.text : Buffer.from(message.binary, 'base64').toString('utf8');
  input.messages[index] = rng.weighted<() => WsMessage>([
    [3, () => ({ text: rng.chance(0.5) ? text : mutateText(rng, text, [], 100_000) })],
    [1, () => ({ binary: Buffer.from(text).toString('base64') })],
  ])();
};

const reorderMessages: Mutation = (rng, input, pool) => {
  const { messages } = input;
  const index = rng.below(messages.length);
  rng.weighted<() => void>([
    [2, () => messages.splice(index, 1)],
    [2, () => messages[index] && messages.splice(index, 0, structuredClone(messages[index]))],
    [1, () => messages.length > 1 && messages.splice(rng.below(messages.length), 0, ...messages.splice(index, 1))],
    [2, () => messages.splice(index, 0, ...structuredClone(rng.pick(pool.cases).messages.slice(0, rng.length(10))))],
    [1, () => messages.splice(rng.below(messages.length + 1))],
  ])();
};

const changeConnection: Mutation = (rng, input) => {
  rng.weighted<() => void>([
    [
      2,
      () => {
        input.endpoint = input.endpoint === REALTIME_PATH ? VAD_PATH : REALTIME_PATH;
        if (input.endpoint === VAD_PATH && rng.chance(0.9)) input.protocols = [];
      },
    ],
    [0.3, () => (input.endpoint = mutateText(rng, input.endpoint, [REALTIME_PATH, VAD_PATH], 200))],
    [3, () => (input.query = rng.chance(0.8) ? `model=${encodeURIComponent(modelId(rng))}` : rng.chance(0.5) ? '' : mutateText(rng, input.query, [], 2000))],
    [1, () => (input.headers = rng.chance(0.5) ? { 'OpenAI-Beta': rng.pick(['realtime=v1', 'assistants=v2', '']) } : {})],
    // a client that offers subprotocols and gets none back fails the handshake (browsers and ws do), so mostly
    // offer the one /v1/realtime selects, and none to the other endpoint, which selects none
    [
      1,
      () =>
        (input.protocols = rng.chance(0.2)
          ? PROTOCOLS.filter(() => rng.chance(0.4))
          : input.endpoint === REALTIME_PATH
            ? ['realtime', ...PROTOCOLS.slice(1).filter(() => rng.chance(0.4))]
            : []),
    ],
    [2, () => (input.transport = rng.pick(TRANSPORTS))],
  ])();
};

export function generateRealtimeCase(rng: Rng, seeds: readonly Uint8Array[]): RealtimeCase {
  const pool = poolOf(seeds);
  const base: RealtimeCase =
    pool.cases.length > 0 ? rng.pick(pool.cases) : { transport: 'node', endpoint: REALTIME_PATH, query: '', headers: {}, protocols: [], messages: [] };
  const input = structuredClone(base);
  input.transport = rng.pick(TRANSPORTS);
  for (let n = rng.length(6); n > 0; n--) {
    rng.weighted<Mutation>([
      [6, mutateEvent],
      [4, addMessage],
      [2, changeAudio],
      [1, rewrapMessage],
      [2, reorderMessages],
      [2, changeConnection],
    ])(rng, input, pool);
  }
  input.messages.splice(MAX_MESSAGES);
  return input;
}

// ---- a session ----

/** What a session showed: how the upgrade went, what the server sent, how it ended. */
interface SessionLog {
  /** The upgrade's refusal, when it was refused. */
  refused: { status: number; body: string } | null;
  /** Every text message from the server, parsed when it is JSON. */
  received: unknown[];
  /** Whether the probe was answered. */
  probed: boolean;
  /** How the server closed the socket (1006: the connection dropped without a close frame), if it did. */
  closed: { code: number; reason: string } | null;
  timedOut: boolean;
  /**
   * The server accepted the upgrade without any of the subprotocols offered: the client fails such a handshake
   * (as browsers do), so the session never ran.
   */
  noSubprotocol: boolean;
}

function messageData(message: WsMessage): { data: string | Buffer; binary: boolean } {
  if ('binary' in message) return { data: Buffer.from(message.binary, 'base64'), binary: true };
  return { data: 'text' in message ? message.text : JSON.stringify(message.event), binary: false };
}

/** What `ws` (and Node's HTTP client) will send: the case's headers and subprotocols that are valid at all. */
function sendable(input: RealtimeCase): { headers: Record<string, string>; protocols: string[] } {
  const token = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
  const headers = Object.fromEntries(Object.entries(input.headers).filter(([name, value]) => token.test(name) && /^[\t\x20-\x7e]*$/.test(value)));
  return { headers, protocols: [...new Set(input.protocols.filter((p) => token.test(p)))] };
}

async function runSession(server: FuzzServer, input: RealtimeCase): Promise<SessionLog> {
  const log: SessionLog = { refused: null, received: [], probed: false, closed: null, timedOut: false, noSubprotocol: false };
  const probe: WsMessage = input.endpoint === VAD_PATH ? { event: { action: 'stop' } } : { event: { type: 'voxd.fuzz.probe', event_id: PROBE_ID } };
  const { headers, protocols } = sendable(input);
  let socket: WebSocket;
  try {
    socket = new WebSocket(`${server.wsBase}${input.endpoint}${input.query ? `?${input.query}` : ''}`, protocols, { headers, perMessageDeflate: false });
  } catch {
    return log; // a URL no client can open
  }
  return new Promise((resolve) => {
    let settled = false;
    const finish = (): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.terminate();
      resolve(log);
    };
    const timer = setTimeout(() => {
      log.timedOut = true;
      finish();
    }, SESSION_MS);
    socket.on('error', (error) => (log.noSubprotocol ||= error.message === 'Server sent no subprotocol')); // followed by a close
    socket.on('unexpected-response', (_request, response) => {
      let body = '';
      response.on('data', (chunk: Buffer) => (body += chunk.toString('utf8')));
      response.on('end', () => {
        log.refused = { status: response.statusCode ?? 0, body };
        finish();
      });
    });
    socket.on('open', () => {
      for (const message of [...input.messages, probe]) {
        const { data, binary } = messageData(message);
        socket.send(data, { binary });
      }
    });
    socket.on('message', (data, isBinary) => {
      if (isBinary) return void log.received.push({ binary: true });
      const text = String(data);
      let parsed: unknown = text;
      try {
        parsed = JSON.parse(text);
      } catch {
        // kept as text
      }
      log.received.push(parsed);
      if ((parsed as { error?: { event_id?: unknown } }).error?.event_id === PROBE_ID) {
        log.probed = true;
        finish();
      }
    });
    socket.on('close', (code, reason) => {
      if (settled) return;
      log.closed = { code, reason: reason.toString('utf8') };
      if (input.endpoint === VAD_PATH && code === 1000) log.probed = true;
      finish();
    });
  });
}

/** Live sessions the server still counts (GET /metrics), or null when it does not answer. */
async function openSessions(server: FuzzServer): Promise<number | null> {
  try {
    const text = await (await fetch(`${server.base}/metrics`, { signal: AbortSignal.timeout(5000) })).text();
    return [...text.matchAll(/^voxd_realtime_sessions\{[^}]*\} (\d+)/gm)].reduce((sum, m) => sum + Number(m[1]), 0);
  } catch {
    return null;
  }
}

// ---- judging ----

type ServerEvent = { type?: unknown; error?: unknown; item_id?: unknown; delta?: unknown; transcript?: unknown; status?: unknown };

/** Whether `message` is an append event (written as an event or as text): a valid one gets no answer. */
function isAppend(message: WsMessage): boolean {
  if ('binary' in message) return false;
  let event: unknown = 'event' in message ? message.event : undefined;
  if ('text' in message) {
    try {
      event = JSON.parse(message.text);
    } catch {
      return false;
    }
  }
  return (event as { type?: unknown } | null)?.type === 'input_audio_buffer.append';
}

/** What the session's log says about the server: null when all is well. */
export function judgeSession(input: RealtimeCase, log: SessionLog): Finding | null {
  const failure = (detail: string): Finding => ({ kind: 'failure', detail });
  if (log.noSubprotocol) return null;
  if (log.refused) {
    const { status, body } = log.refused;
    const documented = status === 503 && envelopeCode(Buffer.from(body)) === 'too_many_sessions';
    return status >= 500 && !documented ? failure(`the upgrade was refused with ${status}: ${body.slice(0, 300)}`) : null;
  }
  const events = log.received.filter((e): e is ServerEvent => typeof e === 'object' && e !== null);
  const realtime = input.endpoint === REALTIME_PATH;
  const errors = events.filter((e) => (realtime ? e.type === 'error' : e.status === 'error'));
  const internal = errors.find((e) => (realtime ? /"server_error"/.test(JSON.stringify(e.error)) : e.error === 'internal server error'));
  if (internal) return failure(`an internal error: ${JSON.stringify(internal).slice(0, 300)}`);
  // the errors that end a session say so before the close (the simple protocol's errors carry no code)
  const lastError = errors.at(-1);
  const fatal = lastError !== undefined && (!realtime || FATAL_CODES.includes((lastError.error as { code?: string }).code ?? ''));
  if (log.closed && !(log.closed.code === 1000 && !realtime) && !(log.closed.code === 1011 && fatal)) {
    const after = lastError ? `after ${JSON.stringify(lastError).slice(0, 200)}` : 'without an error first';
    return failure(`the server closed the socket with ${log.closed.code} ${JSON.stringify(log.closed.reason)} ${after}`);
  }
  if (log.timedOut && !log.probed)
    return { kind: 'hang', detail: `the probe was not answered within ${SESSION_MS} ms (${log.received.length} messages received)` };
  if (!realtime || !log.probed || log.closed) return null;

  // every message but a valid append gets an answer, and every turn committed completes, before the probe's
  const answeredTypes = ['session.updated', 'transcription_session.updated', 'input_audio_buffer.committed', 'input_audio_buffer.cleared', 'error'];
  const answers = events.filter((e) => answeredTypes.includes(e.type as string)).length - 1; // less the probe's
  const owed = input.messages.filter((m) => !isAppend(m)).length;
  if (answers < owed) return failure(`${owed} messages must be answered, ${answers} answers came`);
  const count = (type: string): number => events.filter((e) => e.type === type).length;
  const committed = count('input_audio_buffer.committed');
  const completed = count('conversation.item.input_audio_transcription.completed');
  if (committed !== completed) return failure(`${committed} turns committed, ${completed} completed`);
  for (const done of events.filter((e) => e.type === 'conversation.item.input_audio_transcription.completed')) {
    const deltas = events.filter((e) => e.type === 'conversation.item.input_audio_transcription.delta' && e.item_id === done.item_id).map((e) => e.delta);
    if (deltas.join('') !== done.transcript)
      return failure(`the deltas ${JSON.stringify(deltas.join(''))} do not add up to ${JSON.stringify(done.transcript)}`);
  }
  return null;
}

function describe(input: RealtimeCase): string {
  return `${input.endpoint}${input.query ? `?${input.query}` : ''}`.slice(0, 100) + ` (${input.transport}, ${input.messages.length} messages)`;
}

export function realtimeEventsTarget(): FuzzTarget<RealtimeCase> {
  const servers = new FuzzServers();
  return {
    name: 'realtime-events',
    format: REALTIME_CASE_FORMAT,
    generate: generateRealtimeCase,
    async run(input) {
      const server = await servers.get(input.transport);
      const log = await runSession(server, input);
      let finding = judgeSession(input, log);
      const deadline = performance.now() + SESSION_RELEASE_MS;
      let open = await openSessions(server);
      while (open !== null && open > 0 && performance.now() < deadline) {
        await sleep(20);
        open = await openSessions(server);
      }
      if (open !== null && open > 0) finding ??= { kind: 'hang', detail: `${open} sessions still open ${SESSION_RELEASE_MS} ms after the socket closed` };
      finding = (await server.check()) ?? finding;
      if (finding) {
        finding.detail = `${describe(input)}: ${finding.detail}`;
        await server.restart();
      }
      return finding;
    },
    teardown: () => servers.close(),
  };
}
