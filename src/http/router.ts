/**
 * Route table: patterns are `/`-separated segments, `:name` matches one segment and a trailing `*` the rest of
 * the path (so model IDs such as `owner/repo` fit, in `params['*']`). The first registered match wins; a path that
 * matches only under other methods yields those methods (for 405 and preflights). `HEAD` takes the `GET` route of
 * its path (RFC 9110, section 9.3.2: the transport sends the answer's headers without its body).
 */
export type Segment = { kind: 'static'; value: string } | { kind: 'param'; name: string } | { kind: 'rest' };

export interface Route<H> {
  method: string;
  pattern: string;
  segments: Segment[];
  handler: H;
}

export type RouteMatch<H> =
  | { kind: 'found'; route: Route<H>; params: Record<string, string> }
  | { kind: 'method_not_allowed'; pattern: string; allowed: string[] }
  | { kind: 'not_found' };

/** The params of a match without any: shared, so a static route's match allocates nothing. */
const NO_PARAMS: Record<string, string> = Object.freeze(Object.create(null) as Record<string, string>);
/** Methods whose match is kept per static path. */
const MAX_METHODS_KEPT = 16;

export class Router<H> {
  readonly #routes: Route<H>[] = [];
  /**
   * Matches already worked out for the paths of static routes (no `:param`, no `*`), by path, then method: the
   * hot routes (GET /v1/models, /healthz) skip the scan. Only those paths are kept, so clients cannot grow it.
   */
  readonly #staticMatches = new Map<string, Map<string, RouteMatch<H>>>();

  add(method: string, pattern: string, handler: H): void {
    const segments = parsePattern(pattern);
    if (this.#routes.some((route) => route.method === method && route.pattern === pattern)) {
      throw new Error(`route ${method} ${pattern} is already registered`);
    }
    this.#routes.push({ method, pattern, segments, handler });
    this.#staticMatches.clear();
    for (const route of this.#routes) {
      if (route.segments.every((segment) => segment.kind === 'static')) this.#staticMatches.set(trimSlash(route.pattern), new Map());
    }
  }

  match(method: string, path: string): RouteMatch<H> {
    const known = this.#staticMatches.get(trimSlash(path));
    if (known === undefined) return this.#scan(method, path);
    let match = known.get(method);
    if (match === undefined) {
      match = this.#scan(method, path);
      // a static path matches with no params; any params would come from another pattern, and must not be shared
      // (methods are the client's to choose: a few are kept per path, not every one sent)
      if ((match.kind !== 'found' || Object.keys(match.params).length === 0) && known.size < MAX_METHODS_KEPT) {
        if (match.kind === 'found') match = { ...match, params: NO_PARAMS };
        known.set(method, match);
      }
    }
    return match;
  }

  #scan(method: string, path: string): RouteMatch<H> {
    const parts = splitPath(path);
    const routeMethod = method === 'HEAD' ? 'GET' : method;
    let allowed: { pattern: string; methods: string[] } | null = null;
    for (const route of this.#routes) {
      const params = matchSegments(route.segments, parts);
      if (!params) continue;
      if (route.method === routeMethod) return { kind: 'found', route, params };
      allowed ??= { pattern: route.pattern, methods: [] };
      if (!allowed.methods.includes(route.method)) allowed.methods.push(route.method);
      if (route.method === 'GET' && !allowed.methods.includes('HEAD')) allowed.methods.push('HEAD');
    }
    return allowed ? { kind: 'method_not_allowed', pattern: allowed.pattern, allowed: allowed.methods } : { kind: 'not_found' };
  }
}

function parsePattern(pattern: string): Segment[] {
  if (!pattern.startsWith('/')) throw new Error(`route pattern ${pattern} must start with /`);
  const parts = splitPath(pattern);
  return parts.map((part, index): Segment => {
    if (part === '*') {
      if (index !== parts.length - 1) throw new Error(`route pattern ${pattern}: * must be the last segment`);
      return { kind: 'rest' };
    }
    if (part.startsWith(':')) return { kind: 'param', name: part.slice(1) };
    return { kind: 'static', value: part };
  });
}

const SLASH = 0x2f;

/** The path without one trailing slash (which matching ignores). */
function trimSlash(path: string): string {
  return path.length > 1 && path.charCodeAt(path.length - 1) === SLASH ? path.slice(0, -1) : path;
}

/** Segments of a path, ignoring one trailing slash. */
function splitPath(path: string): string[] {
  return trimSlash(path).split('/').slice(1);
}

function matchSegments(segments: Segment[], parts: string[]): Record<string, string> | null {
  const params: Record<string, string> = Object.create(null);
  for (const [index, segment] of segments.entries()) {
    const part = parts[index];
    if (segment.kind === 'rest') {
      const rest = parts.slice(index).join('/');
      if (rest === '') return null;
      params['*'] = decode(rest);
      return params;
    }
    if (part === undefined) return null;
    if (segment.kind === 'static') {
      if (part !== segment.value) return null;
    } else {
      if (part === '') return null;
      params[segment.name] = decode(part);
    }
  }
  return parts.length === segments.length ? params : null;
}

function decode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text; // malformed percent-encoding: the raw text is the best name we have
  }
}
