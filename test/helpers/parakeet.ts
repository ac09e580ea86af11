/**
 * Parakeet TDT for the tests: random-weight models (scripts/make-parakeet-test-model.mjs) and whisper.cpp's
 * parakeet-cli as the oracle, built in the addon's build tree against the addon's own ggml (CMakeLists.txt), so its
 * numbers are the ones the engine must reproduce.
 */
import { execFile } from 'node:child_process';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { buildTreeTool } from './build-tree.js';
import { ROOT } from './paths.js';

export interface ParakeetTestModelOptions {
  size?: 'tiny' | 'realistic';
  en?: boolean;
  seed?: number;
}

interface Generator {
  makeParakeetTestModel(options: ParakeetTestModelOptions): Promise<string>;
}

/** A cached random-weight Parakeet TDT model (generated on first use); resolves to its path. */
export async function parakeetTestModel(options: ParakeetTestModelOptions = {}): Promise<string> {
  const script = pathToFileURL(path.join(ROOT, 'scripts', 'make-parakeet-test-model.mjs')).href;
  return ((await import(script)) as Generator).makeParakeetTestModel(options);
}

/** build/parakeet-cli, built on first use (`cmake --build build --target parakeet-cli`). */
export function parakeetCliPath(): string {
  return buildTreeTool('parakeet-cli');
}

/** One decoded token as parakeet-cli's `-ps` prints it; times in 10 ms units (mel frames), after libparakeet moved
 * punctuation to the end of the word before it. */
export interface ParakeetCliToken {
  /** index within its segment */
  index: number;
  id: number;
  /** encoder frame (80 ms) it was emitted at */
  frame: number;
  durationIndex: number;
  /** encoder frames it advanced by (0: another token at the same frame) */
  duration: number;
  /** softmax over the tokens and the blank, not the durations; 4 decimals as printed */
  p: number;
  /** the token's log-probability, normalised together with the blank and the duration logits; 4 decimals as printed */
  plog: number;
  t0: number;
  t1: number;
  wordStart: boolean;
  /** the SentencePiece piece, with its `▁` */
  piece: string;
}

export interface ParakeetCliSegment {
  t0: number;
  t1: number;
  text: string;
}

export interface ParakeetCliResult {
  /** stdout: the transcript as streamed token by token, trimmed */
  text: string;
  segments: ParakeetCliSegment[];
  /** every segment's tokens in order */
  tokens: ParakeetCliToken[];
}

const SEGMENTS = /^Segments \((\d+)\):$/;
const SEGMENT = /^Segment (\d+): \[(-?\d+) -> (-?\d+)\] "(.*)"$/;
const TOKENS = /^Tokens \[(\d+)\]:$/;
// pieces are printed raw between quotes, so a piece's own quotes and spaces end only at the line's last quote
const TOKEN =
  /^ {2}\[ *(\d+)\] id= *(\d+) frame= *(\d+) dur_idx= *(\d+) dur_val= *(\d+) p=(\S+) plog=(\S+) t0= *(-?\d+) t1= *(-?\d+) word_start=(true|false) "(.*)"$/;

/** A C `%.4f` (which prints non-finite values as inf, -inf, nan or -nan). */
function printedFloat(text: string): number {
  if (/^-?nan$/.test(text)) return NaN;
  if (/^-?inf$/.test(text)) return text.startsWith('-') ? -Infinity : Infinity;
  const value = Number(text);
  if (Number.isNaN(value)) throw new Error(`parakeet-cli: not a number: ${text}`);
  return value;
}

/**
 * Parses what `parakeet-cli -np -ps` printed for one audio file: the transcript on stdout and the `Segments (N):`
 * block of stderr (parakeet-cli.cpp's fprintf formats), which must be there and complete.
 */
export function parseParakeetCliOutput(stdout: string, stderr: string): ParakeetCliResult {
  const lines = stderr.split('\n');
  let at = lines.findIndex((line) => SEGMENTS.test(line));
  if (at < 0) throw new Error(`parakeet-cli printed no segments; stderr ends:\n${stderr.slice(-2000)}`);
  const next = (pattern: RegExp, what: string): RegExpExecArray => {
    const line = lines[++at] ?? '';
    const match = pattern.exec(line);
    if (!match) throw new Error(`parakeet-cli: expected ${what} at stderr line ${at + 1}, got ${JSON.stringify(line)}`);
    return match;
  };
  const segments: ParakeetCliSegment[] = [];
  const tokens: ParakeetCliToken[] = [];
  const segmentCount = Number(SEGMENTS.exec(lines[at]!)![1]);
  for (let s = 0; s < segmentCount; s++) {
    const [, index, t0, t1, text] = next(SEGMENT, `segment ${s}`);
    if (Number(index) !== s) throw new Error(`parakeet-cli: segment ${index} where ${s} was due`);
    segments.push({ t0: Number(t0), t1: Number(t1), text: text! });
    const tokenCount = Number(next(TOKENS, `segment ${s}'s token count`)[1]);
    for (let i = 0; i < tokenCount; i++) {
      const [, index, id, frame, durationIndex, duration, p, plog, t0, t1, wordStart, piece] = next(TOKEN, `token ${i} of segment ${s}`);
      tokens.push({
        index: Number(index),
        id: Number(id),
        frame: Number(frame),
        durationIndex: Number(durationIndex),
        duration: Number(duration),
        p: printedFloat(p!),
        plog: printedFloat(plog!),
        t0: Number(t0),
        t1: Number(t1),
        wordStart: wordStart === 'true',
        piece: piece!,
      });
    }
  }
  return { text: stdout.trim(), segments, tokens };
}

/** Transcribes one clip with parakeet-cli on the CPU (`-m MODEL -ng -np -ps -t N CLIP`) and parses what it printed. */
export async function runParakeetCli(model: string, clip: string, { threads }: { threads: number }): Promise<ParakeetCliResult> {
  const args = ['-m', model, '-ng', '-np', '-ps', '-t', String(threads), clip];
  let output: { stdout: string; stderr: string };
  try {
    output = await promisify(execFile)(parakeetCliPath(), args, { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  } catch (error) {
    const { code, signal, stderr } = error as { code?: number | string; signal?: string; stderr?: string };
    throw new Error(`parakeet-cli ${args.join(' ')} failed (${signal ?? `exit code ${code}`}); stderr ends:\n${(stderr ?? '').slice(-2000)}`);
  }
  // it reports an unreadable or undecodable file on stderr and still exits with 0: the missing block tells
  return parseParakeetCliOutput(output.stdout, output.stderr);
}

/** The most tokens decoded at one encoder frame: the model's symbols-per-frame limit (10) bounds it. */
export function mostTokensInOneFrame(tokens: readonly { frame: number }[]): number {
  const perFrame = new Map<number, number>();
  for (const token of tokens) perFrame.set(token.frame, (perFrame.get(token.frame) ?? 0) + 1);
  return Math.max(0, ...perFrame.values());
}
