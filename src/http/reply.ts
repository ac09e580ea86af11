/**
 * What a route uses to answer. Every write is corked and goes through the GuardedResponse, so nothing touches the
 * uWS response after an abort (every method is then a no-op) or after completion. Large bodies and streams
 * honour backpressure: a body is sent with `tryEnd` as the socket drains, and while the client does not take
 * bytes a stream's writes queue up to STALLED_QUEUE_BYTES, beyond which `write()` waits, so producers slow down to
 * the client's pace.
 *
 * A client may stop reading for a while (an audio player on pause). uWS closes a connection about 10 s after a
 * write it could not pass on, unless the client drains it; so while the client takes nothing the reply hands uWS
 * what waits every 2 s, until a write is held back again (which restarts uWS's timer), and gives up, cutting the
 * response, only after MAX_STALL_SECONDS.
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
/** Stream bytes accepted while the client takes none, before `write()` makes the producer wait. */
const STALLED_QUEUE_BYTES = 1024 * 1024;
/** How long a response waits for a client that takes no bytes before it is cut (README: a paused stream). */
const MAX_STALL_SECONDS = 300;
/** Well under uWS's 10 s idle timeout: how often a stalled response hands uWS what waits. */
const KEEP_ALIVE_MS = 2000;
/** Larger than uWS's 16 KiB cork buffer, so each write's outcome is known at once. */
const KEEP_ALIVE_PIECE_BYTES = 64 * 1024;
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
  /** Set by interrupt(): the handler's answer is no longer wanted. */
  #interrupted = false;
  /** The whole response went out to uWS. */
  #completed = false;
  #writableWaiters: (() => void)[] = [];
  /** Stream bytes waiting for the client to take what uWS already holds. */
  #queued: Buffer[] = [];
  #queuedBytes = 0;
  /** When the client stopped taking bytes; null while it keeps up. */
  #stalledSince: number | null = null;
  #keepAlive: NodeJS.Timeout | null = null;
  /** end() was called while bytes still queued: the stream ends once they went out. */
  #endWhenDrained = false;
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
        this.#unstall();
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

  /** The client left, or the server interrupted the response: nothing more is written. */
  get aborted(): boolean {
    return this.#response.aborted || this.#interrupted;
  }

  /** The whole response was handed to the connection (not cut, not aborted). */
  get completed(): boolean {
    return this.#completed;
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
    if (this.#stalledSince !== null) {
      this.#queued.push(Buffer.from(data.buffer, data.byteOffset, data.byteLength));
      this.#queuedBytes += data.byteLength;
      if (this.#queuedBytes >= STALLED_QUEUE_BYTES) await this.#writable();
      return;
    }
    if (this.#response.use((res) => res.write(data)) === false) this.#stall();
  }

  /**
   * Writes `pieces` as one base64 text into a stream (e.g. inside a JSON string), piece by piece: a large binary
   * value never becomes one string, which Node caps at about 512 MiB.
   */
  async writeBase64(pieces: Iterable<Uint8Array>): Promise<void> {
    let carry: Buffer = Buffer.alloc(0);
    for (const piece of pieces) {
      const bytes = carry.length > 0 ? Buffer.concat([carry, piece]) : Buffer.from(piece.buffer, piece.byteOffset, piece.byteLength);
      // base64 encodes 3 bytes at a time: a remainder waits for the next piece, so no padding lands mid-text
      const whole = bytes.length - (bytes.length % 3);
      await this.write(bytes.subarray(0, whole).toString('base64'));
      carry = bytes.subarray(whole);
      if (this.aborted) return;
    }
    await this.write(carry.toString('base64'));
  }

  /** Ends a stream, or answers with no body when nothing was sent yet. No-op when already finished or aborted. */
  end(): void {
    if (this.aborted || this.#state === 'finished') return;
    if (this.#state === 'pending') return this.send();
    this.#state = 'finished';
    if (this.#queuedBytes > 0) {
      this.#endWhenDrained = true; // the writable handler ends it
      return;
    }
    this.#response.use((res) => res.end());
    this.#complete();
  }

  /** Closes the connection at once: the client sees a truncated transfer. */
  abort(): void {
    this.#response.close();
  }

  /**
   * Ends the response for the server's own reasons (shutdown): `error`'s envelope when nothing was sent yet, else
   * the connection is cut; the request's signal fires so its work stops, and the handler's later writes are ignored.
   */
  interrupt(error: ApiError): void {
    if (this.#interrupted) return;
    this.error(error);
    this.#interrupted = true;
    this.#response.cancelWork();
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
        this.#stall();
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
    this.#completed = true;
    this.#unstall();
    this.#response.markFinished();
    this.#settle();
  }

  #writable(): Promise<void> {
    return new Promise((resolve) => this.#writableWaiters.push(resolve));
  }

  /** The client takes no more for now: watch for writable, and keep the connection alive meanwhile. */
  #stall(): void {
    if (this.#stalledSince !== null) return;
    this.#stalledSince = performance.now();
    this.#response.use((res) => {
      if (this.#writableHandlerSet) return;
      this.#writableHandlerSet = true;
      res.onWritable((offset) => this.#onWritable(offset));
    });
    this.#keepAlive = setInterval(() => this.#keepConnectionAlive(), KEEP_ALIVE_MS);
  }

  #unstall(): void {
    this.#stalledSince = null;
    if (this.#keepAlive) clearInterval(this.#keepAlive);
    this.#keepAlive = null;
  }

  /**
   * uWS restarts its idle timer only when a write cannot be passed on at once, so this hands it what waits, piece by
   * piece, until one piece is held back (the kernel's buffers are full: the client really takes nothing). Cuts the
   * response after MAX_STALL_SECONDS.
   */
  #keepConnectionAlive(): void {
    if (this.#stalledSince === null || !this.#response.open) return this.#unstall();
    if (performance.now() - this.#stalledSince > MAX_STALL_SECONDS * 1000) {
      this.#unstall();
      this.#response.close();
      return;
    }
    this.#response.use((res) => {
      const body = this.#unsentBody;
      if (body) {
        for (let offset = res.getWriteOffset(); offset < body.byteLength - 1; offset = res.getWriteOffset()) {
          if (!res.tryEnd(body.subarray(offset, Math.min(offset + KEEP_ALIVE_PIECE_BYTES, body.byteLength - 1)), body.byteLength)[0]) return;
        }
        return;
      }
      // nothing left to send when the queue runs dry: then uWS's own timer ends the connection
      while (this.#queued.length > 0) {
        const head = this.#queued[0] as Buffer;
        const piece = head.subarray(0, KEEP_ALIVE_PIECE_BYTES);
        this.#queued[0] = head.subarray(piece.byteLength);
        if (this.#queued[0].byteLength === 0) this.#queued.shift();
        this.#queuedBytes -= piece.byteLength;
        if (!res.write(piece)) break;
      }
    });
    if (this.#queuedBytes < STALLED_QUEUE_BYTES) this.#releaseWriters();
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
    const queued = this.#queued.length > 0 ? Buffer.concat(this.#queued) : null;
    this.#queued = [];
    this.#queuedBytes = 0;
    // while a writable handler is set, uWS leaves its buffered bytes alone; the uncork at the end of use() sends them
    const ok = this.#response.use((res) => (queued ? res.write(queued) : true)) ?? true;
    if (!ok) return false;
    this.#unstall();
    if (this.#endWhenDrained) {
      this.#response.use((res) => res.end());
      this.#complete();
    }
    this.#releaseWriters();
    return true;
  }

  #releaseWriters(): void {
    const waiters = this.#writableWaiters;
    this.#writableWaiters = [];
    for (const resolve of waiters) resolve();
  }
}
