// What the random-weight test-model writers (make-whisper-test-model.mjs, make-tts-test-model.mjs) share: the
// cache location and its build-then-rename discipline, option checks and the CLI, and the numeric pieces whose
// exact bits both formats depend on (ggml's tensor types and sizes are in gguf/ggml.mjs). Anything here that
// touches a value written to a model (halfBits, weylStream) fixes those models' bytes: change it only together with
// both scripts' FORMAT_VERSION.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

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
