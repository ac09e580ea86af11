/**
 * The worker side of voxd's logger (logger.ts), run by pino's transport thread: it receives the JSON lines the
 * logger writes, in batches, and writes them as they are to the rotated file (pino-roll) and, on the console, each
 * as pino-pretty renders it. One transport rather than pino's multistream of a pino-roll target and a pino-pretty
 * target: there, every line was split and JSON-parsed twice (once by pino's worker for its level, once by
 * pino-pretty) and went through four streams one line at a time; here a batch is one write to the file, one parse
 * per line for the console, and one write of the rendered batch.
 *
 * Every line goes to both destinations: the logger writes only lines at or above its level, which both had.
 */
import { createRequire } from 'node:module';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { prettyFactory, type PrettyOptions } from 'pino-pretty';
import { PLAIN_CONSOLE_FORMAT } from './logger.js';

export { PLAIN_CONSOLE_FORMAT };

/** pino-roll's options: a SonicBoom stream on the current file, rotated by `frequency` and `size`. */
export interface RollOptions {
  file: string;
  extension?: string;
  frequency?: string | number;
  size?: string | number;
  mkdir?: boolean;
  limit?: { count: number };
}

export interface LogTransportOptions {
  file: RollOptions;
  /** pino-pretty's options for the console lines, written to the file descriptor `destination`; null for none. */
  console: (PrettyOptions & { destination: number }) | null;
}

type Sonic = ReturnType<typeof pino.destination>;

const pinoRoll = createRequire(import.meta.url)('pino-roll') as (options: RollOptions) => Promise<Sonic>;

export default async function logTransport(options: LogTransportOptions): Promise<Writable> {
  const file = await pinoRoll(options.file);
  const console = options.console ? prettyConsole(options.console) : null;
  const transport = new Writable({
    decodeStrings: false,
    write(chunk: string | Buffer, _encoding, callback) {
      const text = typeof chunk === 'string' ? chunk : chunk.toString('utf8');
      file.write(text);
      console?.write(text);
      callback();
    },
    final(callback) {
      const closing = [file, ...(console ? console.end() : [])];
      let open = closing.length;
      for (const destination of closing) {
        destination.once('close', () => {
          if (--open === 0) callback();
        });
        destination.end();
      }
    },
  });
  // logger.flush() reaches the destinations: thread-stream's worker calls the transport's flush
  Object.assign(transport, {
    flush(callback: (error?: Error | null) => void) {
      const flushing = [file, ...(console ? [console.destination] : [])];
      let pending = flushing.length;
      let failed: Error | null = null;
      for (const destination of flushing) {
        destination.flush((error?: Error | null) => {
          failed ??= error ?? null;
          if (--pending === 0) callback(failed);
        });
      }
    },
  });
  file.on('error', (error: Error) => transport.destroy(error));
  console?.destination.on('error', (error: NodeJS.ErrnoException) => {
    // a closed console (`voxd … | head`) only stops the console lines, as with pino-pretty's transport
    if (error.code !== 'EPIPE') transport.destroy(error);
  });
  return transport;
}

/**
 * The console: lines rendered as pino-pretty's transport renders them, a batch at a time, on pino's SonicBoom (which,
 * like pino-pretty's, stops writing once the other end of a pipe is gone). pino-pretty's transport checks each line
 * with JSON.parse and writes those that are not JSON as they are; its prettifier parses the line again and passes
 * such lines through the same way, so the check is left out. Plain lines in voxd's console format take a shortcut
 * that renders them byte for byte as pino-pretty does, at a fraction of the cost (`renderPlainLine`).
 */
function prettyConsole(options: PrettyOptions & { destination: number }): { destination: Sonic; write(text: string): void; end(): Sonic[] } {
  const { destination: fd, ...prettyOptions } = options;
  const prettify = prettyFactory(prettyOptions) as (line: string) => string | undefined;
  const render = isPlainConsoleFormat(prettyOptions) ? (line: string) => renderPlainLine(line) ?? prettify(line) : prettify;
  const destination = pino.destination({ dest: fd, sync: false });
  let broken = false;
  destination.on('error', (error: NodeJS.ErrnoException) => (broken ||= error.code === 'EPIPE'));
  /** The end of the last batch when it stopped mid-line. */
  let partial = '';
  return {
    destination,
    write(text) {
      const lines = (partial + text).split(/\r?\n/);
      partial = lines.pop() as string;
      let out = '';
      for (const line of lines) out += render(line) ?? '';
      if (out !== '') destination.write(out);
    },
    /** Writes what is left; the destination to wait for, unless its pipe is gone (then it never closes). */
    end() {
      if (partial !== '') destination.write(render(partial) ?? '');
      partial = '';
      return broken ? [] : [destination];
    },
  };
}

// `renderPlainLine` renders the lines of PLAIN_CONSOLE_FORMAT as pino-pretty does; with any other options (colours,
// say), pino-pretty renders.
function isPlainConsoleFormat(options: PrettyOptions): boolean {
  const { colorize, ...rest } = options;
  return !colorize && Object.keys(rest).length === 3 && Object.entries(PLAIN_CONSOLE_FORMAT).every(([key, value]) => rest[key as keyof typeof rest] === value);
}

const LEVEL_LABELS: Readonly<Record<number, string>> = { 10: 'TRACE', 20: 'DEBUG', 30: 'INFO', 40: 'WARN', 50: 'ERROR', 60: 'FATAL' };
/** What pino-pretty strips from a message (strip-unsafe-control-chars.js). */
// eslint-disable-next-line no-control-regex
const UNSAFE_CONTROL_CHARS = /[\u0000-\u0008\u000B-\u001F\u007F-\u009F]/;
/** Keys pino-pretty leaves out of the object it prints: the logger's own, `msg` (printed before it). */
const NOT_PRINTED = new Set(['pid', 'hostname', 'level', 'time', 'msg']);
/** Keys that pino-pretty prints in a way of their own (metadata, errors, the time of a line without `time`). */
const SPECIAL = new Set(['name', 'caller', 'timestamp', 'err', 'error']);

const pad = (value: number, width: number): string => String(value).padStart(width, '0');

/**
 * `line` as pino-pretty renders it with PLAIN_CONSOLE_FORMAT (`[HH:MM:ss.l] LEVEL: message {rest as JSON}`), for the
 * lines where that takes no more than the above: a JSON object with a standard numeric level, a numeric time, a
 * string message without control characters, and no key pino-pretty treats specially. Anything else (and anything
 * secure-json-parse, which pino-pretty parses with, could read differently) is null: pino-pretty renders it.
 */
export function renderPlainLine(line: string): string | null {
  if (line.includes('proto') || line.includes('constructor') || line.includes('\\u')) return null;
  let log: unknown;
  try {
    log = JSON.parse(line);
  } catch {
    return null;
  }
  if (typeof log !== 'object' || log === null || Array.isArray(log)) return null;
  const fields = log as Record<string, unknown>;
  const { level, time, msg } = fields;
  const label = typeof level === 'number' ? LEVEL_LABELS[level] : undefined;
  if (label === undefined || typeof time !== 'number' || typeof msg !== 'string' || UNSAFE_CONTROL_CHARS.test(msg)) return null;
  const date = new Date(time);
  if (Number.isNaN(date.getTime())) return null;
  let rest: Record<string, unknown> | null = null;
  for (const key of Object.keys(fields)) {
    if (SPECIAL.has(key) || (key === 'type' && fields.type === 'Error')) return null;
    if (!NOT_PRINTED.has(key)) (rest ??= {})[key] = fields[key];
  }
  const head = `[${pad(date.getHours(), 2)}:${pad(date.getMinutes(), 2)}:${pad(date.getSeconds(), 2)}.${pad(date.getMilliseconds(), 3)}] ${label}: ${msg}`;
  if (!rest) return head + '\n';
  // pino-pretty prints a backslash of the JSON without its escape
  const json = JSON.stringify(rest);
  return `${head} ${json.includes('\\\\') ? json.replace(/\\\\/g, '\\') : json}\n`;
}
