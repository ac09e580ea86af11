/**
 * The web interface's own listener (docs/ui.md): the page and its hashed assets from ui/dist, on either transport
 * through the same HTTP toolkit as the API. The page learns the API's address from the configuration this server
 * writes into index.html, so nothing in the bundle names a host.
 */
import { ApiError } from '../errors.js';
import type { HttpReply } from '../http/reply.js';
import { createHttpServer, type HttpLogger } from '../http/server.js';
import type { TransportPreference } from '../config.js';
import { createTransport } from '../http/transports.js';
import { loadUiAssets, pickEncoding, type UiAsset } from './assets.js';

/** What the page reads from index.html (ui/src/api.ts has the same shape). */
export interface UiPageConfig {
  /** Base address of the API, without a trailing slash (e.g. `http://localhost:8000`). */
  apiBase: string;
  /** `--max-input-chars` of that API when this process serves it, else null (unknown). */
  maxInputChars: number | null;
  /** `--max-upload-mb` of that API in bytes when this process serves it; absent or null when unknown. */
  maxUploadBytes?: number | null;
}

export interface UiServerOptions {
  host: string;
  port: number;
  transport: TransportPreference;
  logger: HttpLogger;
  /** The page's configuration for a request that reached this server under `hostHeader`. */
  pageConfig(hostHeader: string | undefined): UiPageConfig;
  /** The built interface; ui/dist of the package by default. */
  assetsDir?: string;
}

export interface RunningUi {
  port: number;
  close(): Promise<void>;
}

const CONFIG_SLOT = '<!--voxd-config-->';
const IMMUTABLE = 'public, max-age=31536000, immutable';

export async function startUiServer(options: UiServerOptions): Promise<RunningUi> {
  const assets = loadUiAssets(options.assetsDir);
  const template = assets.get('/index.html')!.body.toString('utf8');
  if (!template.includes(CONFIG_SLOT)) throw new Error(`ui/dist/index.html has no ${CONFIG_SLOT} slot: rebuild it with \`npm run build:ui\``);

  const { transport } = createTransport(options.transport);
  const http = createHttpServer({ transport, logger: options.logger });

  http.route('GET', '/', (req, reply) => {
    const config = options.pageConfig(req.header('host'));
    const page = template.replace(CONFIG_SLOT, `<script id="voxd-config" type="application/json">${scriptSafeJson(config)}</script>`);
    reply
      .header('cache-control', 'no-cache')
      .header('content-security-policy', contentSecurityPolicy(config.apiBase))
      .header('x-content-type-options', 'nosniff');
    reply.send(page, 'text/html; charset=utf-8');
  });

  http.route('GET', '/assets/*', (req, reply) => {
    const asset = assets.get(`/assets/${req.params['*']}`);
    if (!asset) throw new ApiError('not_found', `No file ${req.path}`);
    sendAsset(asset, req.header('accept-encoding'), reply);
  });

  let port: number;
  try {
    port = await http.listen(options.host, options.port);
  } catch (error) {
    await http.close(0);
    throw error;
  }
  return { port, close: () => http.close(5000) };
}

function sendAsset(asset: UiAsset, acceptEncoding: string | undefined, reply: HttpReply): void {
  const { body, encoding } = pickEncoding(asset, acceptEncoding);
  if (encoding) reply.header('content-encoding', encoding);
  if (asset.gzip) reply.header('vary', 'accept-encoding');
  reply.header('cache-control', asset.immutable ? IMMUTABLE : 'no-cache').header('x-content-type-options', 'nosniff');
  reply.send(body, asset.contentType);
}

/** JSON that cannot end the <script> element it sits in. */
function scriptSafeJson(value: unknown): string {
  return JSON.stringify(value).replace(/</g, '\\u003c');
}

/**
 * Everything the page loads comes from this server; it talks only to the API (HTTP and WebSocket) and plays
 * audio it holds as blobs. The browser refuses anything else, so a stray CDN reference fails loudly.
 */
function contentSecurityPolicy(apiBase: string): string {
  const api = new URL(apiBase);
  const socket = `${api.protocol === 'https:' ? 'wss:' : 'ws:'}//${api.host}`;
  return [
    "default-src 'self'",
    `connect-src 'self' blob: ${api.origin} ${socket}`,
    "script-src 'self' blob:",
    "style-src 'self'",
    "img-src 'self' data: blob:",
    "media-src 'self' blob:",
    "worker-src 'self' blob:",
    "base-uri 'none'",
    "form-action 'none'",
  ].join('; ');
}

/** The API's address as a page reached under `hostHeader` should use it, for an API bound to `host:port`. */
export function apiBaseFor(host: string, port: number, hostHeader: string | undefined): string {
  // a wildcard bind answers on every address: the one the browser already reached is the one that works
  const wildcard = host === '0.0.0.0' || host === '::' || host === '';
  const hostname = wildcard ? hostnameOf(hostHeader) : host;
  return `http://${hostname.includes(':') && !hostname.startsWith('[') ? `[${hostname}]` : hostname}:${port}`;
}

function hostnameOf(hostHeader: string | undefined): string {
  if (!hostHeader) return 'localhost';
  try {
    return new URL(`http://${hostHeader}`).hostname;
  } catch {
    return 'localhost';
  }
}
