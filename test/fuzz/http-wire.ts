/**
 * HTTP/1.1 on the wire, as the http-request fuzz target needs it: a request written byte for byte as the fuzzer
 * made it (no client library tidies it up), whether it is complete by its own framing, multipart and chunked bodies
 * taken apart and put back together, and the server's answer read back from the raw bytes.
 */
import net from 'node:net';
import type { TransportName } from '../../src/http/transport.js';

/** A request as written. Strings are latin1: one character per byte, so any byte can be sent. */
export interface RawRequest {
  method: string;
  /** Path and query, as sent. */
  target: string;
  version: string;
  headers: [string, string][];
  /** As sent: a chunked body is in its transfer coding. */
  body: Uint8Array;
  /** Byte offsets where the request is cut into separate writes: parsers must join the pieces. */
  splits: number[];
}

export function requestBytes(request: RawRequest): Buffer {
  const head = `${request.method} ${request.target} ${request.version}\r\n${request.headers.map(([name, value]) => `${name}: ${value}\r\n`).join('')}\r\n`;
  return Buffer.concat([Buffer.from(head, 'latin1'), request.body]);
}

/** The values of a header, by case-insensitive name. */
export function headerValues(headers: readonly [string, string][], name: string): string[] {
  return headers.filter(([n]) => n.toLowerCase() === name).map(([, v]) => v);
}

const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const PLAIN_NAME = /^[0-9A-Za-z-]+$/;
const FIELD_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;
const ORIGIN_FORM = /^\/[\x21-\x7e\x80-\xff]*$/;
const PLAIN_HEADER_COUNT = 40;

/**
 * Whether the head is the plainest HTTP/1.1: a token method, an origin-form target, one Host header, at most
 * PLAIN_HEADER_COUNT headers whose names are letters, digits and hyphens, values without control characters.
 * uWebSockets.js leaves anything less plain unanswered and drops the connection at its idle timeout (HTTP/1.0, no
 * Host header, `_` or `.` in a name, a control character in a value, some 50 headers: docs/deploy.md).
 */
function isPlainHead(request: RawRequest): boolean {
  const { method, target, version, headers } = request;
  if (!TOKEN.test(method) || !ORIGIN_FORM.test(target) || version !== 'HTTP/1.1') return false;
  if (headers.length > PLAIN_HEADER_COUNT || !headers.every(([name, value]) => PLAIN_NAME.test(name) && FIELD_VALUE.test(value))) return false;
  return headerValues(headers, 'host').length === 1;
}

/**
 * The head's header lines as a server reads them off the wire (a value with a line break in it makes more than
 * one), each split at its first colon, and the bytes after the head; null when a line is no header field (no
 * colon, space before the colon, a folded line, a lone CR or LF), which node:http refuses at once.
 */
function readWire(request: RawRequest): { headers: [string, string][]; body: Buffer } | null {
  const bytes = requestBytes(request);
  const headEnd = bytes.indexOf('\r\n\r\n');
  const [requestLine = '', ...lines] = bytes.toString('latin1', 0, headEnd).split('\r\n');
  if (/[\r\n]/.test(requestLine)) return null;
  const headers: [string, string][] = [];
  for (const line of lines) {
    const colon = line.indexOf(':');
    if (colon <= 0 || /[\r\n]/.test(line) || !TOKEN.test(line.slice(0, colon))) return null;
    headers.push([line.slice(0, colon), line.slice(colon + 1).trim()]);
  }
  return { headers, body: bytes.subarray(headEnd + 4) };
}

/**
 * Whether the server has all it needs to answer `request` on `transport`: a head it takes (on uWS, the plainest
 * HTTP/1.1, isPlainHead; node:http answers any head, refusing what it cannot parse at once), and a body whole by
 * its framing, or framing the server must refuse at once (lengths that disagree, a length beside a transfer
 * coding). Anything less may leave a server rightly waiting for more bytes.
 */
export function isComplete(request: RawRequest, transport: TransportName): boolean {
  if (transport === 'uws' && !isPlainHead(request)) return false;
  const wire = readWire(request);
  if (wire === null) return true; // refused at once
  const { headers, body } = wire;
  const lengths = headerValues(headers, 'content-length').flatMap((v) => v.split(',').map((x) => x.trim()));
  const codings = headerValues(headers, 'transfer-encoding');
  if (codings.length > 0) {
    if (lengths.length > 0) return true; // refused at once (request smuggling)
    const last = codings.join(',').split(',').pop()?.trim().toLowerCase();
    return last === 'chunked' && dechunk(body)?.complete === true;
  }
  if (lengths.length === 0) return true; // no body
  if (!lengths.every((v) => /^\d{1,15}$/.test(v))) return true; // refused at once: not a length
  if (new Set(lengths.map(Number)).size > 1) return true; // refused at once: lengths that disagree
  return body.length >= Number(lengths[0]);
}

/** A chunked body's payload, whether its last chunk and trailers arrived, and where they end; null when malformed. */
export function dechunk(body: Uint8Array): { payload: Buffer; complete: boolean; end: number } | null {
  const raw = Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  const parts: Buffer[] = [];
  let at = 0;
  for (;;) {
    const lineEnd = raw.indexOf('\r\n', at);
    if (lineEnd < 0) return { payload: Buffer.concat(parts), complete: false, end: raw.length };
    const match = /^([0-9a-fA-F]{1,8})(;[\x20-\x7e]*)?$/.exec(raw.toString('latin1', at, lineEnd));
    if (!match) return null;
    const size = Number.parseInt(match[1]!, 16);
    at = lineEnd + 2;
    if (size === 0) {
      // trailer fields, then an empty line
      for (;;) {
        const end = raw.indexOf('\r\n', at);
        if (end < 0) return { payload: Buffer.concat(parts), complete: false, end: raw.length };
        const line = raw.toString('latin1', at, end);
        at = end + 2;
        if (line === '') return { payload: Buffer.concat(parts), complete: true, end: at };
        if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+:[\t\x20-\x7e]*$/.test(line)) return null;
      }
    }
    if (at + size + 2 > raw.length) return { payload: Buffer.concat(parts), complete: false, end: raw.length };
    parts.push(raw.subarray(at, at + size));
    if (raw[at + size] !== 0x0d || raw[at + size + 1] !== 0x0a) return null;
    at += size + 2;
  }
}

/** `payload` in the chunked transfer coding, cut where `cuts` say (byte offsets), with the last chunk. */
export function chunked(payload: Uint8Array, cuts: number[]): Buffer {
  const bounds = [...new Set([0, ...cuts.filter((c) => c > 0 && c < payload.length), payload.length])].sort((a, b) => a - b);
  const pieces: Buffer[] = [];
  for (let i = 0; i + 1 < bounds.length; i++) {
    const data = payload.subarray(bounds[i], bounds[i + 1]);
    if (data.length > 0) pieces.push(Buffer.from(`${data.length.toString(16)}\r\n`), Buffer.from(data), Buffer.from('\r\n'));
  }
  return Buffer.concat([...pieces, Buffer.from('0\r\n\r\n')]);
}

// ---- multipart/form-data ----

export interface FormPart {
  /** The part's header lines (latin1), without the blank line that ends them. */
  head: string;
  content: Uint8Array;
}

export interface MultipartBody {
  boundary: string;
  parts: FormPart[];
  /** Bytes after the closing delimiter (none when it is left out). */
  epilogue: Uint8Array;
  /** Whether the closing delimiter (`--boundary--`) is there. */
  closed: boolean;
}

/** The boundary parameter of a multipart content type, or null. */
export function boundaryOf(contentType: string | undefined): string | null {
  const match = /;\s*boundary=(?:"([^"]*)"|([^;\s]*))/i.exec(contentType ?? '');
  return match ? (match[1] ?? match[2] ?? null) : null;
}

/** The Content-Disposition head of a form field or file part. */
export function partHead(name: string, filename?: string, contentType?: string): string {
  const disposition = `Content-Disposition: form-data; name="${name}"${filename === undefined ? '' : `; filename="${filename}"`}`;
  return contentType === undefined ? disposition : `${disposition}\r\nContent-Type: ${contentType}`;
}

export function multipartBytes(body: MultipartBody): Buffer {
  const pieces: Buffer[] = [];
  for (const part of body.parts) {
    pieces.push(Buffer.from(`--${body.boundary}\r\n${part.head}\r\n\r\n`, 'latin1'), Buffer.from(part.content), Buffer.from('\r\n'));
  }
  if (body.closed) pieces.push(Buffer.from(`--${body.boundary}--\r\n`, 'latin1'));
  pieces.push(Buffer.from(body.epilogue));
  return Buffer.concat(pieces);
}

/** Takes a multipart body apart along `boundary`; null when it has no first delimiter. */
export function parseMultipart(payload: Uint8Array, boundary: string): MultipartBody | null {
  const raw = Buffer.from(payload.buffer, payload.byteOffset, payload.byteLength);
  const delimiter = Buffer.from(`--${boundary}`, 'latin1');
  let at = raw.indexOf(delimiter);
  if (at < 0 || boundary === '') return null;
  const parts: FormPart[] = [];
  for (;;) {
    const afterDelimiter = at + delimiter.length;
    if (raw.toString('latin1', afterDelimiter, afterDelimiter + 2) === '--') {
      const end = raw.toString('latin1', afterDelimiter + 2, afterDelimiter + 4) === '\r\n' ? afterDelimiter + 4 : afterDelimiter + 2;
      return { boundary, parts, epilogue: raw.subarray(end), closed: true };
    }
    const headStart = afterDelimiter + 2;
    const headEnd = raw.indexOf('\r\n\r\n', headStart);
    const next = raw.indexOf(Buffer.from(`\r\n--${boundary}`, 'latin1'), headStart);
    if (headEnd < 0 || next < 0 || headEnd > next) {
      // a part cut short: what is left is its content
      const head = headEnd < 0 ? raw.toString('latin1', headStart) : raw.toString('latin1', headStart, headEnd);
      parts.push({ head, content: headEnd < 0 ? new Uint8Array() : raw.subarray(headEnd + 4) });
      return { boundary, parts, epilogue: new Uint8Array(), closed: false };
    }
    parts.push({ head: raw.toString('latin1', headStart, headEnd), content: raw.subarray(headEnd + 4, next) });
    at = next + 2;
  }
}

// ---- the exchange ----

export interface RawResponse {
  status: number;
  /** Lower-case names; repeated headers joined with `, `. */
  headers: Record<string, string>;
  body: Buffer;
}

/**
 * What came back: a whole response (and the statuses of any that followed it in the same bytes, and the bytes right
 * after it when they begin no response on a connection kept open: a body where there must be none, after a HEAD's
 * answer); bytes that are no
 * HTTP response; or the connection closed first, or nothing more came within the time allowed, either with part of
 * a response (`begun`) or none.
 */
export type Exchange =
  | { kind: 'answered'; response: RawResponse; later: number[]; unframed: string | null; ms: number }
  | { kind: 'garbled'; text: string }
  | { kind: 'closed'; begun: boolean; received: number }
  | { kind: 'timeout'; begun: boolean; received: number; ms: number };

type Parsed = { response: RawResponse; end: number } | 'more' | 'garbled';

/** The response starting at `from`, 1xx interim answers skipped; `closed`: no more bytes will come. */
function parseResponse(data: Buffer, from: number, method: string, closed: boolean): Parsed {
  const headEnd = data.indexOf('\r\n\r\n', from);
  if (headEnd < 0) return 'more';
  const lines = data.toString('latin1', from, headEnd).split('\r\n');
  const status = /^HTTP\/1\.[01] (\d{3})(?: |$)/.exec(lines[0] ?? '');
  if (!status) return 'garbled';
  const code = Number(status[1]);
  const headers: Record<string, string> = {};
  for (const line of lines.slice(1)) {
    const colon = line.indexOf(':');
    if (colon <= 0) return 'garbled';
    const name = line.slice(0, colon).trim().toLowerCase();
    const value = line.slice(colon + 1).trim();
    headers[name] = name in headers ? `${headers[name]}, ${value}` : value;
  }
  const bodyStart = headEnd + 4;
  if (code >= 100 && code < 200 && code !== 101) return parseResponse(data, bodyStart, method, closed);
  const done = (end: number, body: Buffer): Parsed => ({ response: { status: code, headers, body }, end });
  if (code === 101 || code === 204 || code === 304 || method === 'HEAD') return done(bodyStart, Buffer.alloc(0));
  if (/chunked/i.test(headers['transfer-encoding'] ?? '')) {
    const decoded = dechunk(data.subarray(bodyStart));
    if (!decoded) return 'garbled';
    return decoded.complete ? done(bodyStart + decoded.end, decoded.payload) : 'more';
  }
  if (headers['content-length'] !== undefined) {
    const length = Number(headers['content-length']);
    if (!Number.isSafeInteger(length) || length < 0) return 'garbled';
    return data.length - bodyStart >= length ? done(bodyStart + length, data.subarray(bodyStart, bodyStart + length)) : 'more';
  }
  return closed ? done(data.length, data.subarray(bodyStart)) : 'more'; // delimited by the close
}

/**
 * Writes `request` on a fresh connection to `port` and reads the first final response. Waits up to `answerMs` for
 * it when the request is complete or once a response has begun, else `openMs` (a server may rightly wait for the
 * rest of an incomplete request).
 */
export async function exchange(port: number, request: RawRequest, transport: TransportName, limits: { answerMs: number; openMs: number }): Promise<Exchange> {
  const bytes = requestBytes(request);
  const complete = isComplete(request, transport);
  const started = performance.now();
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.setNoDelay(true);
    let data = Buffer.alloc(0);
    let settled = false;
    const finish = (result: Exchange): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      resolve(result);
    };
    let timer = setTimeout(
      () => finish({ kind: 'timeout', begun: false, received: 0, ms: performance.now() - started }),
      complete ? limits.answerMs : limits.openMs,
    );
    const read = (closed: boolean): void => {
      const first = parseResponse(data, 0, request.method, closed);
      if (typeof first === 'object') {
        const later: number[] = [];
        for (
          let next = parseResponse(data, first.end, request.method, closed);
          typeof next === 'object';
          next = parseResponse(data, next.end, request.method, closed)
        ) {
          later.push(next.response.status);
        }
        // bytes after the answer matter only on a connection that goes on as HTTP
        const goesOn = first.response.status !== 101 && !/\bclose\b/i.test(first.response.headers.connection ?? '');
        const after = data.toString('latin1', first.end, first.end + 'HTTP/1.'.length);
        const unframed = !goesOn || after === '' || 'HTTP/1.'.startsWith(after) ? null : data.toString('latin1', first.end, first.end + 80);
        return finish({ kind: 'answered', response: first.response, later, unframed, ms: performance.now() - started });
      }
      if (first === 'garbled') return finish({ kind: 'garbled', text: data.toString('latin1', 0, 300) });
      if (closed) return finish({ kind: 'closed', begun: data.length > 0, received: data.length });
      if (data.length > 0 && !complete) {
        // an answer has begun: it must end, whatever the request
        clearTimeout(timer);
        timer = setTimeout(
          () => finish({ kind: 'timeout', begun: true, received: data.length, ms: performance.now() - started }),
          limits.answerMs - (performance.now() - started),
        );
      }
    };
    socket.on('data', (chunk: Buffer) => {
      data = Buffer.concat([data, chunk]);
      read(false);
    });
    socket.on('error', () => undefined); // a reset shows as the close that follows
    socket.on('close', () => read(true));
    socket.once('connect', () => void writePieces(socket, bytes, request.splits));
  });
}

/** Writes `bytes` cut at `splits`, each piece after the last one was handed to the kernel. */
async function writePieces(socket: net.Socket, bytes: Buffer, splits: number[]): Promise<void> {
  const bounds = [...new Set([0, ...splits.filter((s) => s > 0 && s < bytes.length), bytes.length])].sort((a, b) => a - b);
  for (let i = 0; i + 1 < bounds.length && !socket.destroyed; i++) {
    await new Promise<void>((resolve) => socket.write(bytes.subarray(bounds[i], bounds[i + 1]), () => resolve()));
  }
}
