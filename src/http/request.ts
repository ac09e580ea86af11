/**
 * What a route sees of a request: its head as the transport copied it, and the body read through size-limited,
 * validating helpers.
 */
import { randomFillSync } from 'node:crypto';
import type { z } from 'zod';
import { ApiError } from '../errors.js';
import { parseMultipart, type MultipartForm, type MultipartLimits } from './multipart.js';
import type { RequestBody } from './request-body.js';
import type { ResponseChannel } from './transport.js';
import { validate } from './validate.js';

export interface RequestHead {
  method: string;
  /** The path as sent (percent-encoded), without the query. */
  path: string;
  rawQuery: string;
  /** Lower-case names; repeated headers joined with `, `. */
  headers: Record<string, string>;
}

function HeaderRecord(): void {}
// no Object.prototype behind it: `name in headers` and `headers[name]` see headers only (`constructor`, `__proto__`
// included), as with Object.create(null), which however makes a dictionary that every header added has to grow
HeaderRecord.prototype = Object.create(null) as object;

/** A new, empty `RequestHead.headers` for a transport to fill. */
export function emptyHeaders(): Record<string, string> {
  return new (HeaderRecord as unknown as new () => Record<string, string>)();
}

/** How the body of a request is delimited, or why it cannot be told safely. */
export type BodyFraming = { length: number | null; chunked: boolean; error: null } | { length: null; chunked: false; error: string };

/**
 * Reads Content-Length and Transfer-Encoding (RFC 9112, section 6). Conflicting lengths, a length that is not a
 * number, or both headers at once mean a proxy in front may see a different body than the transport does
 * (request smuggling): such a request is refused and its connection closed. (node:http's parser refuses them
 * before voxd sees them; uWS takes the first length.)
 */
export function bodyFraming(headers: Readonly<Record<string, string>>): BodyFraming {
  const rawLength = headers['content-length'];
  if (rawLength === undefined && headers['transfer-encoding'] === undefined) return NO_BODY;
  const chunked = /\bchunked\b/i.test(headers['transfer-encoding'] ?? '');
  if (rawLength === undefined) return { length: null, chunked, error: null };
  if (headers['transfer-encoding'] !== undefined) return { length: null, chunked: false, error: 'Content-Length and Transfer-Encoding must not both be sent' };
  // repeated headers arrive joined with ", " (readRequestHead); identical repeats are harmless
  const values = new Set(rawLength.split(',').map((v) => v.trim()));
  const [only] = values;
  if (values.size !== 1 || only === undefined || !/^\d{1,15}$/.test(only)) {
    return { length: null, chunked: false, error: `invalid Content-Length: ${JSON.stringify(rawLength.slice(0, 64))}` };
  }
  return { length: Number(only), chunked, error: null };
}

/** The framing of most requests (a GET, say): neither header. */
const NO_BODY: BodyFraming = Object.freeze({ length: null, chunked: false, error: null });

const SANE_REQUEST_ID = /^[\w.:@/+=-]{1,200}$/;

/** Random bytes for request ids, 16 a piece, refilled as crypto.randomUUID refills its own. */
const UUIDS_PER_FILL = 128;
const uuidBytes = Buffer.alloc(16 * UUIDS_PER_FILL);
let uuidsLeft = 0;
const uuidText = Buffer.from('00000000-0000-0000-0000-000000000000', 'latin1');
const HEX_DIGITS = Buffer.from('0123456789abcdef', 'latin1');
/** Where each byte's two hex digits go in the text. */
const HEX_AT = [0, 2, 4, 6, 9, 11, 14, 16, 19, 21, 24, 26, 28, 30, 32, 34];

/**
 * A random (version 4) UUID, as crypto.randomUUID makes it, but as one flat string: randomUUID joins 20 pieces
 * into a string V8 must flatten again the first time it is written out or hashed (on every response).
 */
export function requestUuid(): string {
  if (uuidsLeft === 0) {
    randomFillSync(uuidBytes);
    uuidsLeft = UUIDS_PER_FILL;
  }
  const at = --uuidsLeft * 16;
  uuidBytes[at + 6] = ((uuidBytes[at + 6] as number) & 0x0f) | 0x40; // version 4
  uuidBytes[at + 8] = ((uuidBytes[at + 8] as number) & 0x3f) | 0x80; // variant 10
  for (let i = 0; i < 16; i++) {
    const byte = uuidBytes[at + i] as number;
    const to = HEX_AT[i] as number;
    uuidText[to] = HEX_DIGITS[byte >> 4] as number;
    uuidText[to + 1] = HEX_DIGITS[byte & 15] as number;
  }
  return uuidText.toString('latin1', 0, 36);
}

export class HttpRequest {
  readonly method: string;
  /** The path as sent (percent-encoded); route parameters in `params` are decoded. */
  readonly path: string;
  /** The query string as sent, without `?`. */
  readonly rawQuery: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly params: Readonly<Record<string, string>>;
  /** The client's `x-request-id` when it is sane, else a generated one; echoed on the response. */
  readonly id: string;
  readonly #body: RequestBody;
  readonly #channel: Pick<ResponseChannel, 'signal'>;
  #query: URLSearchParams | null = null;

  /** `channel`: where the request's signal comes from (asked for only when a route needs it). */
  constructor(head: RequestHead, params: Record<string, string>, body: RequestBody, channel: Pick<ResponseChannel, 'signal'>) {
    this.method = head.method;
    this.path = head.path;
    this.rawQuery = head.rawQuery;
    this.headers = head.headers;
    this.params = params;
    const clientId = head.headers['x-request-id'];
    this.id = clientId !== undefined && SANE_REQUEST_ID.test(clientId) ? clientId : requestUuid();
    this.#channel = channel;
    this.#body = body;
  }

  /** The parsed query, made on first use (most requests have none). */
  get query(): URLSearchParams {
    return (this.#query ??= new URLSearchParams(this.rawQuery));
  }

  /** Aborted when the client disconnects before the response completed. */
  get signal(): AbortSignal {
    return this.#channel.signal;
  }

  header(name: string): string | undefined {
    return this.headers[name.toLowerCase()];
  }

  /** The whole body; 413 as soon as it passes `limitBytes` (at once when Content-Length says so). */
  async body(limitBytes: number): Promise<Buffer> {
    const chunks: Buffer[] = [];
    for await (const chunk of this.#body.read(limitBytes)) chunks.push(chunk);
    return Buffer.concat(chunks);
  }

  /** A JSON body validated by `schema`: 415 for another content type, 400 `invalid_json` or `invalid_request`. */
  async json<S extends z.ZodType>(schema: S, limitBytes: number): Promise<z.output<S>> {
    const contentType = this.header('content-type');
    if (!contentType || !/^application\/([\w.+-]+\+)?json\s*(;|$)/i.test(contentType)) {
      throw new ApiError('unsupported_media_type', `Expected application/json, got ${contentType || 'no content type'}`);
    }
    const text = (await this.body(limitBytes)).toString('utf8');
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch (error) {
      const reason = text.trim() === '' ? 'the body is empty' : (error as Error).message;
      throw new ApiError('invalid_json', `Malformed JSON body: ${reason}`);
    }
    return validate(schema, value);
  }

  /** A multipart/form-data body (415 for another content type, 400 when malformed, 413 past the limits). */
  multipart(limits: MultipartLimits): Promise<MultipartForm> {
    return parseMultipart(this.header('content-type'), this.#body, limits);
  }
}
