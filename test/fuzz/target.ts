/**
 * What a fuzz target is, and where its inputs live. A target owns whatever it runs against (a child process, a
 * server) and decides what counts as a finding; the runner (run.ts) only generates, times and records.
 *
 * Seeds: every file under test/fuzz/corpus/<target>/, as bytes. Findings: test/fuzz/crashers/<target>/<hash>.<ext>,
 * in the target's own encoding; the runner replays them before it fuzzes, and tests replay them too, so a crasher
 * once found stays a test.
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Rng } from './random.js';

/** The repository root (this file runs compiled from dist/test/fuzz/). */
export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
export const CORPUS_DIR = path.join(ROOT, 'test', 'fuzz', 'corpus');
export const CRASHERS_DIR = path.join(ROOT, 'test', 'fuzz', 'crashers');

/**
 * What went wrong with one input. `crash`: what was fuzzed died (a signal, an abort). `hang`: it took longer than
 * the target's bound for that input. `failure`: it answered, but wrongly (an unexpected error, a 5xx, output out
 * of bounds).
 */
export interface Finding {
  kind: 'crash' | 'hang' | 'failure';
  detail: string;
}

/** How a target's inputs are written to and read from files. */
export interface InputFormat<I> {
  /** File extension without the dot: `txt`, `json`. */
  extension: string;
  encode(input: I): string;
  decode(content: string): I;
}

export interface FuzzTarget<I> {
  readonly name: string;
  readonly format: InputFormat<I>;
  /** Why the target cannot run on this machine (a library not installed), or null; it is then skipped. */
  unavailable?(): Promise<string | null>;
  /** Starts what the cases run against; called once, before the first case. */
  setup?(): Promise<void>;
  /** A new input, from the seed corpus (the files' bytes) or from scratch. */
  generate(rng: Rng, seeds: readonly Uint8Array[]): I;
  /**
   * Runs one input to completion and says what, if anything, went wrong. Bounds its own time (a hang is a
   * finding) and recovers by itself after a finding (restarting a dead child, say), so the next case can run.
   */
  run(input: I): Promise<Finding | null>;
  /** Stops what setup started; called once, also after a failed setup. */
  teardown?(): Promise<void>;
}

/** Plain text, stored as is. */
export const TEXT_FORMAT: InputFormat<string> = { extension: 'txt', encode: (text) => text, decode: (content) => content };

/** Any JSON value, pretty-printed (readable diffs when a crasher is committed). */
export function jsonFormat<I>(): InputFormat<I> {
  return { extension: 'json', encode: (input) => `${JSON.stringify(input, null, 2)}\n`, decode: (content) => JSON.parse(content) as I };
}

/** The seed files of a target (none when it has no corpus directory). */
export function readSeeds(target: string): Uint8Array[] {
  const dir = path.join(CORPUS_DIR, target);
  if (!fs.existsSync(dir)) return [];
  return fs
    .readdirSync(dir)
    .sort()
    .map((file) => new Uint8Array(fs.readFileSync(path.join(dir, file))));
}

export interface SavedInput<I> {
  file: string;
  input: I;
}

/** The crashers recorded for a target, decoded. */
export function readCrashers<I>(target: string, format: InputFormat<I>): SavedInput<I>[] {
  const dir = path.join(CRASHERS_DIR, target);
  if (!fs.existsSync(dir)) return [];
  return fs
    .readdirSync(dir)
    .filter((file) => file.endsWith(`.${format.extension}`))
    .sort()
    .map((file) => ({ file: path.join(dir, file), input: format.decode(fs.readFileSync(path.join(dir, file), 'utf8')) }));
}

/** Records a crashing input under its content hash (once: the same input found again keeps its file). */
export function saveCrasher<I>(target: string, format: InputFormat<I>, input: I): string {
  const content = format.encode(input);
  const hash = createHash('sha256').update(content).digest('hex').slice(0, 16);
  const file = path.join(CRASHERS_DIR, target, `${hash}.${format.extension}`);
  fs.mkdirSync(path.dirname(file), { recursive: true });
  if (!fs.existsSync(file)) fs.writeFileSync(file, content);
  return file;
}
