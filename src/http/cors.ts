/**
 * CORS: `['*']` lets any origin read responses; otherwise the request's Origin is echoed only when listed.
 * Preflights are answered for every route, echoing the headers the browser asks for.
 */
const EXPOSED_HEADERS = 'x-request-id, retry-after, content-disposition';
const PREFLIGHT_MAX_AGE_S = '86400';

export function corsHeaders(allowedOrigins: readonly string[], origin: string | undefined): Record<string, string> {
  const headers: Record<string, string> = { 'access-control-expose-headers': EXPOSED_HEADERS };
  if (allowedOrigins.includes('*')) {
    headers['access-control-allow-origin'] = '*';
  } else {
    headers['vary'] = 'Origin';
    if (origin !== undefined && allowedOrigins.includes(origin)) headers['access-control-allow-origin'] = origin;
  }
  return headers;
}

export function preflightHeaders(allowedMethods: readonly string[], requestedHeaders: string | undefined): Record<string, string> {
  const headers: Record<string, string> = {
    'access-control-allow-methods': allowedMethods.join(', '),
    'access-control-max-age': PREFLIGHT_MAX_AGE_S,
  };
  if (requestedHeaders) headers['access-control-allow-headers'] = requestedHeaders;
  return headers;
}
