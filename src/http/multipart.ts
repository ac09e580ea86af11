/**
 * multipart/form-data bodies, streamed through busboy with limits. Field names in the bracket forms the vendor
 * SDKs send are folded: `key[]` collects an array, `key[sub]` an object; a plain key sent twice becomes an array.
 */
import busboy from 'busboy';
import { ApiError } from '../errors.js';

export interface UploadedFile {
  filename: string;
  mimeType: string;
  data: Buffer;
}

export type FormValue = string | string[] | Record<string, string>;

export interface MultipartForm {
  fields: Record<string, FormValue>;
  files: Record<string, UploadedFile>;
}

export interface MultipartLimits {
  /** Largest accepted file in bytes; a larger one gets 413. */
  maxFileBytes: number;
  /** Files per request (default 1). */
  maxFiles?: number;
  /** Non-file fields per request (default 100). */
  maxFields?: number;
  /** Largest non-file field value in bytes (default 64 KiB); a larger one gets 413. */
  maxFieldBytes?: number;
  /**
   * Fields allowed past `maxFieldBytes` (audio as data URLs): by name (`key` of `key[]`), each up to `maxBytes`,
   * at most `maxCount` of them in all (400 past it).
   */
  largeFields?: { names: readonly string[]; maxBytes: number; maxCount: number };
  /**
   * Asked before the body is read, with its declared length (a body sent without one: with each chunk's bytes as
   * they arrive); what it throws refuses the body, which is then read and dropped (RequestBody.read).
   */
  admit?: (bytes: number) => void;
}

/** The request body as this parser reads it (http/request-body.ts). */
export interface MultipartBody {
  /** The Content-Length, if any. */
  readonly declaredLength: number | null;
  /** The raw body; 413 past `limitBytes`. */
  read(limitBytes: number, admit?: (bytes: number) => void): AsyncIterable<Buffer>;
}

/** Part headers and boundaries, allowed on top of the file and field sizes when bounding the whole body. */
const FRAMING_ALLOWANCE_BYTES = 256 * 1024;
const BRACKETED_NAME = /^([^[\]]+)\[([^[\]]*)\]$/;

/** Reads a multipart body. */
export async function parseMultipart(contentType: string | undefined, body: MultipartBody, limits: MultipartLimits): Promise<MultipartForm> {
  if (!contentType || !/^multipart\/form-data\s*(;|$)/i.test(contentType)) {
    throw new ApiError('unsupported_media_type', `Expected multipart/form-data, got ${contentType || 'no content type'}`);
  }
  const { maxFileBytes, maxFiles = 1, maxFields = 100, maxFieldBytes = 64 * 1024, largeFields } = limits;
  const large = largeFields ?? { names: [], maxBytes: 0, maxCount: 0 };
  let largeCount = 0;
  let parser: busboy.Busboy;
  try {
    parser = busboy({
      headers: { 'content-type': contentType },
      defParamCharset: 'utf8',
      limits: { fileSize: maxFileBytes, files: maxFiles, fields: maxFields, fieldSize: Math.max(maxFieldBytes, large.maxBytes) },
    });
  } catch (error) {
    throw malformed(error);
  }

  // null prototypes: client-chosen names such as `__proto__` or `constructor` stay plain keys
  const form: MultipartForm = { fields: nullPrototype({}), files: nullPrototype({}) };
  let failure: ApiError | null = null;
  const fail = (error: ApiError): void => {
    failure ??= error;
  };
  parser.on('field', (name, value, info) => {
    const isLarge = large.names.includes(BRACKETED_NAME.exec(name)?.[1] ?? name);
    const limit = isLarge ? large.maxBytes : maxFieldBytes;
    if (info.nameTruncated) fail(new ApiError('invalid_request', `Field name '${name}…' is too long`));
    else if (info.valueTruncated || Buffer.byteLength(value) > limit) {
      fail(new ApiError('payload_too_large', `Field '${name}' exceeds the limit of ${limit} bytes`, { param: name }));
    } else if (isLarge && ++largeCount > large.maxCount) {
      fail(new ApiError('invalid_request', `Too many '${name}' fields (at most ${large.maxCount})`, { param: name }));
    } else addField(form.fields, name, value, fail);
  });
  parser.on('file', (name, stream, info) => {
    const bytes = new FileBytes(body.declaredLength);
    stream.on('data', (chunk: Buffer) => {
      if (!bytes.add(chunk)) fail(malformed(new Error(`more bytes than the Content-Length of ${body.declaredLength}`)));
    });
    // a body cut short (client gone) errors the part's stream: without a listener that would crash the process
    stream.on('error', (error) => fail(malformed(error)));
    stream.on('limit', () => fail(new ApiError('payload_too_large', `File '${name}' exceeds the limit of ${maxFileBytes} bytes`, { param: name })));
    stream.on('end', () => {
      const data = bytes.all();
      // a browser form with no file chosen still sends the part, with an empty filename and no content
      if (stream.truncated || (!info.filename && data.length === 0)) return;
      if (name in form.files) fail(new ApiError('invalid_request', `Only one file is accepted in field '${name}'`, { param: name }));
      else form.files[name] = { filename: info.filename ?? '', mimeType: info.mimeType, data };
    });
  });
  parser.on('filesLimit', () => fail(new ApiError('invalid_request', `Too many files (at most ${maxFiles})`)));
  parser.on('fieldsLimit', () => fail(new ApiError('invalid_request', `Too many fields (at most ${maxFields})`)));
  const settled = new Promise<void>((resolve) => {
    parser.on('close', resolve);
    parser.on('error', (error) => {
      fail(malformed(error));
      resolve();
    });
  });

  try {
    const bodyLimit = maxFiles * maxFileBytes + maxFields * maxFieldBytes + large.maxCount * large.maxBytes + FRAMING_ALLOWANCE_BYTES;
    for await (const chunk of body.read(bodyLimit, limits.admit)) {
      if (!parser.write(chunk)) await Promise.race([new Promise((resolve) => parser.once('drain', resolve)), settled]);
      if (failure) break;
    }
    if (!failure) {
      parser.end();
      await settled;
    }
  } finally {
    parser.destroy();
  }
  if (failure) throw failure;
  return form;
}

/**
 * A file's bytes, copied as they arrive into one buffer as long as the body's declared length (the file is part of
 * the body): the chunks are garbage at once, and the file never exists twice, as it would when joined at the end
 * (a large buffer's pages become resident only as they are written). A body without a declared length is joined at
 * the end.
 */
class FileBytes {
  readonly #buffer: Buffer | null;
  readonly #chunks: Buffer[] = [];
  #length = 0;

  constructor(capacity: number | null) {
    this.#buffer = capacity ? Buffer.allocUnsafe(capacity) : null;
  }

  /** False when the chunk does not fit in the declared length (the transport let more through than it said). */
  add(chunk: Buffer): boolean {
    if (!this.#buffer) this.#chunks.push(chunk);
    else if (this.#length + chunk.length > this.#buffer.length) return false;
    else chunk.copy(this.#buffer, this.#length);
    this.#length += chunk.length;
    return true;
  }

  all(): Buffer {
    return this.#buffer ? this.#buffer.subarray(0, this.#length) : Buffer.concat(this.#chunks, this.#length);
  }
}

function addField(fields: MultipartForm['fields'], name: string, value: string, fail: (error: ApiError) => void): void {
  const bracketed = BRACKETED_NAME.exec(name);
  const key = bracketed?.[1] ?? name;
  const subKey = bracketed?.[2];
  const existing = fields[key];
  if (subKey) {
    if (existing === undefined) fields[key] = nullPrototype({ [subKey]: value });
    else if (typeof existing === 'object' && !Array.isArray(existing)) existing[subKey] = value;
    else fail(new ApiError('invalid_request', `Field '${key}' is sent both as an object and as a value`, { param: key }));
  } else if (existing === undefined) {
    fields[key] = bracketed ? [value] : value;
  } else if (typeof existing === 'string') {
    fields[key] = [existing, value];
  } else if (Array.isArray(existing)) {
    existing.push(value);
  } else {
    fail(new ApiError('invalid_request', `Field '${key}' is sent both as an object and as a value`, { param: key }));
  }
}

function nullPrototype<T extends object>(entries: T): T {
  return Object.assign(Object.create(null) as T, entries);
}

function malformed(error: unknown): ApiError {
  return new ApiError('invalid_request', `Malformed multipart body: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
}
