#!/usr/bin/env node
/** The `voxd` command: `voxd serve` (default) runs the API server; `voxd ui` the web interface. */
import './threadpool.js';
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Command, Option } from 'commander';
import { ConfigError, DEFAULT_UI_PORT, DEFAULT_VAD_MODEL, resolveConfig, resolveUiCommandConfig, type Config } from './config.js';
import { createLogger, closeLogger, type Logger } from './logger.js';
import { loadNative, NativeLoadError } from './native/addon.js';
import { startServer } from './server.js';
import { startUiServer } from './ui/server.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const pkg = JSON.parse(fs.readFileSync(path.join(here, '..', '..', 'package.json'), 'utf8')) as { version: string };

function collect(value: string, previous: string[] = []): string[] {
  return [...previous, value];
}

function fail(message: string, code = 2): never {
  process.stderr.write(`${message}\n`);
  process.exit(code);
}

function serveCommand(): Command {
  return new Command('serve')
    .description('run the API server (the default command)')
    .exitOverride((error) => process.exit(error.exitCode === 0 ? 0 : 2)) // usage errors (bad choice, unknown flag) exit 2 like invalid values
    .option('--host <host>', 'host to bind to (default: localhost)')
    .option('--port <port>', 'port of the API server (default: 8000; 0 picks a free port)')
    .addOption(
      new Option(
        '--transport <name>',
        'HTTP transport: uws (uWebSockets.js), node (node:http), or auto: uws where it loads (default: auto; env VOXD_TRANSPORT)',
      ).choices(['auto', 'uws', 'node']),
    )
    .option('--reload', 'restart the server when its compiled code changes (development)')
    .option('--start-ui', `also serve the web interface, on its own port (--ui-port, default: ${DEFAULT_UI_PORT})`)
    .option('--ui-host <host>', 'host the web interface binds to, with --start-ui (default: localhost)')
    .option('--ui-port <port>', `port of the web interface, with --start-ui (default: ${DEFAULT_UI_PORT}; 0 picks a free port)`)
    .option('--allowed-origins <origins...>', 'CORS allowed origins, space-separated (default: *; env VOXD_ALLOWED_ORIGINS, comma-separated)')
    .option('--log-dir <dir>', 'directory for the JSON log files, created if missing (default: logs)')
    .addOption(new Option('--log-level <level>', 'log level (default: info)').choices(['trace', 'debug', 'info', 'warn', 'error', 'fatal']))
    .option('--realtime-model <id>', 'default model for /v1/realtime (env VOXD_REALTIME_MODEL)')
    .option('--realtime-transcription-delay-ms <ms>', 'latency/quality knob for models that declare it (env VOXD_REALTIME_TRANSCRIPTION_DELAY_MS)')
    .option('--vad-model <id>', `VAD model for server_vad (default: ${DEFAULT_VAD_MODEL}; env VOXD_VAD_MODEL)`)
    .option('--tts-max-batch-size <n>', 'maximum TTS requests per continuous batch (default: 8; env VOXD_TTS_MAX_BATCH_SIZE)')
    .option('--stt-model <id>', 'model behind the vendor aliases whisper-1, gpt-4o-transcribe, gpt-4o-mini-transcribe')
    .option('--tts-model <id>', 'model behind the vendor aliases tts-1, tts-1-hd, gpt-4o-mini-tts (default: flite; env VOXD_TTS_MODEL)')
    .option('--voices-dir <dir>', 'reference clips offered as voices by every GGML TTS model that clones, beside its own voices/ (env VOXD_VOICES_DIR)')
    .option('--models-dir <dir>', 'allow local model paths (and ref_audio paths) only under this root; repeatable', collect)
    .option('--offline', 'never contact the model hub; use the local cache only (also HF_HUB_OFFLINE=1)')
    .option('--preload <id>', 'load this model at start and keep it resident; /readyz waits for it; repeatable', collect)
    .option('--max-loaded-models <n>', 'unload the least recently used idle model beyond this many (default: 0 = no limit)')
    .option('--model-idle-ttl <seconds>', 'unload a model unused for this long (default: 0 = never)')
    .option('--max-queue <n>', 'requests that may wait per model before new ones get 503; a request counts once however many jobs it makes (default: 64)')
    .option('--model-concurrency <n>', 'jobs that run at once per model (default: number of CPU cores)')
    .option('--max-upload-mb <mb>', 'largest accepted audio upload, in MiB (default: 100)')
    .option('--max-audio-seconds <seconds>', 'longest accepted audio input, in seconds of decoded audio (default: 3600)')
    .option('--max-separation-seconds <seconds>', 'longest audio accepted by /v1/audio/separations, in seconds (default: 600)')
    .option('--max-json-kb <kb>', 'largest accepted JSON body, in KiB (default: 1024)')
    .option('--max-input-chars <n>', 'longest text accepted by /v1/audio/speech, in characters (default: 4096)')
    .option(
      '--max-realtime-sessions <n>',
      'WebSocket transcription sessions open at once; more are refused with 503; a sphinx session holds a ~100 MiB decoder (default: 32)',
    )
    .option('--realtime-idle-timeout <seconds>', 'close a WebSocket transcription session that sent nothing for this long (default: 300; 0 = never)')
    .option('--shutdown-timeout <seconds>', 'on SIGTERM/SIGINT, how long in-flight requests may take to finish; the rest get 503 (default: 30)')
    .option('--cache-dir <dir>', 'voxd cache for built models and packages (default: ~/.cache/voxd; env VOXD_CACHE_DIR)')
    .action(async (_options: Record<string, unknown>, command: Command) => {
      const config = orExplain(() => resolveConfig(normaliseFlags(explicitFlags(command))));
      if (config.reload) return superviseWithReload();
      await serve(config);
    });
}

function uiCommand(): Command {
  return new Command('ui')
    .description('run the web interface alone, against a voxd API server anywhere')
    .exitOverride((error) => process.exit(error.exitCode === 0 ? 0 : 2))
    .option('--host <host>', 'host to bind to (default: localhost)')
    .option('--port <port>', `port of the web interface (default: ${DEFAULT_UI_PORT}; 0 picks a free port)`)
    .option('--api-url <url>', 'base address of the voxd API server the page talks to (default: http://localhost:8000)')
    .addOption(new Option('--transport <name>', 'HTTP transport: uws, node or auto (default: auto)').choices(['auto', 'uws', 'node']))
    .option('--log-dir <dir>', 'directory for the JSON log files, created if missing (default: logs)')
    .addOption(new Option('--log-level <level>', 'log level (default: info)').choices(['trace', 'debug', 'info', 'warn', 'error', 'fatal']))
    .action(async (_options: Record<string, unknown>, command: Command) => {
      const config = orExplain(() => resolveUiCommandConfig(explicitFlags(command)));
      const logger = createLogger({ logDir: config.logDir, level: config.logLevel });
      let ui;
      try {
        ui = await startUiServer({ ...config, logger, pageConfig: () => ({ apiBase: config.apiUrl, maxInputChars: null }) });
      } catch (error) {
        await closeLogger(logger);
        fail(`voxd: cannot start the web interface on ${config.host}:${config.port}: ${error instanceof Error ? error.message : String(error)}`, 1);
      }
      logger.info({ host: config.host, port: ui.port, api: config.apiUrl }, `voxd web interface on http://${config.host}:${ui.port} (API ${config.apiUrl})`);
      stopOnSignals(
        logger,
        () => ui.close(),
        (code) => process.exit(code),
      );
    });
}

/** The validated settings, or exit 2 with the one line naming the flag or variable at fault. */
function orExplain<T>(resolve: () => T): T {
  try {
    return resolve();
  } catch (error) {
    if (error instanceof ConfigError) fail(`voxd: ${error.message}`);
    throw error;
  }
}

/** Only the flags the user typed, so an environment variable applies when its flag is absent. */
function explicitFlags(command: Command): Record<string, unknown> {
  const options = command.opts();
  return Object.fromEntries(
    Object.keys(options)
      .filter((key) => command.getOptionValueSource(key) === 'cli')
      .map((key) => [key, options[key]]),
  );
}

function normaliseFlags(flags: Record<string, unknown>): Partial<Record<keyof Config, unknown>> {
  const { modelsDir, allowedOrigins, ...rest } = flags;
  const out: Record<string, unknown> = { ...rest };
  if (modelsDir !== undefined) out.modelsDirs = modelsDir;
  // one quoted argument "a b" or several arguments a b: both are space-separated lists
  if (allowedOrigins !== undefined) out.allowedOrigins = (allowedOrigins as string[]).flatMap((o) => o.split(/\s+/)).filter(Boolean);
  return out;
}

async function serve(config: Config): Promise<void> {
  const logger = createLogger({ logDir: config.logDir, level: config.logLevel });
  let server;
  try {
    server = await startServer(config, logger);
  } catch (error) {
    await closeLogger(logger);
    if (error instanceof NativeLoadError) fail(error.message, 1);
    const message = error instanceof Error ? error.message : String(error);
    fail(`voxd: cannot start: ${message}`, 1);
  }
  // process.exit() would wait for engine calls still running on worker threads
  stopOnSignals(
    logger,
    () => server.close(),
    (code) => loadNative().exitNow(code),
  );
}

/** SIGTERM/SIGINT: a graceful `close`, then exit 0; a second signal exits at once with 128 + its number. */
function stopOnSignals(logger: Logger, close: () => Promise<void>, exitNow: (code: number) => void): void {
  let stopping = false;
  const stop = (signal: NodeJS.Signals): void => {
    if (stopping) {
      process.stderr.write(`voxd: second ${signal}: exiting now\n`);
      exitNow(128 + os.constants.signals[signal]);
    }
    stopping = true;
    logger.info({ signal }, 'signal received');
    close()
      .then(() => closeLogger(logger))
      .then(() => process.exit(0));
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}

/** --reload: runs the server as a child and restarts it when files under dist/src change. */
function superviseWithReload(): void {
  const args = process.argv.slice(2).filter((arg) => arg !== '--reload');
  let child: ChildProcess | null = null;
  let timer: NodeJS.Timeout | null = null;
  let stopping = false;
  const running = (proc: ChildProcess | null): proc is ChildProcess => proc !== null && proc.exitCode === null && proc.signalCode === null;
  const start = (): void => {
    if (stopping) return;
    // its own process group: a terminal's Ctrl-C reaches only the supervisor, which passes it on once
    child = spawn(process.execPath, [fileURLToPath(import.meta.url), ...args], { stdio: 'inherit', detached: true });
  };
  const restart = (): void => {
    process.stderr.write('voxd: code changed, restarting\n');
    const old = child;
    if (!running(old)) return start();
    old.once('exit', start);
    old.kill('SIGTERM');
  };
  const watcher = fs.watch(here, { recursive: true }, () => {
    if (timer) clearTimeout(timer);
    timer = setTimeout(restart, 300);
  });
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.on(signal, () => {
      if (stopping) return;
      stopping = true;
      if (timer) clearTimeout(timer);
      watcher.close();
      if (!running(child)) process.exit(0);
      child.once('exit', (code) => process.exit(code ?? 0));
      child.kill(signal);
    });
  }
  start();
}

const program = new Command('voxd')
  .description('voxd: a local audio server (speech-to-text, text-to-speech, separation, realtime transcription) with a vendor-compatible HTTP API')
  .version(pkg.version)
  .addCommand(serveCommand(), { isDefault: true })
  .addCommand(uiCommand());

program.parseAsync(process.argv).catch((error: unknown) => {
  fail(`voxd: ${error instanceof Error ? error.message : String(error)}`, 1);
});
