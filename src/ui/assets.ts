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

/** The smallest form of `asset` the client accepts, and its Content-Encoding (null: identity). */
export function pickEncoding(asset: UiAsset, acceptEncoding: string | undefined): { body: Buffer; encoding: string | null } {
  const accepted = new Set((acceptEncoding ?? '').split(',').map((part) => part.split(';')[0]!.trim().toLowerCase()));
  if (asset.brotli && accepted.has('br')) return { body: asset.brotli, encoding: 'br' };
  if (asset.gzip && accepted.has('gzip')) return { body: asset.gzip, encoding: 'gzip' };
  return { body: asset.body, encoding: null };
}
