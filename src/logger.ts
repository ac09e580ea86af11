/**
 * pino logging: JSON lines to a rotated file in --log-dir and readable lines on the console, both written by
 * pino's worker-thread transports so logging never blocks request handling.
 */
import fs from 'node:fs';
import path from 'node:path';
import { pino, type Logger } from 'pino';

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
  const targets: pino.TransportTargetOptions[] = [
    {
      target: 'pino-roll',
      level: options.level,
      // voxd.1.log, voxd.2.log, ...: a new file every day or every 20 MB, the last 10 kept
      options: { file: path.join(logDir, LOG_FILE_BASENAME), extension: '.log', frequency: 'daily', size: '20m', mkdir: true, limit: { count: 10 } },
    },
  ];
  if (options.console !== false) {
    targets.push({
      target: 'pino-pretty',
      level: options.level,
      options: { destination: 2, colorize: process.stderr.isTTY, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname', singleLine: true },
    });
  }
  return pino({ level: options.level, base: { pid: process.pid } }, pino.transport({ targets }));
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
