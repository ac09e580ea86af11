/**
 * The one registry of coded API errors, below every layer. Every error a client can see is declared here with its
 * status and vendor `type`; engines, services and routes throw `new ApiError('code', message)`, and the protocol
 * layer (src/http/errors.ts) renders it. Engines name what they refuse by the engine interface's own names
 * (`EngineInput`); REQUEST_FIELDS turns those into the request fields clients sent. Native rejections become API
 * errors through `apiErrorFromNative` only.
 */
export const ERROR_CODES = {
  invalid_request: { status: 400, type: 'invalid_request_error' },
  invalid_json: { status: 400, type: 'invalid_request_error' },
  invalid_audio: { status: 400, type: 'invalid_request_error' },
  invalid_model: { status: 400, type: 'invalid_request_error' },
  model_not_found: { status: 404, type: 'invalid_request_error' },
  not_found: { status: 404, type: 'invalid_request_error' },
  origin_not_allowed: { status: 403, type: 'invalid_request_error' },
  method_not_allowed: { status: 405, type: 'invalid_request_error' },
  download_cancelled: { status: 409, type: 'invalid_request_error' },
  request_timeout: { status: 408, type: 'invalid_request_error' },
  payload_too_large: { status: 413, type: 'invalid_request_error' },
  unsupported_media_type: { status: 415, type: 'invalid_request_error' },
  headers_too_large: { status: 431, type: 'invalid_request_error' },
  queue_full: { status: 503, type: 'server_error' },
  too_many_connections: { status: 503, type: 'server_error' },
  shutting_down: { status: 503, type: 'server_error' },
  too_many_sessions: { status: 503, type: 'server_error' },
  too_many_uploads: { status: 503, type: 'server_error' },
  job_timeout: { status: 504, type: 'server_error' },
  model_download_failed: { status: 502, type: 'server_error' },
  insufficient_storage: { status: 507, type: 'server_error' },
  insufficient_memory: { status: 507, type: 'server_error' },
  server_error: { status: 500, type: 'server_error' },
} as const satisfies Record<string, { status: number; type: string }>;

export type ErrorCode = keyof typeof ERROR_CODES;

/**
 * What an engine can refuse, named as in engines/types.ts (`SynthesisRequest`, `TranscribeOptions`), each with the
 * request field that carries it: the one place engine names meet the API's.
 */
const REQUEST_FIELDS = {
  model: 'model',
  'synthesis.text': 'input',
  'synthesis.voice': 'voice',
  'synthesis.speed': 'speed',
  'synthesis.language': 'lang_code',
  'synthesis.instructions': 'instructions',
  'synthesis.reference': 'ref_audio',
  'transcription.language': 'language',
  // a model that cannot translate is the wrong model for the request
  'transcription.translate': 'model',
} as const;

export type EngineInput = keyof typeof REQUEST_FIELDS;

export interface ApiErrorOptions {
  /** The request field at fault, for the protocol and service layers, which know the request. */
  param?: string;
  /** The engine input at fault, for engines, which do not: it becomes the request field that carries it. */
  input?: EngineInput;
  /** Extra response headers, e.g. `Retry-After` for 503. */
  headers?: Record<string, string>;
  cause?: unknown;
}

export class ApiError extends Error {
  readonly code: ErrorCode;
  readonly param: string | null;
  readonly headers: Record<string, string>;

  constructor(code: ErrorCode, message: string, options: ApiErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'ApiError';
    this.code = code;
    this.param = options.param ?? (options.input ? REQUEST_FIELDS[options.input] : null);
    this.headers = options.headers ?? {};
  }

  get status(): number {
    return ERROR_CODES[this.code].status;
  }

  /** Any thrown value as an ApiError; unknown errors become a 500 that does not leak internals. */
  static from(error: unknown): ApiError {
    if (error instanceof ApiError) return error;
    return new ApiError('server_error', 'internal server error', { cause: error });
  }
}

/** A model used after it was unloaded (code `closed`, as the native models' own): not the client's doing. */
export function unloadedModelError(id: string): Error {
  return Object.assign(new Error(`model ${id} was unloaded`), { code: 'closed' });
}

/** A model whose library or files the native loader cannot use, as a 400 `invalid_model` naming the cause. */
export function unavailableModelError(id: string, error: unknown): unknown {
  return apiErrorFromNative(error, {
    codes: ['engine_unavailable', 'model_load_failed'],
    input: 'model',
    describe: (message) => `model ${id} is unavailable: ${message}`,
  });
}

/**
 * The API error each native rejection code the client can cause becomes (the addon's other codes are internal);
 * `retryAfterSeconds` marks a refusal that passes: the message says to retry and `Retry-After` says when.
 */
const NATIVE_CODES: Record<string, { code: ErrorCode; retryAfterSeconds?: number }> = {
  invalid_audio: { code: 'invalid_audio' },
  audio_too_long: { code: 'invalid_audio' },
  invalid_argument: { code: 'invalid_request' },
  encoder_unavailable: { code: 'invalid_request' },
  engine_unavailable: { code: 'invalid_model' },
  model_load_failed: { code: 'invalid_model' },
  batch_full: { code: 'queue_full', retryAfterSeconds: 1 },
};

export interface NativeErrorMapping extends Pick<ApiErrorOptions, 'param' | 'input'> {
  /** The native codes the caller answers for; any other rejection is passed on as it is. */
  codes: readonly (keyof typeof NATIVE_CODES)[];
  /** The client's message from the native one (default: the native message). */
  describe?: (message: string) => string;
}

/**
 * A native rejection (an Error with a string `code`) coded one of `mapping.codes` as its API error, the native
 * error as its cause; anything else unchanged. Rethrow the result.
 */
export function apiErrorFromNative(error: unknown, mapping: NativeErrorMapping): unknown {
  if (error instanceof ApiError || !(error instanceof Error)) return error;
  const nativeCode = (error as { code?: unknown }).code;
  const mapped = typeof nativeCode === 'string' && mapping.codes.includes(nativeCode) ? NATIVE_CODES[nativeCode] : undefined;
  if (!mapped) return error;
  const message = mapping.describe ? mapping.describe(error.message) : error.message;
  const retry = mapped.retryAfterSeconds;
  return new ApiError(mapped.code, retry === undefined ? message : `${message}; retry later`, {
    param: mapping.param,
    input: mapping.input,
    headers: retry === undefined ? {} : { 'Retry-After': String(retry) },
    cause: error,
  });
}
