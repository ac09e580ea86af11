/**
 * API errors on the wire: the vendor envelope `{"error":{"message","type","param","code"}}` of an ApiError (the
 * registry of codes, statuses and types is src/errors.ts).
 */
import { ERROR_CODES, type ApiError } from '../errors.js';

export interface ErrorEnvelope {
  error: { message: string; type: string; param: string | null; code: string };
}

export function errorEnvelope(error: ApiError): ErrorEnvelope {
  return { error: { message: error.message, type: ERROR_CODES[error.code].type, param: error.param, code: error.code } };
}
