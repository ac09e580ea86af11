import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { pino, type Logger } from 'pino';
import { prettyFactory } from 'pino-pretty';
import { PLAIN_CONSOLE_FORMAT, renderPlainLine } from '../../src/log-transport.js';
import { loggerOptions, requestLineWriter, type RequestLine } from '../../src/logger.js';
import { ROOT } from '../helpers/paths.js';

const pinoPretty = prettyFactory({ ...PLAIN_CONSOLE_FORMAT, colorize: false }) as (line: string) => string;

const time = Date.UTC(2026, 0, 2, 3, 4, 5, 67);
const line = (fields: object): string => JSON.stringify({ level: 30, time, pid: 4321, ...fields });

/** Lines the shortcut renders: each must come out as pino-pretty renders it. */
const PLAIN = [
  line({ reqId: '0b7f6c1e-6f1e-4e43-9a53-2a1f1c9d2a11', method: 'GET', route: '/v1/models', status: 200, ms: 0.1, bytes: 27, msg: 'GET /v1/models 200' }),
  line({ msg: 'shutdown complete' }),
  line({ msg: '' }),
  line({ host: '127.0.0.1', port: 8000, transport: 'uws', msg: 'voxd listening on http://127.0.0.1:8000 (transport uws)' }),
  line({ path: 'C:\\models\\a "quoted" \\\\ name', nested: { a: [1, 2, { b: null }], c: true }, msg: 'back\\slash "and" quotes' }),
  line({ 1: 'integer key', z: 'last', a: 'first', msg: 'key order' }),
  line({ text: 'tab\there, newline\nthere, é, 日本, 🎤', msg: 'unicode é 日本 🎤' }),
  line({ big: 1e21, small: 1e-7, neg: -0.5, msg: 'numbers' }),
  line({ type: 'request', msg: 'a type that is not Error' }),
  JSON.stringify({ level: 40, time: 0, msg: 'the epoch', reqId: 'x', cut: true }),
  JSON.stringify({ level: 50, time: time + 999, hostname: 'box', msg: 'error level' }),
  ...[10, 20, 60].map((level) => JSON.stringify({ level, time, msg: `level ${level}` })),
];

/** Lines the shortcut leaves to pino-pretty. */
const SPECIAL = [
  line({ err: { type: 'Error', message: 'boom', stack: 'Error: boom\n    at x' }, msg: 'failed' }),
  line({ error: 'x', msg: 'error key' }),
  line({ name: 'voxd', msg: 'named' }),
  line({ caller: 'x.js:1', msg: 'caller' }),
  line({ timestamp: 5, msg: 'timestamp' }),
  line({ type: 'Error', stack: 'Error: x', msg: 'error log' }),
  line({ msg: 'control \u0007 char' }),
  line({ msg: 42 }),
  line({ other: 'no message' }),
  JSON.stringify({ level: 35, time, msg: 'custom level' }),
  JSON.stringify({ level: '30', time, msg: 'string level' }),
  JSON.stringify({ level: 30, time: 'yesterday', msg: 'string time' }),
  JSON.stringify({ level: 30, time: 9e15, msg: 'invalid date' }),
  '{"level":30,"time":1,"__proto__":{"x":1},"msg":"proto"}',
  '{"level":30,"time":1,"constructor":{"prototype":{}},"msg":"constructor"}',
  '{"level":30,"time":1,"msg":"escaped \\u0041"}',
  'not json',
  'null',
  '42',
  '[1,2]',
  '',
];

describe('console log lines (log-transport.ts)', () => {
  it('renders plain lines byte for byte as pino-pretty does', () => {
    for (const input of PLAIN) {
      assert.notEqual(renderPlainLine(input), null, `the shortcut takes ${input}`);
      assert.equal(renderPlainLine(input), pinoPretty(input), input);
    }
  });

  it('leaves every other line to pino-pretty', () => {
    for (const input of SPECIAL) assert.equal(renderPlainLine(input), null, input);
  });

  it('writes the file as pino writes it and the console as pino-pretty renders each line', () => {
    const logDir = fs.mkdtempSync(path.join(os.tmpdir(), 'voxd-log-transport-'));
    try {
      const script = `
        import { createLogger, closeLogger } from ${JSON.stringify(path.join(ROOT, 'dist', 'src', 'logger.js'))};
        const logger = createLogger({ logDir: ${JSON.stringify(logDir)}, level: 'info' });
        for (let i = 0; i < 2000; i++) logger.info({ reqId: 'r' + i, method: 'GET', route: '/v1/models', status: 200, ms: i / 10, bytes: 27 }, 'GET /v1/models 200');
        logger.warn({ reqId: 'c', cut: true }, 'cut after 5 bytes');
        logger.error({ err: new Error('boom') }, 'request failed');
        logger.info({ path: 'C:\\\\dir', nested: { a: [1] } }, 'odd "values"');
        logger.debug('below the level');
        await closeLogger(logger);
      `;
      const child = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', env: { ...process.env, NO_COLOR: '1' } });
      assert.equal(child.status, 0, child.stderr);
      const fileLines = fs.readFileSync(path.join(logDir, 'voxd.1.log'), 'utf8').split('\n').slice(0, -1);
      assert.equal(fileLines.length, 2003);
      assert.ok(!fileLines.some((l) => l.includes('below the level')));
      assert.deepEqual(JSON.parse(fileLines[0] as string), {
        ...JSON.parse(fileLines[0] as string),
        level: 30,
        reqId: 'r0',
        method: 'GET',
        route: '/v1/models',
        status: 200,
        ms: 0,
        bytes: 27,
        msg: 'GET /v1/models 200',
      });
      assert.equal(child.stderr, fileLines.map((l) => pinoPretty(l)).join(''));
    } finally {
      fs.rmSync(logDir, { recursive: true, force: true });
    }
  });

  it('writes out the lines still batched when the process exits at once', () => {
    const logDir = fs.mkdtempSync(path.join(os.tmpdir(), 'voxd-log-transport-'));
    try {
      const script = `
        import { createLogger } from ${JSON.stringify(path.join(ROOT, 'dist', 'src', 'logger.js'))};
        const logger = createLogger({ logDir: ${JSON.stringify(logDir)}, level: 'info' });
        logger.info('before the worker is ready');
        setTimeout(() => {
          for (let i = 0; i < 100; i++) logger.info({ i }, 'last words');
          process.exit(3);
        }, 500);
      `;
      const child = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', env: { ...process.env, NO_COLOR: '1' } });
      assert.equal(child.status, 3, child.stderr);
      const fileLines = fs.readFileSync(path.join(logDir, 'voxd.1.log'), 'utf8').split('\n').slice(0, -1);
      assert.equal(fileLines.length, 101);
      assert.equal(child.stderr.split('\n').filter((l) => l.includes('last words')).length, 100);
    } finally {
      fs.rmSync(logDir, { recursive: true, force: true });
    }
  });

  it('stops logging when its worker fails (a file it cannot open), saying so once on stderr, and the process lives on', () => {
    const logDir = fs.mkdtempSync(path.join(os.tmpdir(), 'voxd-log-transport-'));
    try {
      fs.mkdirSync(path.join(logDir, 'voxd.1.log')); // the file the worker opens first: a directory cannot be
      const script = `
        import { createLogger, closeLogger } from ${JSON.stringify(path.join(ROOT, 'dist', 'src', 'logger.js'))};
        const logger = createLogger({ logDir: ${JSON.stringify(logDir)}, level: 'info', console: false });
        logger.info('first');
        setTimeout(async () => {
          for (let i = 0; i < 100; i++) logger.info({ i }, 'after the failure');
          await closeLogger(logger);
          console.log('still running');
        }, 1000);
      `;
      const child = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 20_000 });
      assert.equal(child.status, 0, child.stderr);
      assert.equal(child.stdout, 'still running\n');
      assert.match(child.stderr, /^voxd: logging stopped, its worker failed: EISDIR: .*voxd\.1\.log'\n$/);
    } finally {
      fs.rmSync(logDir, { recursive: true, force: true });
    }
  });
});

describe('request log lines', () => {
  /** A logger configured as createLogger's, writing into `lines`. */
  function capturing(options: pino.LoggerOptions = {}): { logger: Logger; lines: string[] } {
    const lines: string[] = [];
    return { logger: pino({ ...loggerOptions('info'), ...options }, { write: (text: string) => void lines.push(text) }), lines };
  }

  const requests: [RequestLine, string][] = [
    [{ reqId: '0b7f6c1e-6f1e-4e43-9a53-2a1f1c9d2a11', method: 'GET', route: '/v1/models', status: 200, ms: 0.1, bytes: 27 }, 'GET /v1/models 200'],
    [{ reqId: 'client:id/with+odd=chars', method: 'PROPFIND', route: 'unmatched', status: 404, ms: 12345.6, bytes: 0 }, 'PROPFIND unmatched 404'],
    [{ reqId: 'x', method: 'G"E\\T\u0001', route: '/v1/models/*', status: 499, ms: Number.NaN, bytes: 1e21 }, 'quote " backslash \\ tab \t é 🎤'],
  ];

  it('requestLineWriter writes what logger.info writes, byte for byte', (t) => {
    t.mock.method(Date, 'now', () => time);
    const { logger, lines } = capturing();
    const write = requestLineWriter(logger);
    for (const [fields, msg] of requests) {
      logger.info(fields, msg);
      write(fields, msg);
      const [byPino, byWriter] = lines.splice(0);
      assert.equal(byWriter, byPino);
    }
  });

  it('leaves a logger with anything that could change the line to pino', (t) => {
    t.mock.method(Date, 'now', () => time);
    const { logger, lines } = capturing({ mixin: () => ({ pod: 'a' }), serializers: { route: (route: string) => route.toUpperCase() } });
    const [fields, msg] = requests[0] as [RequestLine, string];
    logger.info(fields, msg);
    requestLineWriter(logger)(fields, msg);
    assert.match(lines[0] as string, /"pod":"a".*"route":"\/V1\/MODELS"/);
    assert.equal(lines[1], lines[0]);
  });
});
