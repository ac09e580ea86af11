/**
 * Fuzz target `http-request`: raw HTTP/1.1 requests, written byte for byte on a fresh connection to a real voxd
 * server in a child process (voxd-server.ts), on either transport. Seeds are valid requests for every route
 * (test/fuzz/corpus/http-request/); mutations change the method, path, percent-encoding, query, headers (repeated,
 * empty, huge, invalid bytes, conflicting framing), the JSON body's structure and values, multipart parts and
 * boundaries, the transfer coding, and cut, extend or pipeline the body.
 *
 * Findings: the server dies (crash); a request complete by its own framing gets no answer, or an answer that does
 * not end, within ANSWER_MS, or /healthz stops answering (hang); a 5xx other than the documented ones (503
 * `queue_full`, `shutting_down`, `too_many_sessions`, and 502 `model_download_failed`, the answer for a hub ID
 * while the hub is out of reach), a `server_error` inside a stream, a response cut off or not HTTP, bytes after an
 * answer that begin no response (a body after a HEAD's answer), or an error in the server's log (failure). A
 * request that is not complete may be left waiting: the server rightly waits for the rest, until its idle timeout.
 * On node:http any head counts (what its parser cannot take it refuses at once, 400 or 431); on uWS only the
 * plainest ones, since its parser leaves the rest unanswered (http-wire.ts, isComplete).
 */
import type { TransportName } from '../../src/http/transport.js';
import { envelopeCode } from '../helpers/hostile.js';
import { LANGUAGES, modelId, VOICES } from './dictionary.js';
import {
  boundaryOf,
  chunked,
  dechunk,
  exchange,
  headerValues,
  isComplete,
  multipartBytes,
  parseMultipart,
  partHead,
  requestBytes,
  type Exchange,
  type FormPart,
  type RawRequest,
  type RawResponse,
} from './http-wire.js';
import { awkwardToken, generateText, jsonText, mutateBytes, mutateJson, mutateText, type Json, type JsonVocabulary } from './mutators.js';
import type { Rng } from './random.js';
import type { Finding, FuzzTarget, InputFormat } from './target.js';
import { FuzzServers, TRANSPORTS } from './voxd-server.js';

export interface HttpCase extends RawRequest {
  /** The server's transport: `uws` or `node`. */
  transport: TransportName;
}

/** How long a complete request may wait for its whole answer (the slowest legitimate one takes a few seconds). */
const ANSWER_MS = 20_000;
/** How long an incomplete request waits for an early answer (a 413, say) before the case ends. */
const OPEN_MS = 150;
/** The largest body generated (the server takes 2 MiB uploads and 1 MiB of JSON). */
const MAX_BODY = 256 * 1024;
/** Deeper documents are mutated as bytes: copying them (structuredClone, JSON.stringify) recurses. */
const MAX_JSON_DEPTH = 1000;
/** The multipart seeds' boundary, so that content types from the vocabulary match their bodies. */
export const BOUNDARY = 'voxd-fuzz-boundary';
/** 5xx answers voxd documents, by status: anything else from the server is a bug. */
const DOCUMENTED_5XX: Readonly<Record<number, readonly string[]>> = {
  502: ['model_download_failed'],
  503: ['queue_full', 'shutting_down', 'too_many_sessions'],
};

// ---- the case as a file ----

interface HttpCaseFile extends Omit<HttpCase, 'body' | 'splits'> {
  /** The body as text, when it is valid UTF-8... */
  body?: string;
  /** ...else in base64. */
  bodyBase64?: string;
  splits?: number[];
}

/** JSON, with the body as text where it reads as text (latin1 strings keep header bytes as they are). */
export const HTTP_CASE_FORMAT: InputFormat<HttpCase> = {
  extension: 'json',
  encode(input) {
    const { body, splits, ...rest } = input;
    const bytes = Buffer.from(body);
    const text = bytes.toString('utf8');
    const file: HttpCaseFile = { ...rest, ...(Buffer.from(text, 'utf8').equals(bytes) ? { body: text } : { bodyBase64: bytes.toString('base64') }) };
    if (splits.length > 0) file.splits = splits;
    return `${JSON.stringify(file, null, 2)}\n`;
  },
  decode(content) {
    const { body, bodyBase64, splits, ...rest } = JSON.parse(content) as HttpCaseFile;
    return { ...rest, body: bodyBase64 !== undefined ? Buffer.from(bodyBase64, 'base64') : Buffer.from(body ?? '', 'utf8'), splits: splits ?? [] };
  },
};

// ---- vocabulary ----

const METHODS = [
  'GET',
  'POST',
  'DELETE',
  'PUT',
  'PATCH',
  'HEAD',
  'OPTIONS',
  'TRACE',
  'CONNECT',
  'PRI',
  'get',
  'Post',
  'M-SEARCH',
  '',
  'G\u00c9T',
  'X'.repeat(300),
];
const VERSIONS = ['HTTP/1.1', 'HTTP/1.0', 'HTTP/2.0', 'HTTP/0.9', 'HTTP/1.2', 'http/1.1', 'HTTP/1.1 ', 'HTTP/11', '', 'HTTP/1.1\r\nX-Injected: 1'];
const ROUTES = [
  '/healthz',
  '/readyz',
  '/metrics',
  '/v1/models',
  '/v1/models/sphinx',
  '/v1/models/ggml-org/whisper-vad/ggml-silero-v6.2.0.bin',
  '/v1/audio/speech',
  '/v1/audio/voices',
  '/v1/audio/transcriptions',
  '/v1/audio/translations',
  '/v1/audio/separations',
  '/v1/realtime',
  '/v1/audio/transcriptions/realtime',
  '/',
  '*',
  '/v1',
  '/v1/models/',
  '/v1//models',
  '/V1/MODELS',
  '/v1/audio/speech/',
  '/v1/./audio/../audio/speech',
  'http://x/v1/models',
];
const QUERY_KEYS = ['model', 'model_name', 'available', 'stream', 'x', 'model[]', 'model_name[0]', '', '__proto__', 'model\u0000'];
const TRUTHY = ['true', '1', 'TRUE', 'yes', '0', 'false', ''];

/** Header values worth trying, by name (lower case). */
const HEADER_VALUES: Readonly<Record<string, readonly string[]>> = {
  host: ['x', '', '127.0.0.1:1', 'a'.repeat(300)],
  'content-type': [
    'application/json',
    'application/json; charset=utf-8',
    'APPLICATION/JSON',
    'application/vnd.api+json',
    'application/jsonx',
    'text/plain',
    'application/x-www-form-urlencoded',
    'multipart/form-data',
    'multipart/form-data; boundary=',
    `multipart/form-data; boundary=${BOUNDARY}`,
    `multipart/form-data; boundary="${BOUNDARY}"`,
    `multipart/form-data; charset=utf-8; boundary=${BOUNDARY}`,
    `multipart/form-data; boundary=${BOUNDARY}; boundary=other`,
    `multipart/form-data; boundary=${'b'.repeat(200)}`,
    `multipart/mixed; boundary=${BOUNDARY}`,
    '',
    ';',
  ],
  'content-length': ['0', '1', '-1', '+5', ' 5', '0x10', '1e3', '99999999999', '18446744073709551616', '1, 2', '', 'abc'],
  'transfer-encoding': ['chunked', 'Chunked', 'gzip, chunked', 'chunked, gzip', 'identity', 'chunked, chunked', 'xchunked', ''],
  connection: ['close', 'keep-alive', 'Upgrade', 'upgrade, close', ''],
  upgrade: ['websocket', 'WebSocket', 'h2c', 'foo'],
  'sec-websocket-key': ['dGhlIHNhbXBsZSBub25jZQ==', '', 'x'],
  'sec-websocket-version': ['13', '8', '', '99'],
  'sec-websocket-protocol': ['realtime', 'openai-beta.realtime-v1', 'realtime, openai-insecure-api-key.sk-x', ',,,'],
  expect: ['100-continue', '100-Continue', 'foo'],
  origin: ['http://example.com', 'null', '', 'http://a'.repeat(100)],
  'access-control-request-method': ['POST', 'GET', 'DELETE', 'X'],
  'access-control-request-headers': ['content-type, authorization', '', 'x'.repeat(1000)],
  accept: ['text/event-stream', 'application/json', '*/*', ''],
  'x-stainless-lang': ['js', ''],
  'x-request-id': ['fuzz-1', '', 'a'.repeat(201), 'a b', '\u00ff', '../../etc'],
  authorization: ['Bearer sk-x', 'Basic', ''],
  'openai-beta': ['realtime=v1', 'assistants=v2'],
  'content-encoding': ['gzip', 'br', 'identity'],
  range: ['bytes=0-1'],
  cookie: ['a=b'],
};
const HEADER_NAMES = Object.keys(HEADER_VALUES);

/** Speech and model-loading bodies: the fields voxd reads, with valid values and near misses. */
const JSON_VOCABULARY: JsonVocabulary = {
  keys: [
    'model',
    'input',
    'voice',
    'speed',
    'lang_code',
    'response_format',
    'stream',
    'stream_format',
    'streaming_interval',
    'temperature',
    'max_tokens',
    'seed',
    'ref_audio',
    'ref_text',
    'instruct',
    'instructions',
    'model_name',
    '__proto__',
    'constructor',
  ],
  values: {
    model: ['tts-1', 'flite', 'sphinx', 'spectral', 'gpt-4o-mini-tts', 'owner/repo', '/dev/zero', '', 'x'.repeat(1025)],
    model_name: ['flite', 'sphinx', 'spectral', 'tts-1', 'whisper-1', 'owner/repo:Q8_0', '/dev/null', '/proc/self/fd/1', ''],
    input: ['Hello world.', 'Hi. Bye.', '', ' ', '!'.repeat(400), 'a'.repeat(601), 'Dr. Smith lives on St. Mary St. 1,234 $5.'],
    voice: [...VOICES, { id: 'kal' }, { id: '' }, { name: 'kal' }],
    speed: [0.25, 4, 1, 0, -1, 4.0001, 0.2499, 1e-300, 1e300, '2'],
    lang_code: ['a', 'b', 'en', 'en-us', 'en-gb', 'EN', 'fr', 'z', ''],
    response_format: ['mp3', 'wav', 'flac', 'ogg', 'opus', 'aac', 'pcm', 'MP3', 'wav ', 'm4a', ''],
    stream: [true, false, 'true', 1, null],
    stream_format: ['audio', 'sse', 'SSE', 'ndjson'],
    streaming_interval: [0.001, 0.5, 2, 60, 61, 0, -1, 1e-9],
    temperature: [0, 2, 2.1, -0.1, null],
    max_tokens: [1, 100, 0, -1, 1.5, 2 ** 31],
    seed: [0, 4294967294, 4294967295, -1, 1.5],
    ref_audio: ['data:audio/wav;base64,UklGRg==', 'data:,', 'data:audio/wav;base64,!!!', '/etc/passwd', '/dev/zero', '/proc/self/fd/0', 'x'],
    ref_text: ['hello', ''],
    instructions: ['Speak slowly.', '', 'x'.repeat(10_000)],
  },
};

const FIELD_NAMES = [
  'file',
  'model',
  'language',
  'prompt',
  'context',
  'response_format',
  'temperature',
  'timestamp_granularities[]',
  'timestamp_granularities',
  'include[]',
  'chunking_strategy',
  'chunking_strategy[type]',
  'stream',
  'stream_format',
  'verbose',
  'max_tokens',
  'description',
  'file[]',
  'file[0]',
  '[]',
  'a[b][c]',
  'key[',
  'model[x]',
  '__proto__',
  'constructor',
  '',
];
/** Form field values, by field name (brackets dropped). */
const FIELD_VALUES: Readonly<Record<string, readonly string[]>> = {
  model: ['sphinx', 'whisper-1', 'spectral', 'flite', 'owner/repo', '/dev/zero', ''],
  language: LANGUAGES,
  response_format: ['json', 'text', 'srt', 'vtt', 'verbose_json', 'ndjson', 'JSON', 'xml', ''],
  temperature: ['0', '1', '1.0001', '-0', 'NaN', '1e999', ''],
  timestamp_granularities: ['word', 'segment', 'Word', ''],
  include: ['logprobs', ''],
  chunking_strategy: ['auto', 'server_vad', '{"type":"server_vad"}', ''],
  stream: TRUTHY,
  verbose: TRUTHY,
  stream_format: ['sse', 'ndjson', 'SSE', ''],
  max_tokens: ['1', '0', '-1', '1.5', '99999999999999999999', ''],
  description: ['vocals', 'drums', 'bass guitar', 'music without vocals', 'piano', 'nothing at all', '', ' '],
  prompt: ['hello', ''],
};
const FILENAMES = ['audio.wav', 'a.mp3', '', 'x', '../../etc/passwd', 'C:\\temp\\a.wav', 'a\u00e9.wav', 'a"b.wav', 'x'.repeat(300)];

// ---- generation ----

/** A request under construction: the body before its transfer coding, and what is sent after it. */
interface Draft {
  transport: TransportName;
  method: string;
  path: string;
  query: string | null;
  version: string;
  headers: [string, string][];
  payload: Uint8Array;
  /** Chunk boundaries when the body is sent chunked. */
  chunkCuts: number[] | null;
  /** Whether Content-Length headers are set to the body's length at the end (else they stay as they are). */
  fixLength: boolean;
  /** Bytes after the body: a pipelined request, or garbage. */
  trailing: Uint8Array;
  splits: number[];
}

function draftOf(request: HttpCase): Draft {
  const query = request.target.indexOf('?');
  const base = {
    transport: request.transport,
    method: request.method,
    path: query < 0 ? request.target : request.target.slice(0, query),
    query: query < 0 ? null : request.target.slice(query + 1),
    version: request.version,
    headers: request.headers.map(([n, v]): [string, string] => [n, v]),
    fixLength: true,
    splits: [...request.splits],
  };
  const isChunked = headerValues(request.headers, 'transfer-encoding').some((v) => /chunked/i.test(v));
  const decoded = isChunked ? dechunk(request.body) : null;
  if (decoded) return { ...base, payload: decoded.payload, chunkCuts: [], trailing: request.body.subarray(decoded.end) };
  const length = Number(headerValues(request.headers, 'content-length')[0] ?? request.body.length);
  const end = Number.isSafeInteger(length) && length >= 0 ? Math.min(length, request.body.length) : request.body.length;
  return { ...base, payload: request.body.subarray(0, end), chunkCuts: null, trailing: request.body.subarray(end) };
}

function caseOf(draft: Draft): HttpCase {
  const body = draft.chunkCuts ? chunked(draft.payload, draft.chunkCuts) : Buffer.from(draft.payload);
  const headers = draft.headers.map(([name, value]): [string, string] =>
    draft.fixLength && !draft.chunkCuts && name.toLowerCase() === 'content-length' ? [name, String(body.length)] : [name, value],
  );
  return {
    transport: draft.transport,
    method: draft.method,
    target: draft.query === null ? draft.path : `${draft.path}?${draft.query}`,
    version: draft.version,
    headers,
    body: Buffer.concat([body, draft.trailing]),
    splits: draft.splits,
  };
}

function contentType(draft: Draft): string | undefined {
  return headerValues(draft.headers, 'content-type')[0];
}

function setHeader(draft: Draft, name: string, value: string): void {
  draft.headers = draft.headers.filter(([n]) => n.toLowerCase() !== name);
  draft.headers.push([name, value]);
}

/** Text as it goes on the wire, one character a byte: its UTF-8 bytes, or its characters beyond latin1 as `?`. */
function latin1(rng: Rng, text: string): string {
  return rng.chance(0.5) ? Buffer.from(text, 'utf8').toString('latin1') : text.replace(/[\u0100-\uffff]/g, '?');
}

function percentEncoded(text: string): string {
  return [...Buffer.from(text, 'latin1')].map((b) => `%${b.toString(16).padStart(2, '0')}`).join('');
}

/** What the seeds hold that mutations splice in: JSON documents and multipart parts. */
interface SeedPool {
  cases: HttpCase[];
  documents: Json[];
  parts: FormPart[];
}

const pools = new WeakMap<readonly Uint8Array[], SeedPool>();

function poolOf(seeds: readonly Uint8Array[]): SeedPool {
  let pool = pools.get(seeds);
  if (pool) return pool;
  const cases = seeds.map((seed) => HTTP_CASE_FORMAT.decode(Buffer.from(seed).toString('utf8')));
  const documents: Json[] = [];
  const parts: FormPart[] = [];
  for (const request of cases) {
    const draft = draftOf(request);
    const document = parseJson(draft.payload);
    if (document !== undefined) documents.push(document);
    const boundary = boundaryOf(contentType(draft));
    if (boundary) parts.push(...(parseMultipart(draft.payload, boundary)?.parts ?? []));
  }
  pools.set(seeds, (pool = { cases, documents, parts }));
  return pool;
}

/** The body as a document to mutate; undefined when it is no JSON, or nested too deep to copy (jsonText nests deep). */
function parseJson(payload: Uint8Array): Json | undefined {
  if (payload.length === 0 || payload.length > MAX_BODY) return undefined;
  let document: Json;
  try {
    document = JSON.parse(Buffer.from(payload).toString('utf8')) as Json;
  } catch {
    return undefined;
  }
  const stack: [Json, number][] = [[document, 0]];
  for (let entry = stack.pop(); entry; entry = stack.pop()) {
    const [value, depth] = entry;
    if (depth > MAX_JSON_DEPTH) return undefined;
    if (value !== null && typeof value === 'object') for (const child of Object.values(value)) stack.push([child, depth + 1]);
  }
  return document;
}

type Mutation = (rng: Rng, draft: Draft, pool: SeedPool) => void;

const mutateMethod: Mutation = (rng, draft) => {
  draft.method = rng.chance(0.8) ? rng.pick(METHODS) : latin1(rng, mutateText(rng, draft.method, METHODS, 64));
};

const mutatePath: Mutation = (rng, draft) => {
  const path = draft.path;
  const at = rng.below(path.length + 1);
  draft.path = rng.weighted<() => string>([
    [4, () => rng.pick(ROUTES)],
    [2, () => `/v1/models/${rng.chance(0.5) ? encodeURIComponent(modelId(rng)) : latin1(rng, modelId(rng))}`],
    [2, () => path.slice(0, at) + percentEncoded(path.slice(at, at + rng.int(1, 4))) + path.slice(at + 4)],
    [2, () => path.slice(0, at) + rng.pick(['%', '%zz', '%00', '%ff', '%c0%af', '%2e%2e', '%2F', '/..', '/.', '//', ';x', '#f']) + path.slice(at)],
    [1, () => (path.endsWith('/') ? path.slice(0, -1) : `${path}/`)],
    [1, () => `${path}${'/a'.repeat(rng.length(4000))}`],
    [2, () => latin1(rng, mutateText(rng, path, ROUTES, 2000))],
  ])();
};

const mutateQuery: Mutation = (rng, draft) => {
  const params = draft.query ? draft.query.split('&') : [];
  const value = (key: string): string => {
    if (/^model/.test(key)) return rng.chance(0.7) ? encodeURIComponent(modelId(rng)) : latin1(rng, modelId(rng));
    return rng.chance(0.6) ? rng.pick(TRUTHY) : latin1(rng, awkwardToken(rng, 40));
  };
  rng.weighted<() => void>([
    [
      4,
      () => {
        const key = rng.pick(QUERY_KEYS);
        params.splice(rng.below(params.length + 1), 0, `${key}=${value(key)}`);
      },
    ],
    [
      3,
      () => {
        const at = rng.below(params.length);
        const key = (params[at] ?? 'model').split('=')[0]!;
        params[at] = `${key}=${value(key)}`;
      },
    ],
    [1, () => params.length > 0 && params.splice(rng.below(params.length), 1)],
    [1, () => params.length > 0 && params.push(rng.pick(params))],
    [1, () => params.push(`x=${'a'.repeat(rng.length(20_000))}`)],
    [2, () => params.splice(0, params.length, latin1(rng, mutateText(rng, params.join('&'), [], 4000)))],
  ])();
  draft.query = params.length > 0 || rng.chance(0.3) ? params.join('&') : null;
};

const mutateVersion: Mutation = (rng, draft) => {
  draft.version = rng.pick(VERSIONS);
};

const mutateHeaders: Mutation = (rng, draft) => {
  const { headers } = draft;
  const index = rng.below(Math.max(1, headers.length));
  const vocabularyValue = (name: string): string => {
    const known = Object.hasOwn(HEADER_VALUES, name.toLowerCase()) ? HEADER_VALUES[name.toLowerCase()] : undefined;
    if (name.toLowerCase() === 'content-length' && rng.chance(0.5)) return String(draft.payload.length + rng.int(-3, 3));
    return known && rng.chance(0.8) ? rng.pick(known) : latin1(rng, awkwardToken(rng, 64));
  };
  rng.weighted<() => void>([
    [
      5,
      () => {
        const name = rng.chance(0.9) ? rng.pick(HEADER_NAMES) : latin1(rng, awkwardToken(rng, 32));
        headers.splice(rng.below(headers.length + 1), 0, [name, vocabularyValue(name)]);
      },
    ],
    [2, () => headers.length > 0 && headers.splice(index, 1)],
    [2, () => headers.length > 0 && headers.splice(index, 0, [headers[index]![0], rng.chance(0.5) ? headers[index]![1] : vocabularyValue(headers[index]![0])])],
    [
      3,
      () => {
        const header = headers[index];
        if (!header) return;
        header[1] = rng.weighted<() => string>([
          [3, () => vocabularyValue(header[0])],
          [2, () => latin1(rng, mutateText(rng, header[1], [], 4096))],
          [1, () => header[1].repeat(rng.length(Math.ceil(65536 / Math.max(1, header[1].length))))],
          [1, () => ''],
          [1, () => header[1] + rng.pick(['\u0000', '\r', '\n', '\r\n', '\u007f', '\u00ff', '\r\n X-Folded: 1', '\r\nX-No-Colon', ' ', '\t'])],
        ])();
      },
    ],
    [
      2,
      () => {
        const header = headers[index];
        if (!header) return;
        header[0] = rng.weighted<() => string>([
          [2, () => (rng.chance(0.5) ? header[0].toUpperCase() : header[0].toLowerCase())],
          [2, () => latin1(rng, mutateText(rng, header[0], HEADER_NAMES, 256))],
          [1, () => `${header[0]} `],
          [1, () => header[0] + rng.pick(['\u0000', ':', '\u00ff', ' x'])],
          [1, () => ''],
        ])();
      },
    ],
    [1, () => headers.length > 1 && headers.push(...headers.splice(index, 1))],
    [1, () => headers.push(...Array.from({ length: rng.length(200) }, (_, i): [string, string] => [`x-fuzz-${i}`, 'v']))],
  ])();
};

const mutateContentType: Mutation = (rng, draft) => {
  setHeader(draft, 'content-type', rng.pick(HEADER_VALUES['content-type']!));
};

const mutateFraming: Mutation = (rng, draft) => {
  const lengths = draft.headers.filter(([n]) => n.toLowerCase() === 'content-length');
  rng.weighted<() => void>([
    [
      3,
      () => {
        if (draft.chunkCuts) {
          draft.headers = draft.headers.filter(([n]) => n.toLowerCase() !== 'transfer-encoding');
          draft.headers.push(['Content-Length', '0']);
          draft.chunkCuts = null;
        } else {
          draft.headers = draft.headers.filter(([n]) => n.toLowerCase() !== 'content-length');
          draft.headers.push(['Transfer-Encoding', 'chunked']);
          draft.chunkCuts = Array.from({ length: rng.length(8) }, () => rng.below(draft.payload.length + 1));
        }
      },
    ],
    [2, () => (draft.fixLength = false)],
    [2, () => draft.headers.push(['Content-Length', String(draft.payload.length + rng.pick([-1, 1, 100, -draft.payload.length]))])],
    [1, () => draft.headers.push(rng.chance(0.5) ? ['Transfer-Encoding', 'chunked'] : ['Content-Length', String(draft.payload.length)])],
    [1, () => draft.chunkCuts && (draft.chunkCuts = Array.from({ length: Math.min(draft.payload.length, 2000) }, (_, i) => i))],
    [1, () => lengths.length > 0 && (lengths[0]![1] = rng.pick(HEADER_VALUES['content-length']!))],
  ])();
};

const mutateJsonBody: Mutation = (rng, draft, pool) => {
  const document = parseJson(draft.payload) ?? rng.pick(pool.documents.length > 0 ? pool.documents : [{}]);
  let mutated = document;
  for (let n = rng.int(1, 3); n > 0; n--) mutated = mutateJson(rng, mutated, JSON_VOCABULARY, pool.documents);
  draft.payload = Buffer.from(jsonText(rng, mutated), 'utf8');
};

const mutateMultipart: Mutation = (rng, draft, pool) => {
  const boundary = boundaryOf(contentType(draft));
  const form = boundary ? parseMultipart(draft.payload, boundary) : null;
  if (!form) return mutateBytesOfBody(rng, draft, pool);
  const { parts } = form;
  const index = rng.below(Math.max(1, parts.length));
  const fieldValue = (name: string): string => {
    const key = name.replace(/\[.*$/, '');
    const known = Object.hasOwn(FIELD_VALUES, key) ? FIELD_VALUES[key] : undefined;
    return known && rng.chance(0.8) ? rng.pick(known) : generateText(rng, 200);
  };
  rng.weighted<() => void>([
    [
      3,
      () => {
        const name = rng.pick(FIELD_NAMES);
        parts.splice(rng.below(parts.length + 1), 0, { head: partHead(name), content: Buffer.from(fieldValue(name)) });
      },
    ],
    [
      3,
      () => {
        const part = parts[index];
        if (!part || /filename=/.test(part.head)) return;
        const name = /name="([^"]*)"/.exec(part.head)?.[1] ?? '';
        part.content = Buffer.from(rng.chance(0.7) ? fieldValue(name) : mutateText(rng, Buffer.from(part.content).toString('utf8'), [], 70_000));
      },
    ],
    [2, () => parts[index] && (parts[index].head = parts[index].head.replace(/name="[^"]*"/, `name="${rng.pick(FIELD_NAMES)}"`))],
    [
      2,
      () => {
        const part = parts[index];
        if (!part) return;
        const filename = rng.pick(FILENAMES);
        part.head = rng.weighted<() => string>([
          [2, () => partHead('file', filename, rng.pick(['audio/wav', 'application/octet-stream', 'text/plain', '']))],
          [1, () => partHead('file')],
          [1, () => `Content-Disposition: form-data; name="file"; filename*=UTF-8''${encodeURIComponent('\u00e9\u00e9.wav')}`],
          [1, () => latin1(rng, mutateText(rng, part.head, [], 2000))],
          [1, () => ''],
        ])();
      },
    ],
    [
      3,
      () =>
        parts[index] &&
        (parts[index].content = mutateBytes(
          rng,
          parts[index].content,
          pool.parts.map((p) => p.content),
          MAX_BODY,
        )),
    ],
    [1, () => parts.length > 0 && parts.splice(index, 1)],
    [1, () => parts[index] && parts.splice(index, 0, { ...parts[index] })],
    [1, () => pool.parts.length > 0 && parts.splice(rng.below(parts.length + 1), 0, { ...rng.pick(pool.parts) })],
    [1, () => (form.closed = !form.closed)],
    [1, () => (form.epilogue = Buffer.from(rng.pick(['--\r\n', `--${form.boundary}\r\n`, '\r\n', 'garbage'])))],
    [1, () => (form.boundary = rng.pick(['other', `${form.boundary}x`, form.boundary.slice(1), '']))],
  ])();
  const bytes = multipartBytes(form);
  draft.payload = rng.chance(0.1) ? bytes.subarray(0, rng.below(bytes.length + 1)) : bytes;
};

const mutateBytesOfBody: Mutation = (rng, draft, pool) => {
  draft.payload = mutateBytes(
    rng,
    draft.payload,
    pool.parts.map((p) => p.content),
    MAX_BODY,
  );
};

const cutOrExtendBody: Mutation = (rng, draft) => {
  draft.payload = rng.chance(0.5)
    ? draft.payload.subarray(0, rng.below(draft.payload.length + 1))
    : Buffer.concat([draft.payload, Buffer.from(Array.from({ length: rng.length(4096) }, () => rng.below(256)))]);
};

const pipeline: Mutation = (rng, draft, pool) => {
  draft.trailing = rng.chance(0.7) && pool.cases.length > 0 ? requestBytes(rng.pick(pool.cases)) : Buffer.from(rng.pick(['\r\n', 'GET / HTTP/1.1\r\n', 'x']));
};

const crossOver: Mutation = (rng, draft, pool) => {
  const donor = draftOf(rng.pick(pool.cases));
  if (rng.chance(0.5)) draft.headers = donor.headers;
  else draft.payload = donor.payload;
};

const splitWrites: Mutation = (rng, draft) => {
  const size = requestBytes(caseOf(draft)).length;
  draft.splits = Array.from({ length: rng.int(1, 6) }, () => rng.below(size));
};

const switchTransport: Mutation = (rng, draft) => {
  draft.transport = rng.pick(TRANSPORTS);
};

export function generateHttpCase(rng: Rng, seeds: readonly Uint8Array[]): HttpCase {
  const pool = poolOf(seeds);
  const seed =
    pool.cases.length > 0
      ? rng.pick(pool.cases)
      : { transport: 'node' as const, method: 'GET', target: '/healthz', version: 'HTTP/1.1', headers: [], body: new Uint8Array(), splits: [] };
  const draft = draftOf(seed);
  draft.transport = rng.pick(TRANSPORTS);
  const isJson = parseJson(draft.payload) !== undefined;
  const isMultipart = boundaryOf(contentType(draft)) !== null;
  for (let n = rng.length(6); n > 0; n--) {
    rng.weighted<Mutation>([
      [2, mutateMethod],
      [3, mutatePath],
      [3, mutateQuery],
      [1, mutateVersion],
      [6, mutateHeaders],
      [2, mutateContentType],
      [2, mutateFraming],
      [isJson ? 8 : 1, mutateJsonBody],
      [isMultipart ? 8 : 0, mutateMultipart],
      [2, mutateBytesOfBody],
      [1, cutOrExtendBody],
      [1, pipeline],
      [1, crossOver],
      [1, splitWrites],
      [1, switchTransport],
    ])(rng, draft, pool);
  }
  return caseOf(draft);
}

// ---- judging ----

function describe(request: HttpCase): string {
  return `${request.method} ${request.target}`.slice(0, 100) + ` (${request.transport})`;
}

/** Why `response` is not an answer voxd may give, or null. */
function wrongAnswer(response: RawResponse): string | null {
  const code = envelopeCode(response.body);
  if (response.status >= 500 && !DOCUMENTED_5XX[response.status]?.includes(code ?? '')) {
    return `${response.status} ${code ?? ''}: ${response.body.toString('utf8', 0, 300)}`;
  }
  // an error after a stream began is a line or an event of the stream, with the status long sent
  const streamed = /text\/event-stream|ndjson/.test(response.headers['content-type'] ?? '');
  if (streamed && response.body.includes('"server_error"')) return `a stream that ended in a server error: ${response.body.toString('utf8').slice(-300)}`;
  return null;
}

export function judgeExchange(request: HttpCase, result: Exchange): Finding | null {
  const what = describe(request);
  switch (result.kind) {
    case 'answered': {
      const wrong =
        wrongAnswer(result.response) ??
        (result.unframed === null ? null : `bytes after the answer that begin no response: ${JSON.stringify(result.unframed)}`) ??
        result.later.map((status) => (status >= 500 && !DOCUMENTED_5XX[status] ? `a later ${status}` : null)).find(Boolean);
      return wrong ? { kind: 'failure', detail: `${what}: ${wrong}` } : null;
    }
    case 'garbled':
      return { kind: 'failure', detail: `${what}: not an HTTP response: ${JSON.stringify(result.text)}` };
    case 'closed':
      return result.begun ? { kind: 'failure', detail: `${what}: the connection closed in the middle of the response (${result.received} bytes)` } : null;
    case 'timeout':
      if (result.begun) return { kind: 'hang', detail: `${what}: the response did not end within ${Math.round(result.ms)} ms` };
      return isComplete(request, request.transport)
        ? { kind: 'hang', detail: `${what}: no answer within ${Math.round(result.ms)} ms to a complete request` }
        : null;
  }
}

export function httpRequestTarget(): FuzzTarget<HttpCase> {
  const servers = new FuzzServers();
  return {
    name: 'http-request',
    format: HTTP_CASE_FORMAT,
    generate: generateHttpCase,
    async run(request) {
      const server = await servers.get(request.transport);
      const result = await exchange(server.port, request, request.transport, { answerMs: ANSWER_MS, openMs: OPEN_MS });
      const serverFinding = await server.check();
      if (serverFinding) serverFinding.detail = `${describe(request)}: ${serverFinding.detail}`;
      const finding = serverFinding ?? judgeExchange(request, result);
      if (finding) await server.restart();
      return finding;
    },
    teardown: () => servers.close(),
  };
}
