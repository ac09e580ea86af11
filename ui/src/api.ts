/**
 * The page's only way to the API. The server that serves the page writes the API's address into it
 * (src/ui/server.ts), so the bundle names no host. Every failure becomes an ApiFailure carrying the API's own
 * error envelope (message and code), or saying which address could not be reached.
 */

/** Written into index.html by the server (src/ui/server.ts UiPageConfig). */
export interface PageConfig {
  apiBase: string;
  maxInputChars: number | null;
  /** The API's upload limit in bytes; absent or null when unknown (`voxd ui` against another server). */
  maxUploadBytes?: number | null;
  /** Whether the API asks a custom voice for its speaker's consent; absent or null when unknown. */
  requireVoiceConsent?: boolean | null;
}

function readPageConfig(): PageConfig {
  const element = document.getElementById('voxd-config');
  if (element?.textContent) return JSON.parse(element.textContent) as PageConfig;
  // a page opened without a voxd server in front (e.g. from disk): the API's default address
  return { apiBase: 'http://localhost:8000', maxInputChars: null };
}

export const pageConfig = readPageConfig();
export const apiBase = pageConfig.apiBase;

export class ApiFailure extends Error {
  override name = 'ApiFailure';
  constructor(
    message: string,
    /** The envelope's `code`, `server_unreachable` when nothing answered, or `http_<status>` without an envelope. */
    readonly code: string,
    readonly status: number | null,
    /** The envelope's `param`: the request field at fault, when the API names one. */
    readonly param: string | null = null,
  ) {
    super(message);
  }
}

interface ErrorEnvelope {
  error?: { message?: string; code?: string | null; type?: string; param?: string | null };
}

/** fetch() against the API: resolves with a 2xx response, else throws ApiFailure. */
export async function apiFetch(path: string, init: RequestInit = {}): Promise<Response> {
  let response: Response;
  try {
    response = await fetch(apiBase + path, init);
  } catch (error) {
    if (init.signal?.aborted) throw error;
    throw new ApiFailure(`Cannot reach the voxd server at ${apiBase}: is it running?`, 'server_unreachable', null);
  }
  if (response.ok) return response;
  const text = await response.text();
  let envelope: ErrorEnvelope = {};
  try {
    envelope = JSON.parse(text) as ErrorEnvelope;
  } catch {
    // not an envelope: the status line is all there is
  }
  const message = envelope.error?.message ?? (text.trim() || `${response.status} ${response.statusText}`);
  throw new ApiFailure(message, envelope.error?.code ?? envelope.error?.type ?? `http_${response.status}`, response.status, envelope.error?.param ?? null);
}

export async function apiJson<T>(path: string, init: RequestInit = {}): Promise<T> {
  return (await apiFetch(path, init)).json() as Promise<T>;
}

/** A JSON POST body. */
export function jsonBody(value: unknown): RequestInit {
  return { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(value) };
}

/** The WebSocket address of an API path. */
export function apiSocketUrl(path: string): string {
  const url = new URL(apiBase + path);
  url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
  return url.toString();
}

export interface ModelInfo {
  id: string;
  loaded: boolean;
  task?: 'stt' | 'tts' | 'vad' | 'separation';
  engine?: string;
  /** For an alias: the model it stands for. */
  target?: string;
  /** For a loaded separator: the sounds it extracts. */
  targets?: string[];
  /** For a loaded STT model: whether it times words and translates. */
  word_timestamps?: boolean;
  translates?: boolean;
  /** For a loaded model with files: their size on disk; for a catalog model, its download. */
  size_bytes?: number;
  /** A model asked for: downloading (with bytes, total and seconds left), loading, or loaded. */
  state?: 'downloading' | 'loading' | 'loaded';
  bytes?: number;
  total?: number;
  eta?: number | null;
  /** For a catalog model: whether its files are all in the server's cache, and what the catalog says of it. */
  cached?: boolean;
  memory_bytes?: number;
  languages?: string;
  license?: string;
  description?: string;
}

/** A model of the server's catalog (a short name for a hub model), rather than an alias or a model itself. */
export function isCatalogModel(model: ModelInfo): boolean {
  return typeof model.cached === 'boolean';
}

/** A readable message for anything thrown. */
export function describeError(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** The API's error code of a failure, where it adds to the message (not one the page made up). */
export function errorCode(error: unknown): string | null {
  if (!(error instanceof ApiFailure) || error.code.startsWith('http_') || error.code === 'server_unreachable') return null;
  return error.code;
}
