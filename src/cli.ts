#!/usr/bin/env node
/**
 * The `voxd` command: `voxd serve` (default) runs the API server; `voxd ui` the web interface; `voxd pull`, `voxd
 * models` and `voxd rm` fetch, list and remove models in the hub cache.
 */
import './threadpool.js';
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Command, Option } from 'commander';
import {
  ConfigError,
  flagSpelling,
  helpLine,
  resolveConfig,
  resolveUiCommandConfig,
  SERVE_SETTINGS,
  UI_SETTINGS,
  type Config,
  type Setting,
} from './config.js';
import { createLogger, closeLogger, type Logger } from './logger.js';
import { listModels, pullModel, removeModel } from './model-commands.js';
import { loadNative, NativeLoadError } from './native/load.js';
import { startServer } from './server.js';
import { startUiServer } from './ui/server.js';
import { VOXD_VERSION } from './version.js';

const here = path.dirname(fileURLToPath(import.meta.url));

function collect(value: string, previous: string[] = []): string[] {
  return [...previous, value];
}

function fail(message: string, code = 2): never {
  process.stderr.write(`${message}\n`);
  process.exit(code);
}

/** A command whose flags are `settings`; usage errors (bad choice, unknown flag) exit 2 like invalid values. */
function settingsCommand(name: string, description: string, settings: Record<string, Setting>): Command {
  const command = new Command(name)
    .description(description)
    .exitOverride((error) => process.exit(error.exitCode === 0 ? 0 : 2))
    // the help line already says what the flag takes: no "(choices: ...)" after it
    .configureHelp({ optionDescription: (option) => option.description });
  for (const setting of Object.values(settings)) {
    const option = new Option(flagSpelling(setting), helpLine(setting));
    if (setting.choices) option.choices(setting.choices);
    if (setting.list === 'repeatable') option.argParser(collect);
    command.addOption(option);
  }
  return command;
}

function serveCommand(): Command {
  return settingsCommand('serve', 'run the API server (the default command)', SERVE_SETTINGS).action(
    async (_options: Record<string, unknown>, command: Command) => {
      const config = orExplain(() => resolveConfig(normaliseFlags(explicitFlags(command))));
      if (config.reload) return superviseWithReload();
      await serve(config);
    },
  );
}

function uiCommand(): Command {
  return settingsCommand('ui', 'run the web interface alone, against a voxd API server anywhere', UI_SETTINGS).action(
    async (_options: Record<string, unknown>, command: Command) => {
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
    },
  );
}

/**
 * `voxd pull`, `voxd models`, `voxd rm`: they read the server's variables (the hub cache, offline mode, the download
 * timeout) and take the model as an argument; a failure is one line and exit 1.
 */
function modelCommands(): Command[] {
  const run = (work: (config: Config) => Promise<void>): Promise<void> =>
    work(orExplain(() => resolveConfig({}))).catch((error: unknown) => fail(`voxd: ${error instanceof Error ? error.message : String(error)}`, 1));
  const model = '<model>';
  const modelHelp = 'a catalog name (`voxd models` lists them) or a hub ID (owner/repo, owner/repo/file, owner/repo:QUANT)';
  return [
    new Command('pull')
      .description('download a model into the hub cache the server uses, resuming an interrupted download; prints its path and size')
      .argument(model, modelHelp)
      .action((id: string) => run((config) => pullModel(id, config))),
    new Command('models')
      .description('list the catalog (what is in the hub cache marked), other cached models, and what a running server has loaded')
      .option('--api-url <url>', 'the running server to ask', 'http://127.0.0.1:8000')
      .action((options: { apiUrl: string }) => run((config) => listModels(config, options.apiUrl.replace(/\/+$/, '')))),
    new Command('rm')
      .description("delete a model's files from the hub cache")
      .argument(model, modelHelp)
      .action((id: string) => run((config) => removeModel(id, config))),
  ];
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
  .version(VOXD_VERSION)
  .addCommand(serveCommand(), { isDefault: true })
  .addCommand(uiCommand());
for (const command of modelCommands()) program.addCommand(command);

program.parseAsync(process.argv).catch((error: unknown) => {
  fail(`voxd: ${error instanceof Error ? error.message : String(error)}`, 1);
});
