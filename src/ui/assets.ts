/**
 * The built web interface (ui/dist, written by ui/build.mjs) held in memory: a few files of tens of KiB, read
 * and compressed once at start so every request is a lookup. Files under assets/ carry a content hash in their
 * names and are cached for good; index.html is revalidated on every load, so a new build is picked up.
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import zlib from 'node:zlib';

/** ui/dist of the package: dist/src/ui/ → ui/dist. */
export const UI_DIST_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..', 'ui', 'dist');

const CONTENT_TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.json': 'application/json',
};
const COMPRESSIBLE = new Set(['.html', '.js', '.css', '.svg', '.json']);

export interface UiAsset {
  body: Buffer;
  /** Null when compression does not pay (small or already compressed files). */
  gzip: Buffer | null;
  brotli: Buffer | null;
  contentType: string;
  /** The name carries a content hash: clients may keep it forever. */
  immutable: boolean;
}

export class UiNotBuiltError extends Error {
  override name = 'UiNotBuiltError';
}

/** Every file of `dir` by its URL path (`/index.html`, `/assets/main-3F2A.js`). */
export function loadUiAssets(dir = UI_DIST_DIR): Map<string, UiAsset> {
  if (!fs.existsSync(path.join(dir, 'index.html'))) {
    throw new UiNotBuiltError(`the web interface is not built (${dir}/index.html is missing): run \`npm run build:ui\``);
  }
  const assets = new Map<string, UiAsset>();
  for (const entry of fs.readdirSync(dir, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const file = path.join(entry.parentPath, entry.name);
    const urlPath = '/' + path.relative(dir, file).split(path.sep).join('/');
    const extension = path.extname(entry.name);
    const body = fs.readFileSync(file);
    const compress = COMPRESSIBLE.has(extension) && body.length > 1024;
    assets.set(urlPath, {
      body,
      gzip: compress ? zlib.gzipSync(body, { level: 9 }) : null,
      brotli: compress ? zlib.brotliCompressSync(body, { params: { [zlib.constants.BROTLI_PARAM_QUALITY]: 11 } }) : null,
      contentType: CONTENT_TYPES[extension] ?? 'application/octet-stream',
      immutable: urlPath.startsWith('/assets/'),
    });
  }
  return assets;
}

/**
 * The form of `asset` the client prefers (its highest `q`, identity's weighed like the others; on a tie the smaller:
 * brotli, then gzip, then identity), and its Content-Encoding (null: identity, which is sent whenever no compressed
 * form is acceptable, even one refused with q=0: it is the one form every client reads).
 */
export function pickEncoding(asset: UiAsset, acceptEncoding: string | undefined): { body: Buffer; encoding: string | null } {
  const quality = codingQuality(acceptEncoding);
  let best: { body: Buffer; encoding: string | null; q: number } = { body: asset.body, encoding: null, q: quality('identity') };
  // from the least to the most preferred on a tie: a later form wins an equal q
  for (const [encoding, body] of [
    ['gzip', asset.gzip],
    ['br', asset.brotli],
  ] as const) {
    const q = quality(encoding);
    if (body && q > 0 && q >= best.q) best = { body, encoding, q };
  }
  return { body: best.body, encoding: best.encoding };
}

/** A weight: 0 to 1 with at most three decimals. */
const QVALUE = /^(?:0(?:\.\d{0,3})?|1(?:\.0{0,3})?)$/;

/**
 * How much a client wants each content coding, from its Accept-Encoding: `q=0` means not acceptable, `*` stands for
 * every coding the header does not name, and a coding it does not name (with no `*`) is not acceptable. An entry
 * with a malformed weight is ignored.
 */
function codingQuality(acceptEncoding: string | undefined): (coding: string) => number {
  const named = new Map<string, number>();
  for (const entry of (acceptEncoding ?? '').split(',')) {
    const [coding, ...params] = entry.split(';').map((part) => part.trim().toLowerCase());
    if (!coding || named.has(coding)) continue;
    const weight = params.find((param) => param.startsWith('q='))?.slice(2) ?? '1';
    if (QVALUE.test(weight)) named.set(coding, Number(weight));
  }
  const others = named.get('*') ?? 0;
  // x-gzip is gzip's old name
  return (coding) => named.get(coding) ?? (coding === 'gzip' ? named.get('x-gzip') : undefined) ?? others;
}
