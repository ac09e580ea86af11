/**
 * What a route uses to answer. Every write is corked and goes through the GuardedResponse, so nothing touches the
 * uWS response after an abort (every method is then a no-op) or after completion. Large bodies and streams
 * honour backpressure: a body is sent with `tryEnd` as the socket drains, and `write()` resolves only once uWS can
 * take more, so producers slow down to the client's pace.
 */
import { STATUS_CODES } from 'node:http';
import type { ApiError } from './errors.js';
import type { GuardedResponse } from './guarded-response.js';
import type { UwsResponse } from './uws.js';

export interface ReplyOptions {
  /** Headers every response carries (request id, CORS); they survive `error()`. */
  baseHeaders: Record<string, string>;
  /** Asked as the response goes out: whether the connection must close after it. */
  closeConnection: () => boolean;
}

type ReplyState = 'pending' | 'streaming' | 'finished';

const EMPTY = new Uint8Array(0);
/** Headers uWS writes itself from the body it is given. */
const SERVER_MANAGED_HEADERS = new Set(['content-length', 'transfer-encoding']);

export class HttpReply {
  readonly #response: GuardedResponse;
  readonly #options: ReplyOptions;
  #headers: Map<string, string>;
  #status = 200;
  #state: ReplyState = 'pending';
  #bytes = 0;
  /** A body uWS has not fully taken yet; the rest goes out from the writable handler. */
  #unsentBody: Uint8Array | null = null;
  #writableHandlerSet = false;
  #writableWaiters: (() => void)[] = [];
  readonly #done: Promise<void>;
  #settle!: () => void;

  constructor(response: GuardedResponse, options: ReplyOptions) {
    this.#response = response;
    this.#options = options;
    this.#headers = new Map(Object.entries(options.baseHeaders));
    this.#done = new Promise((resolve) => (this.#settle = resolve));
    response.signal.addEventListener(
      'abort',
      () => {
        this.#releaseWriters();
        this.#settle();
      },
      { once: true },
    );
  }

  /** True once the status line went out (a body was sent or a stream started). */
  get sent(): boolean {
    return this.#state !== 'pending';
  }

  get aborted(): boolean {
    return this.#response.aborted;
  }

  get streaming(): boolean {
    return this.#state === 'streaming';
  }

  get statusCode(): number {
    return this.#status;
  }

  /** Body bytes handed to uWS. */
  get bytesSent(): number {
    return this.#bytes;
  }

  /** Settles when the response completed or the connection was aborted. */
  get done(): Promise<void> {
    return this.#done;
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
    if (/[\r\n]/.test(name) || /[\r\n]/.test(value)) throw new Error(`the ${key} header contains a line break`);
    this.#headers.set(key, value);
    return this;
  }

  json(value: unknown, status?: number): void {
    if (status !== undefined) this.status(status);
    this.send(JSON.stringify(value), 'application/json');
  }

  text(body: string, contentType = 'text/plain; charset=utf-8'): void {
    this.send(body, contentType);
  }

  /** Sends the whole body (none when omitted, e.g. after `status(204)`). */
  send(body?: Uint8Array | string, contentType?: string): void {
    if (this.aborted) return;
    if (contentType !== undefined) this.header('content-type', contentType);
    this.#finish(typeof body === 'string' ? Buffer.from(body) : (body ?? EMPTY));
  }

  /** Renders the error envelope with its status and headers, or aborts when a stream already began. */
  error(error: ApiError): void {
    if (this.aborted || this.#state === 'finished') return;
    if (this.#state === 'streaming') return this.abort();
    this.#headers = new Map(Object.entries(this.#options.baseHeaders));
    for (const [name, value] of Object.entries(error.headers)) this.header(name, value);
    this.json(error.toEnvelope(), error.status);
  }

  /** Sends the status and headers of a streamed (chunked) body; the client receives them with the first chunk. */
  startStream(status: number, headers: Record<string, string> = {}): void {
    if (this.aborted) return;
    this.status(status);
    for (const [name, value] of Object.entries(headers)) this.header(name, value);
    this.#state = 'streaming';
    this.#response.use((res) => {
      this.#writeHead(res);
      // uWS's own end(…, closeConnection) would write its Connection header into a chunked body: say it up front
      if (this.#options.closeConnection()) res.writeHeader('connection', 'close');
    });
  }

  /** Writes one chunk of a stream; resolves once uWS can take more (at once after an abort). */
  async write(chunk: Uint8Array | string): Promise<void> {
    if (this.aborted) return;
    if (this.#state !== 'streaming') throw new Error('write() needs startStream() first and must come before end()');
    const data = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
    // an empty chunk would mean the end of a chunked body to uWS, which ignores it
    if (data.byteLength === 0) return;
    this.#bytes += data.byteLength;
    if (this.#response.use((res) => res.write(data)) === false) await this.#writable();
  }

  /** Ends a stream, or answers with no body when nothing was sent yet. No-op when already finished or aborted. */
  end(): void {
    if (this.aborted || this.#state === 'finished') return;
    if (this.#state === 'pending') return this.send();
    this.#state = 'finished';
    this.#response.use((res) => res.end());
    this.#complete();
  }

  /** Closes the connection at once: the client sees a truncated transfer. */
  abort(): void {
    this.#response.close();
  }

  #assertPending(): void {
    if (this.#state !== 'pending') throw new Error('the response was already sent');
  }

  #finish(body: Uint8Array): void {
    this.#assertPending();
    this.#state = 'finished';
    this.#bytes = body.byteLength;
    this.#response.use((res) => {
      this.#writeHead(res);
      if (this.#options.closeConnection()) {
        res.end(body, true); // uWS adds `Connection: close`
      } else if (this.#status === 204 || this.#status === 304) {
        res.endWithoutBody(); // no Content-Length for statuses that never have a body
      } else if (!res.tryEnd(body, body.byteLength)[1]) {
        this.#unsentBody = body;
        this.#watchWritable(res);
        return;
      }
      this.#complete();
    });
  }

  #writeHead(res: UwsResponse): void {
    res.writeStatus(`${this.#status} ${STATUS_CODES[this.#status] ?? 'Unknown'}`);
    for (const [name, value] of this.#headers) res.writeHeader(name, value);
  }

  #complete(): void {
    this.#response.markFinished();
    this.#settle();
  }

  #writable(): Promise<void> {
    this.#response.use((res) => this.#watchWritable(res));
    return new Promise((resolve) => this.#writableWaiters.push(resolve));
  }

  #watchWritable(res: UwsResponse): void {
    if (this.#writableHandlerSet) return;
    this.#writableHandlerSet = true;
    res.onWritable((offset) => this.#onWritable(offset));
  }

  #onWritable(offset: number): boolean {
    const body = this.#unsentBody;
    if (body) {
      const [ok, done] = this.#response.use((res) => res.tryEnd(body.subarray(offset), body.byteLength)) ?? [true, true];
      if (done) {
        this.#unsentBody = null;
        this.#complete();
      }
      return ok;
    }
    // while a writable handler is set, uWS leaves its buffered bytes alone; the uncork at the end of use() sends them
    this.#response.use(() => undefined);
    this.#releaseWriters();
    return true;
  }

  #releaseWriters(): void {
    const waiters = this.#writableWaiters;
    this.#writableWaiters = [];
    for (const resolve of waiters) resolve();
  }
}
