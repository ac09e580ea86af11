/**
 * Route table: patterns are `/`-separated segments, `:name` matches one segment and a trailing `*` the rest of
 * the path (so model IDs such as `owner/repo` fit, in `params['*']`). The first registered match wins; a path that
 * matches only under other methods yields those methods (for 405 and preflights).
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

export class Router<H> {
  readonly #routes: Route<H>[] = [];

  add(method: string, pattern: string, handler: H): void {
    const segments = parsePattern(pattern);
    if (this.#routes.some((route) => route.method === method && route.pattern === pattern)) {
      throw new Error(`route ${method} ${pattern} is already registered`);
    }
    this.#routes.push({ method, pattern, segments, handler });
  }

  match(method: string, path: string): RouteMatch<H> {
    const parts = splitPath(path);
    let allowed: { pattern: string; methods: string[] } | null = null;
    for (const route of this.#routes) {
      const params = matchSegments(route.segments, parts);
      if (!params) continue;
      if (route.method === method) return { kind: 'found', route, params };
      allowed ??= { pattern: route.pattern, methods: [] };
      if (!allowed.methods.includes(route.method)) allowed.methods.push(route.method);
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

/** Segments of a path, ignoring one trailing slash. */
function splitPath(path: string): string[] {
  const trimmed = path.length > 1 && path.endsWith('/') ? path.slice(0, -1) : path;
  return trimmed.split('/').slice(1);
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
