/**
 * The web interface's own listener (docs/ui.md): the page and its hashed assets from ui/dist, on either transport
 * through the same HTTP toolkit as the API. The page learns the API's address from the configuration this server
 * writes into index.html, so nothing in the bundle names a host.
 */
import { isIPv4, isIPv6 } from 'node:net';
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
  /** `--require-voice-consent` of that API when this process serves it; absent or null when unknown. */
  requireVoiceConsent?: boolean | null;
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
      // for browsers that predate CSP's frame-ancestors
      .header('x-frame-options', 'DENY')
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
 * audio it holds as blobs. The browser refuses anything else, so a stray CDN reference fails loudly. No site may
 * frame the page: its buttons (record, speak, unload a model) could be clicked through a disguise.
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
    "frame-ancestors 'none'",
  ].join('; ');
}

/** The API's address as a page reached under `hostHeader` should use it, for an API bound to `host:port`. */
export function apiBaseFor(host: string, port: number, hostHeader: string | undefined): string {
  // a wildcard bind answers on every address: the one the browser already reached is the one that works
  const wildcard = host === '0.0.0.0' || host === '::' || host === '';
  const hostname = wildcard ? hostnameOf(hostHeader) : host;
  return `http://${hostname.includes(':') && !hostname.startsWith('[') ? `[${hostname}]` : hostname}:${port}`;
}

/** A DNS name (underscores allowed: container names have them), at most 253 characters, labels of at most 63. */
const DNS_NAME = /^(?=.{1,253}$)[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?(?:\.[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?)*\.?$/i;
/** host[:port], the host bracketed when it is an IPv6 address. */
const HOST_AND_PORT = /^(\[[^\]]*\]|[^:[\]]*)(?::(\d{1,5}))?$/;

/**
 * The host name in a Host header, which goes into the page's configuration and its Content-Security-Policy: so
 * only a DNS name, an IPv4 address or a bracketed IPv6 address passes, anything else is a 400.
 */
function hostnameOf(hostHeader: string | undefined): string {
  // HTTP/1.0 clients may send none
  if (!hostHeader) return 'localhost';
  const [, name = '', port = '0'] = HOST_AND_PORT.exec(hostHeader) ?? [];
  const valid = (name.startsWith('[') ? isIPv6(name.slice(1, -1)) : isIPv4(name) || DNS_NAME.test(name)) && Number(port) <= 65535;
  if (!valid) throw new ApiError('invalid_request', `the Host header ${JSON.stringify(hostHeader)} is not a host name with an optional port`);
  return name.toLowerCase();
}
