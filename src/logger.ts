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
      options: { destination: 2, colorize: process.stderr.isTTY, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname' },
    });
  }
  return pino({ level: options.level, base: { pid: process.pid } }, pino.transport({ targets }));
}

/** Waits until the transports wrote everything (before process exit). */
export function flushLogger(logger: Logger): Promise<void> {
  return new Promise((resolve) => logger.flush(() => resolve()));
}
