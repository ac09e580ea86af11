/**
 * Model IDs (docs/models.md, "Model IDs"): an existing local path always wins; otherwise a Hugging Face
 * repository `owner/repo`, one with a quantisation tag `owner/repo:Q8_0` (of GGUF or ggml `.bin` files), or one
 * file in a repository `owner/repo/path/in/repo.bin`.
 */
import fs from 'node:fs';
import path from 'node:path';
import { ApiError } from '../errors.js';

export type ModelRef =
  { kind: 'local'; path: string } | { kind: 'hub-file'; repo: string; file: string } | { kind: 'hub-repo'; repo: string; quant: string | null };

const SEGMENT = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;

/** Longest model ID accepted: no hub ID comes close, and a local path this long is not a model anyone has. */
export const MAX_MODEL_ID_CHARS = 1024;
/** The hub's own limit on owner and repository names; it also keeps cache directory names under NAME_MAX. */
const MAX_HUB_NAME_CHARS = 96;
/** NAME_MAX of the file systems voxd runs on: a longer path segment cannot name a file. */
const MAX_SEGMENT_BYTES = 255;
const CONTROL_CHARACTER = /\p{Cc}/u;

/**
 * The ID as clients may send it in a query (URL-decoded by the caller), surrounding quotes stripped; a 400
 * `invalid_model` when it cannot name any model (too long, control characters, a path segment over NAME_MAX), so
 * such IDs never reach the file system or the hub cache.
 */
export function normaliseModelId(raw: string): string {
  const id = raw
    .trim()
    .replace(/^(["'])(.*)\1$/, '$2')
    .trim();
  const invalid = (reason: string): ApiError => new ApiError('invalid_model', `invalid model ID: ${reason}`, { param: 'model' });
  if (id.length > MAX_MODEL_ID_CHARS) throw invalid(`it is ${id.length} characters long; the limit is ${MAX_MODEL_ID_CHARS}`);
  if (CONTROL_CHARACTER.test(id)) throw invalid('it contains control characters');
  if (id.split(/[/\\]/).some((segment) => Buffer.byteLength(segment) > MAX_SEGMENT_BYTES))
    throw invalid(`a path segment is longer than ${MAX_SEGMENT_BYTES} bytes`);
  return id;
}

function isInside(root: string, target: string): boolean {
  const relative = path.relative(root, target);
  return relative === '' || (!relative.startsWith('..') && !path.isAbsolute(relative));
}

/**
 * A local file or directory (a model, a `ref_audio` clip), resolved against the working directory, then against
 * each --models-dir root; null when it does not exist. With roots given, a path outside them counts as missing:
 * the answer must not tell a client which server paths exist.
 */
export function findLocalPath(p: string, roots: string[]): string | null {
  const candidates = [path.resolve(p), ...(path.isAbsolute(p) ? [] : roots.map((root) => path.resolve(root, p)))];
  const allowed = (candidate: string): boolean => {
    if (!fs.existsSync(candidate)) return false;
    if (roots.length === 0) return true;
    const real = fs.realpathSync(candidate);
    return roots.some((root) => fs.existsSync(root) && isInside(fs.realpathSync(path.resolve(root)), real));
  };
  return candidates.find(allowed) ?? null;
}

/** Parses a model ID, or returns null when it is neither an existing path nor a hub ID. */
export function parseModelId(id: string, modelsDirs: string[]): ModelRef | null {
  const local = findLocalPath(id, modelsDirs);
  if (local) return { kind: 'local', path: local };

  const [repoPart, quant, ...extraColons] = id.split(':');
  if (extraColons.length > 0 || repoPart === undefined) return null;
  const segments = repoPart.split('/');
  if (segments.length < 2 || !segments.every((s) => SEGMENT.test(s)) || segments.includes('..')) return null;
  if (segments.slice(0, 2).some((name) => name.length > MAX_HUB_NAME_CHARS)) return null;
  const repo = `${segments[0]}/${segments[1]}`;
  if (segments.length === 2) {
    if (quant !== undefined && !SEGMENT.test(quant)) return null;
    return { kind: 'hub-repo', repo, quant: quant ?? null };
  }
  if (quant !== undefined) return null;
  return { kind: 'hub-file', repo, file: segments.slice(2).join('/') };
}
