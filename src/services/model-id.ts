/**
 * Model IDs (voxd-api.md, "Model IDs"): an existing local path always wins; otherwise a Hugging Face
 * repository `owner/repo`, a GGUF repository with a quantisation tag `owner/repo:Q8_0`, or one file in a
 * repository `owner/repo/path/in/repo.bin`.
 */
import fs from 'node:fs';
import path from 'node:path';
import { ApiError } from '../http/errors.js';

export type ModelRef =
  { kind: 'local'; path: string } | { kind: 'hub-file'; repo: string; file: string } | { kind: 'hub-repo'; repo: string; quant: string | null };

const SEGMENT = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;

/** The ID as clients may send it in a query: URL-decoded by the caller, surrounding quotes stripped here. */
export function normaliseModelId(raw: string): string {
  return raw
    .trim()
    .replace(/^(["'])(.*)\1$/, '$2')
    .trim();
}

function isInside(root: string, target: string): boolean {
  const relative = path.relative(root, target);
  return relative === '' || (!relative.startsWith('..') && !path.isAbsolute(relative));
}

/**
 * A local file or directory (a model, a `ref_audio` clip), resolved against the working directory, then against
 * each --models-dir root; null when it does not exist. With roots given, a path outside them is refused.
 */
export function findLocalPath(p: string, roots: string[], refusal: { code: 'invalid_model' | 'invalid_request'; param: string }): string | null {
  const candidates = [path.resolve(p), ...(path.isAbsolute(p) ? [] : roots.map((root) => path.resolve(root, p)))];
  const found = candidates.find((candidate) => fs.existsSync(candidate));
  if (!found) return null;
  if (roots.length > 0) {
    const real = fs.realpathSync(found);
    if (!roots.some((root) => isInside(fs.realpathSync(path.resolve(root)), real))) {
      throw new ApiError(refusal.code, `local path ${p} is outside the allowed --models-dir roots`, { param: refusal.param });
    }
  }
  return found;
}

/** Parses a model ID, or returns null when it is neither an existing path nor a hub ID. */
export function parseModelId(id: string, modelsDirs: string[]): ModelRef | null {
  const local = findLocalPath(id, modelsDirs, { code: 'invalid_model', param: 'model' });
  if (local) return { kind: 'local', path: local };

  const [repoPart, quant, ...extraColons] = id.split(':');
  if (extraColons.length > 0 || repoPart === undefined) return null;
  const segments = repoPart.split('/');
  if (segments.length < 2 || !segments.every((s) => SEGMENT.test(s)) || segments.includes('..')) return null;
  const repo = `${segments[0]}/${segments[1]}`;
  if (segments.length === 2) {
    if (quant !== undefined && !SEGMENT.test(quant)) return null;
    return { kind: 'hub-repo', repo, quant: quant ?? null };
  }
  if (quant !== undefined) return null;
  return { kind: 'hub-file', repo, file: segments.slice(2).join('/') };
}
