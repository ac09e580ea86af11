/**
 * What a route uses to answer, on any transport (transport.ts). Every method is a no-op once the client is gone.
 * Streams honour backpressure: `write()` resolves once the transport can take more, so producers slow down to the
 * client's pace. How a stalled client is kept, and for how long, is the transport's (MAX_STALL_SECONDS).
 */
import { ApiError } from '../errors.js';
import { errorEnvelope } from './errors.js';
import type { ResponseChannel } from './transport.js';

/** How `HttpReply.stream` frames what it sends. */
export type StreamFraming = 'sse' | 'ndjson' | 'bytes';

const FRAMED_CONTENT_TYPES = { sse: 'text/event-stream', ndjson: 'application/x-ndjson' } as const;

const FRAMES: Record<StreamFraming, (item: Uint8Array | string | object) => Uint8Array | string> = {
  sse: (event) => `data: ${JSON.stringify(event)}\n\n`,
  ndjson: (value) => JSON.stringify(value) + '\n',
  bytes: (chunk) => chunk as Uint8Array | string,
};

export interface ReplyOptions {
  /** Sent as `x-request-id`, the first header of every response. */
  requestId: string;
  /** Headers every response carries after the request id (CORS), as names and values alternating; they survive `error()`. */
  baseHeaders: readonly string[];
  /** Asked as the response goes out: whether the connection must close after it. */
  closeConnection: () => boolean;
}

type ReplyState = 'pending' | 'streaming' | 'finished';

const EMPTY = new Uint8Array(0);
const NO_HEADERS: readonly string[] = [];
/** (A regular expression costs more, for the few short strings of a response's headers.) */
const hasLineBreak = (text: string): boolean => text.includes('\n') || text.includes('\r');
/** Content types `header()` accepted already: they need no second look. */
const checkedContentTypes = new Set<string>();
const MAX_CHECKED_CONTENT_TYPES = 64;
/** Headers the transport writes itself from the body it is given. */
const SERVER_MANAGED_HEADERS = new Set(['content-length', 'transfer-encoding', 'connection']);

export class HttpReply {
  readonly #channel: ResponseChannel;
  readonly #options: ReplyOptions;
  /** Headers set on this response (names lower-case, values alternating), in the order first set; null while none. */
  #headers: string[] | null = null;
  #status = 200;
  #state: ReplyState = 'pending';
  #bytes = 0;
  /** Set by interrupt(): the handler's answer is no longer wanted. */
  #interrupted = false;

  constructor(channel: ResponseChannel, options: ReplyOptions) {
    this.#channel = channel;
    this.#options = options;
  }

  /** True once the status line went out (a body was sent or a stream started). */
  get sent(): boolean {
    return this.#state !== 'pending';
  }

  /** The client left, or the server interrupted the response: nothing more is written. */
  get aborted(): boolean {
    return this.#channel.aborted || this.#interrupted;
  }

  /** The response completed or the connection was lost: `done` has settled. */
  get settled(): boolean {
    return this.#channel.completed || this.#channel.aborted;
  }

  /** The whole response was handed to the connection (not cut, not aborted). */
  get completed(): boolean {
    return this.#channel.completed;
  }

  get streaming(): boolean {
    return this.#state === 'streaming';
  }

  get statusCode(): number {
    return this.#status;
  }

  /** Body bytes handed to the transport. */
  get bytesSent(): number {
    return this.#bytes;
  }

  /** Settles when the response completed or the connection was lost. */
  get done(): Promise<void> {
    return this.#channel.done;
  }

  status(code: number): this {
    if (!this.aborted) {
      this.#assertPending();
      this.#status = code;
    }
    return this;
  }

  header(name: string, value: string): this {
    if (this.aborted) return this;
    this.#assertPending();
    const key = name.toLowerCase();
    if (SERVER_MANAGED_HEADERS.has(key)) throw new Error(`the ${key} header is set by the server`);
    if (hasLineBreak(name) || hasLineBreak(value)) throw new Error(`the ${key} header contains a line break`);
    this.#set(key, value);
    return this;
  }

  json(value: unknown, status?: number): void {
    if (status !== undefined) this.status(status);
    this.send(JSON.stringify(value), 'application/json');
  }

  /** `header('content-type', …)`, checked once per distinct type (a few, used over and over). */
  #contentType(type: string): void {
    if (!checkedContentTypes.has(type)) {
      this.header('content-type', type);
      if (checkedContentTypes.size < MAX_CHECKED_CONTENT_TYPES) checkedContentTypes.add(type);
    } else if (!this.aborted) {
      this.#assertPending();
      this.#set('content-type', type);
    }
  }

  text(body: string, contentType = 'text/plain; charset=utf-8'): void {
    this.send(body, contentType);
  }

  /** Sends the whole body (none when omitted, e.g. after `status(204)`). */
  send(body?: Uint8Array | string, contentType?: string, headers?: Record<string, string>): void {
    if (this.aborted) return;
    if (contentType !== undefined) this.#contentType(contentType);
    if (headers) for (const [name, value] of Object.entries(headers)) this.header(name, value);
    this.#assertPending();
    const bytes = typeof body === 'string' ? Buffer.from(body) : (body ?? EMPTY);
    this.#state = 'finished';
    this.#bytes = bytes.byteLength;
    this.#channel.send(this.#status, this.#headerList(), bytes, this.#options.closeConnection());
  }

  /** Renders the error envelope with its status and headers, or aborts when a stream already began. */
  error(error: ApiError): void {
    if (this.aborted || this.#state === 'finished') return;
    if (this.#state === 'streaming') return this.abort();
    this.#headers = null;
    for (const [name, value] of Object.entries(error.headers)) this.header(name, value);
    this.json(errorEnvelope(error), error.status);
  }

  /** Sends the status and headers of a streamed (chunked) body; the client receives them with the first chunk. */
  startStream(status: number, headers: Record<string, string> = {}): void {
    if (this.aborted) return;
    this.status(status);
    for (const [name, value] of Object.entries(headers)) this.header(name, value);
    this.#state = 'streaming';
    this.#channel.startStream(this.#status, this.#headerList(), this.#options.closeConnection());
  }

  /** Writes one chunk of a stream; resolves once the transport can take more (at once after an abort). */
  async write(chunk: Uint8Array | string): Promise<void> {
    if (this.aborted) return;
    if (this.#state !== 'streaming') throw new Error('write() needs startStream() first and must come before end()');
    const data = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
    // an empty chunk would end a chunked body
    if (data.byteLength === 0) return;
    this.#bytes += data.byteLength;
    if (!this.#channel.write(data)) await this.#channel.writable();
  }

  /**
   * Answers with `source` as a streamed body, framed as Server-Sent Events (`data:` events of JSON values), NDJSON
   * (a JSON value per line) or raw bytes, writing at the client's pace. A failure after the stream began ends an
   * SSE or NDJSON stream with the error envelope as its last event and cuts a byte stream (its client can only see
   * a truncated transfer); either way it is rethrown, for the server to log. A client that leaves stops the source.
   */
  async stream(framing: 'bytes', source: AsyncIterable<Uint8Array | string>, headers: Record<string, string>): Promise<void>;
  async stream(framing: 'sse' | 'ndjson', source: AsyncIterable<object>, headers?: Record<string, string>): Promise<void>;
  async stream(framing: StreamFraming, source: AsyncIterable<Uint8Array | string | object>, headers: Record<string, string> = {}): Promise<void> {
    const frame = FRAMES[framing];
    this.startStream(200, framing === 'bytes' ? headers : { 'content-type': FRAMED_CONTENT_TYPES[framing], 'cache-control': 'no-cache', ...headers });
    try {
      for await (const item of source) {
        await this.write(frame(item));
        if (this.aborted) break;
      }
    } catch (error) {
      if (framing !== 'bytes' && !this.aborted) {
        await this.write(frame(errorEnvelope(ApiError.from(error))));
        this.end();
      }
      throw error;
    }
    this.end();
  }

  /** Ends a stream, or answers with no body when nothing was sent yet. No-op when already finished or aborted. */
  end(): void {
    if (this.aborted || this.#state === 'finished') return;
    if (this.#state === 'pending') return this.send();
    this.#state = 'finished';
    this.#channel.end();
  }

  /** Closes the connection at once: the client sees a truncated transfer. */
  abort(): void {
    this.#channel.close();
  }

  /**
   * Ends the response for the server's own reasons (shutdown): `error`'s envelope when nothing was sent yet, else
   * the connection is cut; the request's signal fires so its work stops, and the handler's later writes are ignored.
   */
  interrupt(error: ApiError): void {
    if (this.#interrupted) return;
    this.error(error);
    this.#interrupted = true;
    this.#channel.cancelWork();
  }

  #assertPending(): void {
    if (this.#state !== 'pending') throw new Error('the response was already sent');
  }

  /** Sets a header (a later value replaces an earlier one, in its place). */
  #set(key: string, value: string): void {
    const headers = this.#headers;
    if (headers === null) {
      this.#headers = [key, value];
      return;
    }
    for (let i = 0; i < headers.length; i += 2) {
      if (headers[i] === key) {
        headers[i + 1] = value;
        return;
      }
    }
    headers.push(key, value);
  }

  /** Every header of the response, names and values alternating: the request id, the base headers, then those set. */
  #headerList(): string[] {
    const { requestId, baseHeaders } = this.#options;
    const headers = this.#headers ?? NO_HEADERS;
    const baseLength = 2 + baseHeaders.length;
    // sized exactly, once: a list grown a header at a time is copied as it grows, and shrinking one costs a runtime call
    let length = baseLength;
    for (let i = 0; i < headers.length; i += 2) if (baseIndex(baseHeaders, headers[i] as string) < 0) length += 2;
    const list = new Array<string>(length);
    list[0] = 'x-request-id';
    list[1] = requestId;
    for (let i = 0; i < baseHeaders.length; i++) list[2 + i] = baseHeaders[i] as string;
    let next = baseLength;
    for (let i = 0; i < headers.length; i += 2) {
      // one set on a base header replaces its value in its place
      const at = baseIndex(baseHeaders, headers[i] as string);
      if (at >= 0) {
        list[at + 1] = headers[i + 1] as string;
      } else {
        list[next++] = headers[i] as string;
        list[next++] = headers[i + 1] as string;
      }
    }
    return list;
  }
}

/** Where header `name` sits in the list `#headerList` makes (the request id first, then `baseHeaders`), or -1. */
function baseIndex(baseHeaders: readonly string[], name: string): number {
  if (name === 'x-request-id') return 0;
  for (let j = 0; j < baseHeaders.length; j += 2) if (baseHeaders[j] === name) return 2 + j;
  return -1;
}

/**
 * `pieces` as one base64 text, a string at a time (e.g. a binary value inside a streamed JSON string): a large
 * value never becomes one string, which Node caps at about 512 MiB.
 */
export function* base64Text(pieces: Iterable<Uint8Array>): Generator<string> {
  let carry: Buffer = Buffer.alloc(0);
  for (const piece of pieces) {
    const bytes = carry.length > 0 ? Buffer.concat([carry, piece]) : Buffer.from(piece.buffer, piece.byteOffset, piece.byteLength);
    // base64 encodes 3 bytes at a time: a remainder waits for the next piece, so no padding lands mid-text
    const whole = bytes.length - (bytes.length % 3);
    yield bytes.subarray(0, whole).toString('base64');
    carry = bytes.subarray(whole);
  }
  yield carry.toString('base64');
}
