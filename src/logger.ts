/**
 * pino logging: JSON lines to a rotated file in --log-dir and readable lines on the console, both written by a
 * worker-thread transport (log-transport.ts) so logging never blocks request handling.
 */
import { EventEmitter } from 'node:events';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { pino, type Logger } from 'pino';
import type { LogTransportOptions } from './log-transport.js';

/** The console's line format; log-transport.ts renders lines of it without pino-pretty (colours aside). */
export const PLAIN_CONSOLE_FORMAT = Object.freeze({ translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname', singleLine: true });

export type { Logger };

export interface LoggerOptions {
  logDir: string;
  level: string;
  /** Console lines; off in tests that only want the file. */
  console?: boolean;
}

export const LOG_FILE_BASENAME = 'voxd';

export function createLogger(options: LoggerOptions): Logger {
  const logDir = path.resolve(options.logDir);
  fs.mkdirSync(logDir, { recursive: true });
  const transportOptions: LogTransportOptions = {
    // voxd.1.log, voxd.2.log, ...: a new file every day or every 20 MB, the last 10 kept
    file: { file: path.join(logDir, LOG_FILE_BASENAME), extension: '.log', frequency: 'daily', size: '20m', mkdir: true, limit: { count: 10 } },
    console: options.console === false ? null : { destination: 2, colorize: process.stderr.isTTY, ...PLAIN_CONSOLE_FORMAT },
  };
  // one worker-thread transport writes both (log-transport.ts): the file as pino writes it, the console through pino-pretty
  const transport = pino.transport({ target: fileURLToPath(new URL('./log-transport.js', import.meta.url)), options: transportOptions });
  return pino(loggerOptions(options.level), new BatchedStream(transport));
}

/** How createLogger configures pino (exported for the tests that compare `requestLineWriter` with pino). */
export function loggerOptions(level: string): pino.LoggerOptions {
  return { level, base: { pid: process.pid } };
}

/** The fields of a served request's log line (src/server.ts), in the order they are written. */
export interface RequestLine {
  reqId: string;
  method: string;
  route: string;
  status: number;
  ms: number;
  bytes: number;
}

const INFO = 30;

/**
 * A function that writes `line` with message `msg` at info, byte for byte as `logger.info(line, msg)` does, but
 * without pino's general serialiser, which looks every key up in its serialiser and stringifier tables and was
 * most of what a request cost the main thread at `--log-level info` (docs/performance.md#http-hot-path). It uses
 * pino's own pieces of the line (level, time, bindings, end); where the logger has anything that could change the
 * line (a mixin, hooks, formatters, a serialiser for one of the keys, a nested key, a stream that wants metadata), it
 * is `logger.info` itself. The caller checks the level.
 */
export function requestLineWriter(logger: Logger): (line: RequestLine, msg: string) => void {
  const { symbols } = pino;
  const instance = logger as unknown as Record<symbol, unknown>;
  const stream = instance[symbols.streamSym] as { write(line: string): unknown } & Record<symbol, unknown>;
  const serializers = instance[symbols.serializersSym] as Record<string, unknown>;
  const keys: (keyof RequestLine)[] = ['reqId', 'method', 'route', 'status', 'ms', 'bytes'];
  const plain =
    !instance[symbols.mixinSym] &&
    !(instance[symbols.hooksSym] as { streamWrite?: unknown }).streamWrite &&
    !(instance[symbols.formattersSym] as { log?: unknown }).log &&
    !instance[symbols.nestedKeySym] &&
    stream[symbols.needsMetadataGsym] !== true &&
    instance[symbols.messageKeySym] === 'msg' &&
    Object.keys(instance[symbols.stringifiersSym] as object).length === 0 &&
    keys.every((key) => !serializers[key]) &&
    !serializers.msg;
  if (!plain) return (line, msg) => logger.info(line, msg);
  const levelStart = (instance[symbols.lsCacheSym] as Record<number, string>)[INFO] as string;
  const time = instance[symbols.timeSym] as () => string;
  const end = instance[symbols.endSym] as string;
  return (line, msg) => {
    stream.write(
      `${levelStart}${time()}${instance[symbols.chindingsSym] as string},"reqId":${jsonString(line.reqId)},"method":${jsonString(line.method)},` +
        `"route":${jsonString(line.route)},"status":${jsonNumber(line.status)},"ms":${jsonNumber(line.ms)},"bytes":${jsonNumber(line.bytes)},` +
        `"msg":${jsonString(msg)}${end}`,
    );
  };
}

/** What JSON.stringify escapes in a string: quotes, backslashes, control characters, and lone surrogates. */
// eslint-disable-next-line no-control-regex -- control characters are among what JSON.stringify escapes
const NEEDS_ESCAPE = /["\\\u0000-\u001f\ud800-\udfff]/;

/**
 * A string as JSON.stringify writes it, quoted as it is when nothing in it needs escaping (JSON.stringify costs more).
 * pino writes strings so too, but for a lone surrogate before Node 25, which it writes raw (no request line has one).
 */
function jsonString(text: string): string {
  return NEEDS_ESCAPE.test(text) ? JSON.stringify(text) : `"${text}"`;
}

/** A number as pino writes it: non-finite ones as null. */
function jsonNumber(value: number): string {
  return Number.isFinite(value) ? String(value) : 'null';
}

type TransportStream = ReturnType<typeof pino.transport>;

/** How long a log line may wait on the main thread for others to go to the transport thread with. */
const BATCH_MS = 5;
/** A batch this long goes at once. */
const MAX_BATCH_CHARS = 64 * 1024;
/** Streams holding lines, written out before the process exits (before pino's own exit hook ends the transport). */
const batching = new Set<BatchedStream>();
let exitHooked = false;

/**
 * pino's destination: it hands the lines to the transport thread a batch at a time. Each hand-over wakes that
 * thread (an Atomics.notify, a system call, on the main thread); the transport's own stream hands over at every
 * turn of the event loop, which under load is every few requests, and was the main thread's largest cost of a
 * request log line. Batched over BATCH_MS, it is at most a few hundred a second. logger.flush() and the end of the
 * stream write out what waits, as does the exit of the process.
 */
class BatchedStream extends EventEmitter {
  readonly #target: TransportStream;
  #pending = '';
  #timer: NodeJS.Timeout | null = null;
  /** The transport failed: lines are dropped from then on. */
  #failed = false;

  constructor(target: TransportStream) {
    super();
    this.#target = target;
    for (const event of ['close', 'ready']) target.on(event, (...args: unknown[]) => this.emit(event, ...args));
    // a transport that fails (a log file it cannot open: descriptors or disk space run out) ends the logging, said
    // once on stderr, but not the server; an 'error' event nobody hears would end the process
    target.on('error', (error: Error) => {
      if (this.#failed) return;
      this.#failed = true;
      this.#pending = '';
      process.stderr.write(`voxd: logging stopped, its worker failed: ${error.message}\n`);
    });
    target.once('close', () => batching.delete(this));
    batching.add(this);
    if (!exitHooked) {
      exitHooked = true;
      process.prependListener('exit', () => {
        for (const stream of batching) stream.handOver();
      });
    }
  }

  get closed(): boolean {
    return (this.#target as unknown as { closed: boolean }).closed;
  }

  write(line: string): boolean {
    if (this.#failed) return true;
    this.#pending += line;
    if (this.#pending.length >= MAX_BATCH_CHARS) this.handOver();
    else this.#timer ??= setTimeout(() => this.handOver(), BATCH_MS);
    return true;
  }

  /** Gives the transport what waits. */
  handOver(): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
    if (this.#pending === '') return;
    const lines = this.#pending;
    this.#pending = '';
    this.#target.write(lines);
  }

  flush(callback: (error?: Error) => void): void {
    this.handOver();
    this.#target.flush(callback);
  }

  flushSync(): void {
    this.handOver();
    this.#target.flushSync();
  }

  end(): void {
    this.handOver();
    this.#target.end();
  }
}

/** Writes out everything logged so far and stops the transport workers (before exit, or between tests). */
export async function closeLogger(logger: Logger): Promise<void> {
  await new Promise<void>((resolve) => logger.flush(() => resolve()));
  const stream = (logger as unknown as Record<symbol, NodeJS.WritableStream & { closed?: boolean }>)[pino.symbols.streamSym];
  if (!stream || stream.closed) return;
  // the transport worker is unref'd: a timer keeps the event loop alive until it has closed its files
  await new Promise<void>((resolve) => {
    const guard = setTimeout(resolve, 5000);
    stream.once('close', () => {
      clearTimeout(guard);
      resolve();
    });
    stream.end();
  });
}
