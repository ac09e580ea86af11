// What the random-weight test-model writers (make-whisper-test-model.mjs, make-tts-test-model.mjs,
// make-asr-test-model.mjs, make-parakeet-test-model.mjs, make-kokoro-test-model.mjs) share: the cache location and its build-then-rename
// discipline, option checks and the CLI, the numeric pieces whose exact bits the formats depend on (ggml's tensor
// types and sizes are in gguf/ggml.mjs), and tensors described by how they are filled, with their deterministic
// weights. Anything here that touches a value written to a model (halfBits, weylStream, tensorData) fixes those
// models' bytes: change it only together with the FORMAT_VERSION of every script that uses it.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { GGML_TYPE_F16, GGML_TYPE_F32, nElements } from './gguf/ggml.mjs';
import { ALIGNMENT, kv, writeGguf } from './gguf/writer.mjs';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

// ---- cache ----

/** @typedef {(tmp: string) => void | Promise<unknown>} Builder writes a file or directory at the path `tmp` */

/** Where cached models live: $VOXD_TEST_MODELS_DIR (read on each call, so tests can point it elsewhere) or build/test-models. */
export function testModelsDir() {
  return process.env.VOXD_TEST_MODELS_DIR || path.join(ROOT, 'build', 'test-models');
}

/**
 * Builds `target` (a file or a directory) under a temporary name beside it, via `build(tmp)`, then renames it into
 * place, so a reader (or a concurrent test run) never sees half a model; the temporary is removed on failure.
 * @param {string} target
 * @param {Builder} build
 */
export async function writeAtomically(target, build) {
  await fs.promises.mkdir(path.dirname(target), { recursive: true });
  const tmp = `${target}.tmp-${process.pid}-${Date.now()}`;
  try {
    await build(tmp);
    // rename replaces a file but not a non-empty directory: a stale directory has to go first
    if ((await fs.promises.stat(tmp)).isDirectory()) await fs.promises.rm(target, { recursive: true, force: true });
    await fs.promises.rename(tmp, target);
  } catch (error) {
    await fs.promises.rm(tmp, { recursive: true, force: true });
    throw error;
  }
}

/**
 * A cache entry at `target`: reused when `isComplete()`, otherwise built with writeAtomically. Another process
 * building the same entry at the same time is not an error: if its copy is in place, ours failing does not matter.
 * @param {string} target
 * @param {() => boolean} isComplete
 * @param {Builder} build
 */
export async function cachedBuild(target, isComplete, build) {
  if (isComplete()) return;
  try {
    await writeAtomically(target, build);
  } catch (error) {
    if (!isComplete()) throw error;
  }
}

// ---- generators of single-file models (make-whisper-test-model.mjs, make-parakeet-test-model.mjs) ----

/**
 * A generator's `write(out, options)`, which writes a model to `out` (atomically: a temporary file renamed into
 * place) and resolves to `out`, and `make(options)`, which resolves to the cached model for these options, written
 * on first use.
 * @template O, N
 * @param {(options?: O) => N} normalise checks the options and fills in the defaults
 * @param {(options?: O) => string} cachePath
 * @param {(file: string, options: N) => Promise<void>} writeModel writes a model (not atomically)
 */
export function singleFileGenerator(normalise, cachePath, writeModel) {
  return {
    /**
     * @param {string} out
     * @param {O} [options]
     */
    async write(out, options) {
      const normalised = normalise(options);
      await writeAtomically(out, (tmp) => writeModel(tmp, normalised));
      return out;
    },
    /** @param {O} [options] */
    async make(options) {
      const out = cachePath(options);
      const normalised = normalise(options);
      await cachedBuild(
        out,
        () => fs.existsSync(out),
        (tmp) => writeModel(tmp, normalised),
      );
      return out;
    },
  };
}

// ---- generators of GGUF pairs (make-tts-test-model.mjs, make-asr-test-model.mjs) ----

/** @typedef {{ metadata: Record<string, import('./gguf/writer.mjs').MetadataValue>, tensors: Tensor[] }} GgufFile what writeGguf writes */
/** @typedef {(architecture: string, type: string) => Record<string, import('./gguf/writer.mjs').MetadataValue>} GeneralKeys a file's general.* keys */
/**
 * An architecture of a pair generator: its sizes (each a dimensions object), the base of its file names for a size,
 * and `build(dims, general)`, the two files' contents, each starting with the keys `general` gives.
 * @typedef {{ sizes: Record<string, object>, fileName(size: string): string, build(dims: any, general: GeneralKeys): { model: GgufFile, mmproj: GgufFile } }} PairArch
 */
/** @typedef {{ arch?: string, size?: string, seed?: number }} PairOptions */
/** @typedef {{ dir: string, model: string, mmproj: string }} PairPaths */

const LLAMA_FTYPE_MOSTLY_F16 = 1;

/**
 * The general.* keys every file of a pair starts with, in the converter's order.
 * @param {string} architecture
 * @param {string} type
 * @param {string} name
 * @param {string} script the generator, named in the description
 */
function generalKeys(architecture, type, name, script) {
  return {
    'general.architecture': kv.str(architecture),
    'general.type': kv.str(type),
    'general.name': kv.str(name),
    'general.description': kv.str(`random weights for tests (voxd scripts/${script})`),
    'general.file_type': kv.u32(LLAMA_FTYPE_MOSTLY_F16),
    'general.quantization_version': kv.u32(2),
    'general.alignment': kv.u32(ALIGNMENT),
  };
}

/**
 * A generator of model pairs in the layout of llama.cpp's hub repositories: `<name>.gguf` (the language model or
 * backbone, libllama) and `mmproj-<name>.gguf` (libmtmd), for the architectures in `archs` (the first is the
 * default). Its functions take { arch, size, seed } (defaults: that arch, tiny, 1): `dims` (the size's dimensions),
 * `files` (the two file names), `dir` (the cache directory), `write(outDir)` and `make()` (the cached pair, written
 * on first use), both resolving to { dir, model, mmproj } (absolute paths), and `runCli(moduleUrl)`, the command
 * `[--arch A] [--size S] [--seed N] [--out DIR]` that prints the two paths.
 * @param {{ script: string, archs: Record<string, PairArch>, formatVersion: number }} spec script: the generator's
 *   file name (in the files' description and its errors); formatVersion: in the cache directory's name, bumped
 *   whenever the output for given options changes, so that stale entries are not reused
 */
export function pairGenerator({ script, archs, formatVersion }) {
  const defaultArch = Object.keys(archs)[0];
  /** @param {PairOptions} [options] */
  const normalise = ({ arch = defaultArch, size = 'tiny', seed = 1 } = {}) => {
    checkChoice('arch', arch, archs);
    checkChoice('size', size, archs[arch].sizes);
    checkSeed(seed);
    return { arch, size, seed };
  };
  /** @param {PairOptions} [options] */
  const dims = (options) => {
    const { arch, size } = normalise(options);
    return { ...archs[arch].sizes[size] };
  };
  /** @param {PairOptions} [options] */
  const files = (options) => {
    const { arch, size } = normalise(options);
    const base = archs[arch].fileName(size);
    return { model: `${base}.gguf`, mmproj: `mmproj-${base}.gguf` };
  };
  /** @param {PairOptions} [options] */
  const dir = (options) => {
    const { arch, size, seed } = normalise(options);
    return path.join(testModelsDir(), `${arch}-${size}-random-s${seed}-v${formatVersion}`);
  };
  /**
   * @param {string} directory
   * @param {PairOptions} [options]
   * @returns {PairPaths}
   */
  const pathsIn = (directory, options) => {
    const names = files(options);
    return { dir: directory, model: path.join(directory, names.model), mmproj: path.join(directory, names.mmproj) };
  };
  /**
   * @param {string} outDir
   * @param {PairOptions} [options]
   */
  const write = async (outDir, options) => {
    const { arch, size, seed } = normalise(options);
    const name = archs[arch].fileName(size);
    const { model, mmproj } = archs[arch].build(archs[arch].sizes[size], (architecture, type) => generalKeys(architecture, type, name, script));
    const paths = pathsIn(path.resolve(outDir), options);
    await fs.promises.mkdir(paths.dir, { recursive: true });
    for (const [file, part] of /** @type {[string, GgufFile][]} */ ([
      [paths.model, model],
      [paths.mmproj, mmproj],
    ])) {
      await writeAtomically(file, (tmp) => writeGguf(tmp, part.metadata, part.tensors, (t) => tensorData(t, seed)));
    }
    return paths;
  };
  /** @param {PairOptions} [options] */
  const make = async (options) => {
    const paths = pathsIn(dir(options), options);
    // the whole directory is built and renamed in, so a reader never sees half a pair
    await cachedBuild(
      paths.dir,
      () => fs.existsSync(paths.model) && fs.existsSync(paths.mmproj),
      (tmp) => write(tmp, options),
    );
    return paths;
  };
  /** @param {string} moduleUrl */
  const runCli = (moduleUrl) =>
    runAsCli(moduleUrl, script.replace(/\.mjs$/, ''), async (args) => {
      const { options, out } = parseArgs(args, { '--arch': ['arch', 'string'], '--size': ['size', 'string'], '--seed': ['seed', 'number'] });
      const result = out ? await write(out, options) : await make(options);
      console.log(result.model);
      console.log(result.mmproj);
    });
  return { dims, files, dir, write, make, runCli };
}

// ---- options and CLI ----

/**
 * Checks that `value` names one of `table`'s keys, with a message that lists them.
 * @template {object} T
 * @param {string} kind
 * @param {string} value
 * @param {T} table
 * @returns {asserts value is Extract<keyof T, string>}
 */
export function checkChoice(kind, value, table) {
  if (!(value in table)) throw new Error(`unknown ${kind} ${value} (${Object.keys(table).join(' or ')})`);
}

/**
 * Seeds are mixed into 32-bit streams: anything else would silently alias another seed.
 * @param {number} seed
 */
export function checkSeed(seed) {
  if (!Number.isInteger(seed) || seed < 0 || seed > 0xffffffff) throw new Error('seed must be an integer in [0, 2^32)');
}

/**
 * Parses `--out PATH` plus the script's own options; `spec` maps a flag to [option name, kind], kind being
 * 'string', 'number' or 'flag' (no value: true). Resolves to { options, out } (out null when not given).
 * @param {string[]} argv
 * @param {Record<string, [name: string, kind: 'string' | 'number' | 'flag']>} spec
 */
export function parseArgs(argv, spec) {
  /** @type {Record<string, string | number | boolean>} */
  const options = {};
  let out = null;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) throw new Error(`${arg} needs a value`);
      return argv[++i];
    };
    if (arg === '--out') out = value();
    else if (Object.hasOwn(spec, arg)) {
      const [name, kind] = spec[arg];
      options[name] = kind === 'flag' ? true : kind === 'number' ? Number(value()) : value();
    } else throw new Error(`unknown argument ${arg}`);
  }
  return { options, out };
}

/**
 * Runs `main(args)` when the module at `moduleUrl` is the program node was started with (not when a test imports
 * it); an error becomes one line on stderr, prefixed with `name`, and exit status 2.
 * @param {string} moduleUrl
 * @param {string} name
 * @param {(args: string[]) => Promise<void>} main
 */
export async function runAsCli(moduleUrl, name, main) {
  if (!process.argv[1] || moduleUrl !== pathToFileURL(path.resolve(process.argv[1])).href) return;
  try {
    await main(process.argv.slice(2));
  } catch (error) {
    console.error(`${name}: ${error instanceof Error ? error.message : error}`);
    process.exit(2);
  }
}

/**
 * Runs a single-file generator as a command (see runAsCli): `--out PATH` writes there, otherwise the cached model's
 * path is printed (written first if missing).
 * @param {string} moduleUrl
 * @param {string} name
 * @param {Record<string, [name: string, kind: 'string' | 'number' | 'flag']>} spec the generator's options (parseArgs)
 * @param {{ write(out: string, options: Record<string, string | number | boolean>): Promise<string>, make(options: Record<string, string | number | boolean>): Promise<string> }} generator
 */
export async function runGeneratorCli(moduleUrl, name, spec, generator) {
  await runAsCli(moduleUrl, name, async (args) => {
    const { options, out } = parseArgs(args, spec);
    console.log(out ? await generator.write(path.resolve(out), options) : await generator.make(options));
  });
}

// ---- numbers ----

/**
 * A counter-based random stream of 32-bit integers: the state steps by `increment` (odd: a Weyl sequence that
 * visits every value) and each draw is `mix(state)`. The scripts differ only in increment and mixing function
 * (each fixes its models' bytes), so those are theirs to pass.
 * @param {number} seed
 * @param {number} increment
 * @param {(state: number) => number} mix
 */
export function weylStream(seed, increment, mix) {
  let state = seed >>> 0;
  return () => {
    state = (state + increment) >>> 0;
    return mix(state);
  };
}

const f32Scratch = new Float32Array(1);
const u32Scratch = new Uint32Array(f32Scratch.buffer);
/**
 * IEEE binary16 bits of a number, rounded to nearest even (overflow to infinity, underflow to subnormals/zero),
 * computed from its float32 bits so the result does not depend on the platform: both formats store f16 weights.
 * @param {number} value
 */
export function halfBits(value) {
  f32Scratch[0] = value;
  const bits = u32Scratch[0];
  const sign = (bits >>> 16) & 0x8000;
  const exponent = ((bits >>> 23) & 0xff) - 127 + 15;
  let mantissa = bits & 0x7fffff;
  if (((bits >>> 23) & 0xff) === 0xff) return sign | 0x7c00 | (mantissa ? 0x200 : 0);
  if (exponent >= 31) return sign | 0x7c00;
  if (exponent <= 0) {
    if (exponent < -10) return sign;
    mantissa |= 0x800000; // implicit leading one
    const shift = 14 - exponent;
    let half = mantissa >>> shift;
    const rest = mantissa & ((1 << shift) - 1);
    const midpoint = 1 << (shift - 1);
    if (rest > midpoint || (rest === midpoint && half & 1)) half += 1;
    return sign | half;
  }
  let half = (exponent << 10) | (mantissa >>> 13);
  const rest = mantissa & 0x1fff;
  if (rest > 0x1000 || (rest === 0x1000 && half & 1)) half += 1; // a carry into the exponent is still correct
  return sign | half;
}

// ---- tensors and their weights (make-tts-test-model.mjs, make-parakeet-test-model.mjs, make-kokoro-test-model.mjs) ----

/**
 * 32-bit string hash (multiply-xorshift per character, then a finalizer).
 * @param {string} text
 */
function hashString(text) {
  let h = 0x2545f491;
  for (let i = 0; i < text.length; i++) {
    h = Math.imul(h ^ text.charCodeAt(i), 0x9e3779b1);
    h ^= h >>> 13;
  }
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

/**
 * A 32-bit mixing function (xorshift-multiply, "lowbias32").
 * @param {number} z
 */
function lowbias32(z) {
  z = Math.imul(z ^ (z >>> 16), 0x7feb352d);
  z = Math.imul(z ^ (z >>> 15), 0x846ca68b);
  return (z ^ (z >>> 16)) >>> 0;
}

/**
 * Random signs addressed by (row, column, seed), as `randomSigns(row, seed)(column)`: for weights that another
 * tensor must reproduce, as a key-value memory's keys reproduce the embeddings' rows (make-asr-test-model.mjs).
 * @param {number} row
 * @param {number} seed
 */
export function randomSigns(row, seed) {
  const key = lowbias32(row ^ Math.imul(seed, 0x27d4eb2f));
  return (/** @type {number} */ column) => (lowbias32(key + column) & 1 ? 1 : -1);
}

/**
 * Counter-based generator: a Weyl sequence through a 32-bit mixing function; one stream per tensor.
 * @param {number} seed
 */
function randomStream(seed) {
  return weylStream(seed, 0x6a09e667, lowbias32);
}

// Approximately normal numbers as the centred sum of four 16-bit uniforms (two draws), scaled to unit variance:
// integer arithmetic only, so the bytes do not depend on the platform's Math library, and bounded by 3.46.
const IRWIN_HALL_SCALE = Math.sqrt(3) / 65536;
/** @param {number} seed */
function normalStream(seed) {
  const next = randomStream(seed);
  return () => {
    const a = next();
    const b = next();
    return ((a & 0xffff) + (a >>> 16) + (b & 0xffff) + (b >>> 16) - 2 * 65535) * IRWIN_HALL_SCALE;
  };
}

/** @typedef {{ std: number, mean?: number } | { bound: number } | { fill: number } | { values: (i: number, seed: number) => number }} TensorInit */
/** @typedef {{ name: string, ne: number[], type: number, init: TensorInit }} Tensor */

/**
 * A tensor: name, ne (ggml order: innermost dimension first), type, and how to fill it:
 * { std, mean? } normal values, { bound } uniform in [-bound, bound), { fill } a constant,
 * { values: (i, seed) => number } computed per element.
 * @param {string} name
 * @param {number[]} ne
 * @param {TensorInit} init
 * @param {number} [type]
 * @returns {Tensor}
 */
export function tensor(name, ne, init, type = ne.length > 1 ? GGML_TYPE_F16 : GGML_TYPE_F32) {
  return { name, ne, type, init };
}
export const gain = (value = 1) => ({ fill: value });
export const zeros = () => ({ fill: 0 });
/** N(0, scale^2 / fanIn): keeps the activation scale through a random layer. */
export const fanIn = (/** @type {number} */ n, scale = 1) => ({ std: scale / Math.sqrt(n) });
/** Uniform in ±1/sqrt(fanIn): PyTorch's default initialisation of linear, convolution and LSTM weights and biases. */
export const torchDefault = (/** @type {number} */ n) => ({ bound: 1 / Math.sqrt(n) });

/**
 * The tensor's data: f16 bits or f32 values, deterministic for (name, seed) and whatever else the file holds.
 * @param {Tensor} t
 * @param {number} seed
 */
export function tensorData(t, seed) {
  const n = nElements(t.ne);
  const out = t.type === GGML_TYPE_F16 ? new Uint16Array(n) : new Float32Array(n);
  /** @type {(i: number, v: number) => number} */
  const put = t.type === GGML_TYPE_F16 ? (i, v) => (out[i] = halfBits(v)) : (i, v) => (out[i] = v);
  const { init } = t;
  const streamSeed = hashString(t.name) ^ Math.imul(seed, 0x27d4eb2f);
  if ('fill' in init) {
    for (let i = 0; i < n; i++) put(i, init.fill);
  } else if ('values' in init) {
    for (let i = 0; i < n; i++) put(i, init.values(i, seed));
  } else if ('bound' in init) {
    const next = randomStream(streamSeed);
    for (let i = 0; i < n; i++) put(i, init.bound * (next() / 0x80000000 - 1));
  } else {
    const next = normalStream(streamSeed);
    // no mean: the bare product, so the models written before `mean` existed keep their bytes
    if (init.mean === undefined) for (let i = 0; i < n; i++) put(i, init.std * next());
    else for (let i = 0; i < n; i++) put(i, init.mean + init.std * next());
  }
  return out;
}
