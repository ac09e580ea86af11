/**
 * Server configuration: one zod schema for every setting, filled from command-line flags, then the
 * VOXD_* environment variables, then defaults. A flag given explicitly always wins over its variable.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { z } from 'zod';
import { TRANSPORT_PREFERENCES } from './http/transports.js';

export const DEFAULT_VAD_MODEL = 'ggml-org/whisper-vad/ggml-silero-v6.2.0.bin';
/** The built-in pocketsphinx recognizer (engines/sphinx.ts): behind the STT aliases unless --stt-model says otherwise. */
export const DEFAULT_STT_MODEL = 'sphinx';
/** The built-in flite voices (engines/flite.ts): behind the TTS aliases unless --tts-model says otherwise. */
export const DEFAULT_TTS_MODEL = 'flite';

/** The web interface's port, for `voxd ui` and `serve --start-ui` alike. */
export const DEFAULT_UI_PORT = 3000;

const positiveInt = z.coerce.number().int().positive();
const nonNegativeInt = z.coerce.number().int().nonnegative();
/** A directory that must exist when the server starts (its message names the path). */
const existingDir = z
  .string()
  .min(1)
  .refine((dir) => fs.statSync(dir, { throwIfNoEntry: false })?.isDirectory() ?? false, {
    error: (issue) => (fs.existsSync(String(issue.input)) ? `${String(issue.input)} is not a directory` : `directory ${String(issue.input)} does not exist`),
  });

export const configSchema = z.object({
  host: z.string().min(1).default('localhost'),
  port: z.coerce.number().int().min(0).max(65535).default(8000),
  transport: z.enum(TRANSPORT_PREFERENCES).default('auto'),
  reload: z.boolean().default(false),
  startUi: z.boolean().default(false),
  uiHost: z.string().min(1).default('localhost'),
  uiPort: z.coerce.number().int().min(0).max(65535).default(DEFAULT_UI_PORT),
  allowedOrigins: z.array(z.string().min(1)).min(1).default(['*']),
  logDir: z.string().min(1).default('logs'),
  logLevel: z.enum(['trace', 'debug', 'info', 'warn', 'error', 'fatal']).default('info'),
  realtimeModel: z.string().min(1).nullable().default(null),
  realtimeTranscriptionDelayMs: nonNegativeInt.nullable().default(null),
  vadModel: z.string().min(1).default(DEFAULT_VAD_MODEL),
  ttsMaxBatchSize: positiveInt.max(256).default(8),
  sttModel: z.string().min(1).nullable().default(DEFAULT_STT_MODEL),
  ttsModel: z.string().min(1).nullable().default(DEFAULT_TTS_MODEL),
  voicesDir: existingDir.nullable().default(null),
  modelsDirs: z.array(z.string().min(1)).default([]),
  offline: z.boolean().default(false),
  preload: z.array(z.string().min(1)).default([]),
  maxLoadedModels: nonNegativeInt.default(0),
  modelIdleTtl: nonNegativeInt.default(0),
  maxQueue: nonNegativeInt.default(64),
  modelConcurrency: positiveInt.default(Math.max(1, os.availableParallelism())),
  maxUploadMb: positiveInt.default(100),
  maxAudioSeconds: positiveInt.default(3600),
  maxSeparationSeconds: positiveInt.default(600),
  maxJsonKb: positiveInt.default(1024),
  maxInputChars: positiveInt.default(4096),
  // a live sphinx session holds a decoder of about 100 MiB: 32 of them fit in a few GiB (docs/performance.md)
  maxRealtimeSessions: positiveInt.default(32),
  realtimeIdleTimeout: nonNegativeInt.default(300),
  shutdownTimeout: nonNegativeInt.default(30),
  cacheDir: z
    .string()
    .min(1)
    .default(path.join(os.homedir(), '.cache', 'voxd')),
});

export type Config = z.infer<typeof configSchema>;

/** `voxd ui`: the web interface alone, against the API at `apiUrl`. */
export const uiCommandSchema = z.object({
  host: z.string().min(1).default('localhost'),
  port: z.coerce.number().int().min(0).max(65535).default(DEFAULT_UI_PORT),
  apiUrl: z
    .url({ protocol: /^https?$/, error: 'expected an http:// or https:// address' })
    .transform((url) => url.replace(/\/+$/, ''))
    .default('http://localhost:8000'),
  transport: z.enum(TRANSPORT_PREFERENCES).default('auto'),
  logDir: z.string().min(1).default('logs'),
  logLevel: z.enum(['trace', 'debug', 'info', 'warn', 'error', 'fatal']).default('info'),
});

export type UiCommandConfig = z.infer<typeof uiCommandSchema>;

/** The five environment variables of the seed spec, plus the STT and TTS defaults, the shared voices and the cache location. */
export const ENV_VARIABLES = {
  realtimeModel: 'VOXD_REALTIME_MODEL',
  realtimeTranscriptionDelayMs: 'VOXD_REALTIME_TRANSCRIPTION_DELAY_MS',
  vadModel: 'VOXD_VAD_MODEL',
  ttsMaxBatchSize: 'VOXD_TTS_MAX_BATCH_SIZE',
  sttModel: 'VOXD_STT_MODEL',
  ttsModel: 'VOXD_TTS_MODEL',
  voicesDir: 'VOXD_VOICES_DIR',
  allowedOrigins: 'VOXD_ALLOWED_ORIGINS',
  cacheDir: 'VOXD_CACHE_DIR',
  transport: 'VOXD_TRANSPORT',
} as const satisfies Partial<Record<keyof Config, string>>;

/** Reads the variables that are set, in the shapes the schema expects (origins are comma-separated). */
export function configFromEnv(env: NodeJS.ProcessEnv): Partial<Record<keyof Config, unknown>> {
  const out: Partial<Record<keyof Config, unknown>> = {};
  for (const [key, name] of Object.entries(ENV_VARIABLES) as [keyof typeof ENV_VARIABLES, string][]) {
    const value = env[name];
    if (value === undefined || value === '') continue;
    out[key] =
      key === 'allowedOrigins'
        ? value
            .split(',')
            .map((s) => s.trim())
            .filter(Boolean)
        : value;
  }
  return out;
}

export class ConfigError extends Error {
  override name = 'ConfigError';
}

/** Merges explicit flags over environment values and validates the result. */
export function resolveConfig(flags: Partial<Record<keyof Config, unknown>>, env: NodeJS.ProcessEnv = process.env): Config {
  return parseOrExplain(configSchema, flags, { ...configFromEnv(env), ...flags });
}

/** The settings of `voxd ui` (flags only: its variables are the server's). */
export function resolveUiCommandConfig(flags: Partial<Record<keyof UiCommandConfig, unknown>>): UiCommandConfig {
  return parseOrExplain(uiCommandSchema, flags, flags);
}

/** Validates `values`, naming the flag (when it came from `flags`) or the variable of the first problem. */
function parseOrExplain<S extends z.ZodType>(schema: S, flags: object, values: unknown): z.output<S> {
  const parsed = schema.safeParse(values);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const key = String(issue?.path[0] ?? '');
    const source = key in flags ? `--${key.replace(/[A-Z]/g, (c) => '-' + c.toLowerCase())}` : ((ENV_VARIABLES as Record<string, string>)[key] ?? key);
    throw new ConfigError(`invalid value for ${source}: ${issue?.message ?? 'invalid'}`);
  }
  return parsed.data;
}
