/**
 * GGUF models on disk, for the engines of GGUF models with an mmproj (GGML text-to-speech, audio language models):
 * headers read without loading the file (engines recognise their files by the architecture and projector keys
 * converters write), and a model's pair of files located the way llama.cpp's hub repositories lay them out: a
 * directory holding `<name>.gguf` and `mmproj*.gguf`, or a model file with its mmproj beside it.
 */
import { open, readdir, stat } from 'node:fs/promises';
import path from 'node:path';
import type { ResolvedModel } from './types.js';

const GGUF_MAGIC = 0x46554747; // "GGUF", little-endian
const GGUF_STRING = 8;
const GGUF_ARRAY = 9;
/** Byte sizes of the fixed-size GGUF value types, by type id. */
const GGUF_SCALAR_SIZE: Record<number, number> = { 0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8 };
/** Keys read before giving up: converters write general.* first and a model's own hyperparameters next. */
const GGUF_MAX_KEYS = 64;
const GGUF_MAX_STRING = 1 << 20;

/**
 * The string values of `keys` among the first `maxKeys` keys of a GGUF file's header (a key that is absent, or not a
 * string, is left out), or null when the file is not GGUF. Reads the header only, and stops once every key was found.
 */
export async function readGgufStrings(file: string, keys: readonly string[], maxKeys = GGUF_MAX_KEYS): Promise<Record<string, string> | null> {
  const handle = await open(file, 'r').catch(() => null);
  if (!handle) return null;
  try {
    let pos = 0;
    const read = async (n: number): Promise<Buffer | null> => {
      const buf = Buffer.alloc(n);
      // a directory or an unreadable file reads as nothing: not GGUF
      const { bytesRead } = await handle.read(buf, 0, n, pos).catch(() => ({ bytesRead: -1 }));
      pos += n;
      return bytesRead === n ? buf : null;
    };
    const u64 = async (): Promise<number | null> => {
      const b = await read(8);
      return b ? Number(b.readBigUInt64LE(0)) : null;
    };
    const head = await read(8);
    if (!head || head.readUInt32LE(0) !== GGUF_MAGIC || head.readUInt32LE(4) < 2) return null;
    if ((await u64()) === null) return null; // tensor count
    const nKv = await u64();
    if (nKv === null) return null;
    const str = async (): Promise<string | null> => {
      const n = await u64();
      if (n === null || n > GGUF_MAX_STRING) return null;
      const b = await read(n);
      return b ? b.toString('utf8') : null;
    };
    /** Moves past a value of `type`; false when the file ends or the type is unknown. */
    const skip = async (type: number): Promise<boolean> => {
      if (type === GGUF_STRING) return (await str()) !== null;
      if (type === GGUF_ARRAY) {
        const t = await read(4);
        const n = await u64();
        if (!t || n === null) return false;
        const elementType = t.readUInt32LE(0);
        const size = GGUF_SCALAR_SIZE[elementType];
        if (size !== undefined) {
          pos += size * n;
          return true;
        }
        for (let i = 0; i < n; i++) if (!(await skip(elementType))) return false;
        return true;
      }
      const size = GGUF_SCALAR_SIZE[type];
      if (size === undefined) return false;
      pos += size;
      return true;
    };
    const found: Record<string, string> = {};
    for (let i = 0; i < Math.min(nKv, maxKeys) && Object.keys(found).length < keys.length; i++) {
      const key = await str();
      const t = await read(4);
      if (key === null || !t) return found;
      const type = t.readUInt32LE(0);
      if (keys.includes(key) && type === GGUF_STRING) {
        const value = await str();
        if (value === null) return found;
        found[key] = value;
      } else if (!(await skip(type))) return found;
    }
    return found;
  } finally {
    await handle.close();
  }
}

/** `general.architecture` of a GGUF file, or null when the file is not GGUF or does not say. */
export async function readGgufArchitecture(file: string): Promise<string | null> {
  return (await readGgufStrings(file, ['general.architecture']))?.['general.architecture'] ?? null;
}

const PROJECTOR_FILE = /^mmproj[^/]*\.gguf$/i;

/** A GGUF model and its mmproj (null when none was found), and the directory they were found in. */
export interface GgufPair {
  model: string;
  mmproj: string | null;
  dir: string;
}

async function isDirectory(p: string): Promise<boolean> {
  return (await stat(p).catch(() => null))?.isDirectory() ?? false;
}

async function listDir(dir: string): Promise<string[]> {
  return (await readdir(dir).catch(() => [] as string[])).sort();
}

/** The mmproj files of a directory, by name. */
export async function projectorsIn(dir: string): Promise<string[]> {
  return (await listDir(dir)).filter((n) => PROJECTOR_FILE.test(n)).map((n) => path.join(dir, n));
}

/**
 * The model a resolved model stands for, if `isModel` takes it: the path itself (not an mmproj), or in a directory
 * the first GGUF by name that is not an mmproj and that `isModel` takes. Its mmproj is the resolved one (a hub
 * repository's), else `pickProjector` of those beside it (default: the first by name). Null when there is no model.
 */
export async function locateGgufPair(
  resolved: Pick<ResolvedModel, 'path' | 'projector'>,
  isModel: (file: string) => Promise<boolean>,
  pickProjector: (candidates: string[]) => Promise<string | null> = async (c) => c[0] ?? null,
): Promise<GgufPair | null> {
  let model: string | null = null;
  let dir = resolved.path;
  if (await isDirectory(resolved.path)) {
    for (const name of await listDir(resolved.path)) {
      const file = path.join(resolved.path, name);
      if (/\.gguf$/i.test(name) && !PROJECTOR_FILE.test(name) && (await isModel(file))) {
        model = file;
        break;
      }
    }
  } else if (!PROJECTOR_FILE.test(path.basename(resolved.path)) && (await isModel(resolved.path))) {
    model = resolved.path;
    dir = path.dirname(resolved.path);
  }
  if (!model) return null;
  return { model, mmproj: resolved.projector ?? (await pickProjector(await projectorsIn(dir))), dir };
}
