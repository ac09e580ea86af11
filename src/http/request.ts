/**
 * What a route sees of a request: its head as the transport copied it, and the body read through size-limited,
 * validating helpers.
 */
import { randomUUID } from 'node:crypto';
import type { z } from 'zod';
import { ApiError } from '../errors.js';
import { parseMultipart, type MultipartForm, type MultipartLimits } from './multipart.js';
import type { RequestBody } from './request-body.js';
import { validate } from './validate.js';

export interface RequestHead {
  method: string;
  /** The path as sent (percent-encoded), without the query. */
  path: string;
  rawQuery: string;
  /** Lower-case names; repeated headers joined with `, `. */
  headers: Record<string, string>;
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

const SANE_REQUEST_ID = /^[\w.:@/+=-]{1,200}$/;

export class HttpRequest {
  readonly method: string;
  /** The path as sent (percent-encoded); route parameters in `params` are decoded. */
  readonly path: string;
  readonly query: URLSearchParams;
  readonly headers: Readonly<Record<string, string>>;
  readonly params: Readonly<Record<string, string>>;
  /** The client's `x-request-id` when it is sane, else a generated one; echoed on the response. */
  readonly id: string;
  readonly #body: RequestBody;
  readonly #signal: () => AbortSignal;

  /** `signal`: the request's, asked for only when a route needs it. */
  constructor(head: RequestHead, params: Record<string, string>, body: RequestBody, signal: () => AbortSignal) {
    this.method = head.method;
    this.path = head.path;
    this.query = new URLSearchParams(head.rawQuery);
    this.headers = head.headers;
    this.params = params;
    const clientId = head.headers['x-request-id'];
    this.id = clientId !== undefined && SANE_REQUEST_ID.test(clientId) ? clientId : randomUUID();
    this.#signal = signal;
    this.#body = body;
  }

  /** Aborted when the client disconnects before the response completed. */
  get signal(): AbortSignal {
    return this.#signal();
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
    return parseMultipart(this.header('content-type'), (limitBytes) => this.#body.read(limitBytes), limits);
  }
}
