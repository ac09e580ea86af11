/**
 * The one registry of coded API errors. Every error a client can see is declared here with its HTTP status
 * and vendor `type`; code elsewhere throws `new ApiError('code', message)` and the protocol layer renders the
 * vendor envelope `{"error":{"message","type","param","code"}}`.
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
  payload_too_large: { status: 413, type: 'invalid_request_error' },
  unsupported_media_type: { status: 415, type: 'invalid_request_error' },
  queue_full: { status: 503, type: 'server_error' },
  shutting_down: { status: 503, type: 'server_error' },
  too_many_sessions: { status: 503, type: 'server_error' },
  model_download_failed: { status: 502, type: 'server_error' },
  server_error: { status: 500, type: 'server_error' },
} as const satisfies Record<string, { status: number; type: string }>;

export type ErrorCode = keyof typeof ERROR_CODES;

export interface ErrorEnvelope {
  error: { message: string; type: string; param: string | null; code: string };
}

export class ApiError extends Error {
  readonly code: ErrorCode;
  readonly param: string | null;
  /** Extra response headers, e.g. `Retry-After` for 503. */
  readonly headers: Record<string, string>;

  constructor(code: ErrorCode, message: string, options: { param?: string; headers?: Record<string, string>; cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'ApiError';
    this.code = code;
    this.param = options.param ?? null;
    this.headers = options.headers ?? {};
  }

  get status(): number {
    return ERROR_CODES[this.code].status;
  }

  toEnvelope(): ErrorEnvelope {
    return { error: { message: this.message, type: ERROR_CODES[this.code].type, param: this.param, code: this.code } };
  }

  /** Any thrown value as an ApiError; unknown errors become a 500 that does not leak internals. */
  static from(error: unknown): ApiError {
    if (error instanceof ApiError) return error;
    return new ApiError('server_error', 'internal server error', { cause: error });
  }
}
