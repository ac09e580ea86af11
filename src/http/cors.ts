/**
 * CORS: `['*']` lets any origin read responses; otherwise the request's Origin is echoed only when listed.
 * Preflights are answered for every route, echoing the headers the browser asks for.
 */
const EXPOSED_HEADERS = 'x-request-id, retry-after, content-disposition, x-voxd-ignored';
const PREFLIGHT_MAX_AGE_S = '86400';

/**
 * Whether a page of `origin` may use the server. Requests without an Origin header (SDKs, curl) are not from a
 * page and always may; WebSocket upgrades are refused by this rule, since browsers do not apply CORS to them.
 */
export function originAllowed(allowedOrigins: readonly string[], origin: string | undefined): boolean {
  return origin === undefined || allowedOrigins.includes('*') || allowedOrigins.includes(origin);
}

/** The headers of every response when any origin may read them (the default): made once. */
const ANY_ORIGIN: Readonly<Record<string, string>> = Object.freeze({ 'access-control-expose-headers': EXPOSED_HEADERS, 'access-control-allow-origin': '*' });

export function corsHeaders(allowedOrigins: readonly string[], origin: string | undefined): Readonly<Record<string, string>> {
  if (allowedOrigins.includes('*')) return ANY_ORIGIN;
  const headers: Record<string, string> = { 'access-control-expose-headers': EXPOSED_HEADERS, vary: 'Origin' };
  if (origin !== undefined && allowedOrigins.includes(origin)) headers['access-control-allow-origin'] = origin;
  return headers;
}

/** `corsHeaders` as names and values alternating (how a reply takes its base headers); made once for any origin. */
const ANY_ORIGIN_LIST: readonly string[] = Object.entries(ANY_ORIGIN).flat(); // not frozen: V8 reads a frozen array slower

export function corsHeaderList(allowedOrigins: readonly string[], origin: string | undefined): readonly string[] {
  const headers = corsHeaders(allowedOrigins, origin);
  return headers === ANY_ORIGIN ? ANY_ORIGIN_LIST : Object.entries(headers).flat();
}

export function preflightHeaders(allowedMethods: readonly string[], requestedHeaders: string | undefined): Record<string, string> {
  const headers: Record<string, string> = {
    'access-control-allow-methods': allowedMethods.join(', '),
    'access-control-max-age': PREFLIGHT_MAX_AGE_S,
  };
  if (requestedHeaders) headers['access-control-allow-headers'] = requestedHeaders;
  return headers;
}
