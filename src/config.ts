/**
 * Server configuration: one zod schema for every setting, filled from command-line flags, then the
 * VOXD_* environment variables, then defaults. A flag given explicitly always wins over its variable.
 * Beside the schemas, one table per command says how people meet each setting (its flag, variable and help): the
 * CLI's options and --help and the tables of docs/configuration.md are all made from it.
 */
import fs from 'node:fs';
import os from 'node:os';
import { z } from 'zod';
import { DIARIZER_MODEL_ID } from './engines/diarizer.js';
import { DEFAULT_DOWNLOAD_TIMEOUT_S } from './services/hub.js';

export const DEFAULT_VAD_MODEL = 'ggml-org/whisper-vad/ggml-silero-v6.2.0.bin';
/** The built-in pocketsphinx recognizer (engines/sphinx.ts): behind the STT aliases unless --stt-model says otherwise. */
export const DEFAULT_STT_MODEL = 'sphinx';
/** The built-in flite voices (engines/flite.ts): behind the TTS aliases unless --tts-model says otherwise. */
export const DEFAULT_TTS_MODEL = 'flite';

/** The web interface's port, for `voxd ui` and `serve --start-ui` alike. */
export const DEFAULT_UI_PORT = 3000;

/** What `--transport` asks of http/transports.ts: uWebSockets.js where it loads (`auto`), or one of the two. */
export const TRANSPORT_PREFERENCES = ['auto', 'uws', 'node'] as const;
export type TransportPreference = (typeof TRANSPORT_PREFERENCES)[number];

/** pino's levels, from the most verbose. */
const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal'] as const;

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
  wyomingPort: z.coerce.number().int().min(0).max(65535).nullable().default(null),
  wyomingHost: z.string().min(1).nullable().default(null),
  wyomingSttModel: z.string().min(1).nullable().default(null),
  wyomingTtsModel: z.string().min(1).nullable().default(null),
  maxWyomingConnections: positiveInt.max(10_000).default(16),
  wyomingIdleTimeout: positiveInt.max(86_400).default(60),
  wyomingZeroconf: z.enum(['on', 'off']).default('on'),
  // one DNS label: at most 63 bytes, and no dot (Home Assistant reads the name up to its first dot)
  wyomingZeroconfName: z
    .string()
    .min(1)
    .refine((name) => Buffer.byteLength(name) <= 63 && !name.includes('.'), { error: 'at most 63 bytes, with no dot' })
    .nullable()
    .default(null),
  logDir: z.string().min(1).default('logs'),
  logLevel: z.enum(LOG_LEVELS).default('info'),
  realtimeModel: z.string().min(1).nullable().default(null),
  realtimeTranscriptionDelayMs: nonNegativeInt.nullable().default(null),
  vadModel: z.string().min(1).default(DEFAULT_VAD_MODEL),
  diarizationModel: z.string().min(1).default(DIARIZER_MODEL_ID),
  ttsMaxBatchSize: positiveInt.max(256).default(8),
  sttMaxBatchSize: positiveInt.max(256).default(8),
  sttModel: z.string().min(1).nullable().default(DEFAULT_STT_MODEL),
  ttsModel: z.string().min(1).nullable().default(DEFAULT_TTS_MODEL),
  voicesDir: existingDir.nullable().default(null),
  customVoicesDir: z.string().min(1).nullable().default(null),
  maxVoices: positiveInt.max(100_000).default(100),
  requireVoiceConsent: z.enum(['on', 'off']).default('on'),
  modelsDirs: z.array(z.string().min(1)).default([]),
  offline: z.boolean().default(false),
  downloadTimeoutS: positiveInt.default(DEFAULT_DOWNLOAD_TIMEOUT_S),
  preload: z.array(z.string().min(1)).default([]),
  maxLoadedModels: nonNegativeInt.default(0),
  modelIdleTtl: nonNegativeInt.default(0),
  maxQueue: nonNegativeInt.default(64),
  modelConcurrency: positiveInt.default(Math.max(1, os.availableParallelism())),
  jobTimeoutS: z.coerce.number().min(0).default(300),
  maxUploadMb: positiveInt.default(100),
  maxInflightUploadMb: positiveInt.default(1024),
  maxAudioSeconds: positiveInt.default(3600),
  maxSeparationSeconds: positiveInt.default(600),
  maxJsonKb: positiveInt.default(1024),
  maxInputChars: positiveInt.default(4096),
  // a live sphinx session holds a decoder of about 100 MiB: 32 of them fit in a few GiB (docs/performance.md)
  maxRealtimeSessions: positiveInt.default(32),
  // under the open-file limit at its tightest (1024), with room for the process's other files (docs/configuration.md)
  maxConnections: positiveInt.default(900),
  realtimeIdleTimeout: nonNegativeInt.default(300),
  drainGraceS: z.coerce.number().min(0).max(3600).default(0),
  drainTimeoutS: nonNegativeInt.default(30),
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
  logLevel: z.enum(LOG_LEVELS).default('info'),
});

export type UiCommandConfig = z.infer<typeof uiCommandSchema>;

/** How people meet one setting: its flag, its variable and what it does. */
interface SettingText {
  flag: `--${string}`;
  /** The placeholder of its value in --help (`--max-upload-mb <mb>`); none for an on/off flag. */
  value?: string;
  /** A list: `repeatable` takes one value per flag, `variadic` several after one flag. Its variable is comma-separated. */
  list?: 'repeatable' | 'variadic';
  choices?: readonly string[];
  env?: string;
  /** What it does, for --help and docs/configuration.md: lower-case markdown, with `code` as the only markup. */
  help: string;
  /** The default in words (markdown) where the schema computes it on this machine; else the schema's own is shown. */
  shownDefault?: string;
}

/** A setting with the default people read (null when there is none, or the flag is off). */
export type Setting = Omit<SettingText, 'shownDefault'> & { shownDefault: string | null };

const code = (text: string): string => `\`${text}\``;

/** A schema default in markdown, or null for none (or off). */
function defaultInWords(value: unknown): string | null {
  if (value === null || value === false || (Array.isArray(value) && value.length === 0)) return null;
  return code(Array.isArray(value) ? value.join(' ') : String(value));
}

/** The settings of a command, each with its default as the schema gives it: the schema stays the one source of defaults. */
function withShownDefaults<K extends string>(schema: z.ZodType<Record<K, unknown>>, texts: Record<K, SettingText>): Record<K, Setting> {
  const defaults = schema.parse({});
  const settings = (Object.entries(texts) as [K, SettingText][]).map(([key, text]) => [
    key,
    { ...text, shownDefault: text.shownDefault ?? defaultInWords(defaults[key]) },
  ]);
  return Object.fromEntries(settings) as Record<K, Setting>;
}

// the flags `voxd serve` and `voxd ui` share
const HOST = { flag: '--host', value: 'host', help: 'host to bind to' } satisfies SettingText;
const TRANSPORT = {
  flag: '--transport',
  value: 'name',
  choices: TRANSPORT_PREFERENCES,
  help: 'HTTP transport: `uws` (uWebSockets.js), `node` (node:http), or `auto`: uWS where its binary loads, else node:http',
} satisfies SettingText;
const LOG_DIR = { flag: '--log-dir', value: 'dir', help: 'directory for the JSON log files (created if missing)' } satisfies SettingText;
const LOG_LEVEL = {
  flag: '--log-level',
  value: 'level',
  choices: LOG_LEVELS,
  help: `log level, from the most verbose: ${LOG_LEVELS.map(code).join(', ')}`,
} satisfies SettingText;

/** The flags of `voxd serve`, in the order of its --help, with the variables the server reads. */
export const SERVE_SETTINGS = withShownDefaults<keyof Config>(configSchema, {
  host: HOST,
  port: { flag: '--port', value: 'port', help: 'port of the API server (`0` picks a free port)' },
  transport: { ...TRANSPORT, env: 'VOXD_TRANSPORT' },
  reload: { flag: '--reload', help: 'restart the server when its compiled code (`dist/src`) changes (development)' },
  startUi: {
    flag: '--start-ui',
    help: 'also serve the web interface, on its own port (`--ui-port`); start fails, releasing the API port, when that port is taken',
  },
  uiHost: { flag: '--ui-host', value: 'host', help: 'host the web interface binds to (with `--start-ui`)' },
  uiPort: { flag: '--ui-port', value: 'port', help: 'port of the web interface (with `--start-ui`; `0` picks a free port)' },
  allowedOrigins: { flag: '--allowed-origins', value: 'origins', list: 'variadic', env: 'VOXD_ALLOWED_ORIGINS', help: 'CORS allowed origins, space-separated' },
  wyomingPort: {
    flag: '--wyoming-port',
    value: 'port',
    env: 'VOXD_WYOMING_PORT',
    help: 'also serve the Wyoming protocol (Home Assistant) on this TCP port, speech-to-text and text-to-speech on one port (`0` picks a free port; off when unset)',
  },
  wyomingHost: { flag: '--wyoming-host', value: 'host', env: 'VOXD_WYOMING_HOST', help: 'host the Wyoming listener binds to (default: `--host`)' },
  wyomingSttModel: {
    flag: '--wyoming-stt-model',
    value: 'id',
    env: 'VOXD_WYOMING_STT_MODEL',
    help: 'model Wyoming clients transcribe with (default: `--stt-model`)',
  },
  wyomingTtsModel: {
    flag: '--wyoming-tts-model',
    value: 'id',
    env: 'VOXD_WYOMING_TTS_MODEL',
    help: 'model Wyoming clients speak with, and whose voices they list (default: `--tts-model`)',
  },
  maxWyomingConnections: {
    flag: '--max-wyoming-connections',
    value: 'n',
    help: 'Wyoming connections open at once; one more is answered with an `error` event and closed',
  },
  wyomingIdleTimeout: {
    flag: '--wyoming-idle-timeout',
    value: 'seconds',
    help: 'close a Wyoming connection on which nothing was sent either way for this long while none of its work was under way (an `error` event, then close)',
  },
  wyomingZeroconf: {
    flag: '--wyoming-zeroconf',
    value: 'on|off',
    env: 'VOXD_WYOMING_ZEROCONF',
    help: 'advertise the Wyoming listener by zeroconf (`_wyoming._tcp`), for Home Assistant to discover, unless it is bound to a loopback address',
  },
  wyomingZeroconfName: {
    flag: '--wyoming-zeroconf-name',
    value: 'name',
    env: 'VOXD_WYOMING_ZEROCONF_NAME',
    help: 'name the Wyoming listener is advertised as (default: `voxd-` and the host name)',
  },
  logDir: LOG_DIR,
  logLevel: LOG_LEVEL,
  realtimeModel: { flag: '--realtime-model', value: 'id', env: 'VOXD_REALTIME_MODEL', help: 'default model for `/v1/realtime`' },
  realtimeTranscriptionDelayMs: {
    flag: '--realtime-transcription-delay-ms',
    value: 'ms',
    env: 'VOXD_REALTIME_TRANSCRIPTION_DELAY_MS',
    help: 'latency/quality knob for models that declare it',
  },
  vadModel: { flag: '--vad-model', value: 'id', env: 'VOXD_VAD_MODEL', help: 'VAD model for `server_vad` turn detection' },
  diarizationModel: {
    flag: '--diarization-model',
    value: 'id',
    env: 'VOXD_DIARIZATION_MODEL',
    help: 'speaker diarization model for `diarized_json`, `diarize=true` and `gpt-4o-transcribe-diarize` (the built-in `mfcc-bic`)',
  },
  ttsMaxBatchSize: { flag: '--tts-max-batch-size', value: 'n', env: 'VOXD_TTS_MAX_BATCH_SIZE', help: 'maximum TTS requests per continuous batch (1 to 256)' },
  sttMaxBatchSize: {
    flag: '--stt-max-batch-size',
    value: 'n',
    env: 'VOXD_STT_MAX_BATCH_SIZE',
    help: 'maximum Whisper, audio language model (up to 64) and, on a GPU, Parakeet transcriptions (requests and realtime turns) decoded together (1 to 256)',
  },
  sttModel: {
    flag: '--stt-model',
    value: 'id',
    env: 'VOXD_STT_MODEL',
    help: 'model behind the aliases `whisper-1`, `gpt-4o-transcribe`, `gpt-4o-mini-transcribe`',
  },
  ttsModel: { flag: '--tts-model', value: 'id', env: 'VOXD_TTS_MODEL', help: 'model behind the aliases `tts-1`, `tts-1-hd`, `gpt-4o-mini-tts`' },
  voicesDir: {
    flag: '--voices-dir',
    value: 'dir',
    env: 'VOXD_VOICES_DIR',
    help: 'reference clips offered as voices by every cloning GGML TTS model, after its own `voices/` (which wins a clash)',
  },
  customVoicesDir: {
    flag: '--custom-voices-dir',
    value: 'dir',
    env: 'VOXD_CUSTOM_VOICES_DIR',
    help: 'where voices made with `POST /v1/audio/voices` and their consents are kept, shared by instances that share it (default: `voxd/voices` beside the hub cache)',
  },
  maxVoices: { flag: '--max-voices', value: 'n', env: 'VOXD_MAX_VOICES', help: 'most custom voices kept (`400` beyond)' },
  requireVoiceConsent: {
    flag: '--require-voice-consent',
    value: 'on|off',
    env: 'VOXD_REQUIRE_VOICE_CONSENT',
    help: 'a custom voice must name a consent recorded at `/v1/audio/voice_consents`',
  },
  modelsDirs: {
    flag: '--models-dir',
    value: 'dir',
    list: 'repeatable',
    help: 'allow local model paths (and `ref_audio` paths) only under this root; relative IDs are also looked up there',
  },
  offline: { flag: '--offline', help: 'never contact the hub; use the local cache only (same as `HF_HUB_OFFLINE=1`)' },
  downloadTimeoutS: {
    flag: '--download-timeout-s',
    value: 'seconds',
    env: 'VOXD_DOWNLOAD_TIMEOUT_S',
    help: 'a hub request or download that receives nothing for this long fails (`502 model_download_failed`); a partial file is kept for the next request to resume',
  },
  preload: {
    flag: '--preload',
    value: 'id',
    list: 'repeatable',
    help: 'load this model at start and keep it resident; `/readyz` is ready once all preloads loaded',
  },
  maxLoadedModels: {
    flag: '--max-loaded-models',
    value: 'n',
    help: 'beyond this many resident models, free the least recently used idle one (`0`: no limit)',
  },
  modelIdleTtl: { flag: '--model-idle-ttl', value: 'seconds', help: 'free a model nobody used for this long (`0`: never)' },
  maxQueue: {
    flag: '--max-queue',
    value: 'n',
    help: 'requests that may wait per model (a request counts once, however many jobs it makes); beyond it `503` with `Retry-After`',
  },
  modelConcurrency: { flag: '--model-concurrency', value: 'n', shownDefault: 'CPU cores', help: 'jobs that run at once per model' },
  jobTimeoutS: {
    flag: '--job-timeout-s',
    value: 'seconds',
    help: 'longest one engine job may run (a sentence of speech, a live turn, a file transcription: at least as long as its audio) before it is stopped with `504 job_timeout` (`0`: no limit)',
  },
  maxUploadMb: { flag: '--max-upload-mb', value: 'mb', help: 'largest accepted audio upload, MiB (`413` beyond)' },
  maxInflightUploadMb: {
    flag: '--max-inflight-upload-mb',
    value: 'mb',
    help: 'memory audio uploads in flight may hold, MiB (an upload counts 8 × its size until decoded); more get `503 too_many_uploads` before their body is read',
  },
  maxAudioSeconds: {
    flag: '--max-audio-seconds',
    value: 'seconds',
    help: 'longest accepted audio input, seconds of decoded audio (`400 invalid_audio` beyond)',
  },
  maxSeparationSeconds: {
    flag: '--max-separation-seconds',
    value: 'seconds',
    help: 'longest audio accepted by `/v1/audio/separations`, seconds (`400 invalid_audio` beyond)',
  },
  maxJsonKb: { flag: '--max-json-kb', value: 'kb', help: 'largest accepted JSON body, KiB' },
  maxInputChars: { flag: '--max-input-chars', value: 'n', help: 'longest text `/v1/audio/speech` accepts, characters' },
  maxRealtimeSessions: {
    flag: '--max-realtime-sessions',
    value: 'n',
    help: 'WebSocket transcription sessions open at once; more are refused with `503 too_many_sessions` (a `sphinx` session holds a ~100 MiB decoder: budget ÷ 100 MiB)',
  },
  maxConnections: {
    flag: '--max-connections',
    value: 'n',
    help: 'connections open at once; one more is answered `503 too_many_connections` and closed (node:http transport only: on uWS the open-file limit bounds them)',
  },
  realtimeIdleTimeout: {
    flag: '--realtime-idle-timeout',
    value: 'seconds',
    help: 'close a WebSocket transcription session that sent nothing for this long (an `error` event, then close code 4408; `0`: never)',
  },
  drainGraceS: {
    flag: '--drain-grace-s',
    value: 'seconds',
    help: 'on SIGTERM/SIGINT, `/readyz` answers 503 at once and new requests are still served this long, while a balancer stops sending',
  },
  drainTimeoutS: {
    flag: '--drain-timeout-s',
    value: 'seconds',
    help: 'then, how long requests in flight and live turns may take to finish; requests still running get `503 shutting_down`',
  },
});

/** The flags of `voxd ui`, which reads no variables: they are the server's. */
export const UI_SETTINGS = withShownDefaults<keyof UiCommandConfig>(uiCommandSchema, {
  host: HOST,
  port: { flag: '--port', value: 'port', help: 'port of the web interface (`0` picks a free port)' },
  apiUrl: { flag: '--api-url', value: 'url', help: 'base address (`http://` or `https://`) of the voxd API server the page talks to' },
  transport: TRANSPORT,
  logDir: LOG_DIR,
  logLevel: LOG_LEVEL,
});

/** Reads the variables that are set, in the shapes the schema expects. */
export function configFromEnv(env: NodeJS.ProcessEnv): Partial<Record<keyof Config, unknown>> {
  const out: Partial<Record<keyof Config, unknown>> = {};
  for (const [key, setting] of Object.entries(SERVE_SETTINGS) as [keyof Config, Setting][]) {
    const value = setting.env === undefined ? undefined : env[setting.env];
    if (value === undefined || value === '') continue;
    out[key] = setting.list
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
  return parseOrExplain(configSchema, SERVE_SETTINGS, flags, { ...configFromEnv(env), ...flags });
}

/** The settings of `voxd ui` (flags only: its variables are the server's). */
export function resolveUiCommandConfig(flags: Partial<Record<keyof UiCommandConfig, unknown>>): UiCommandConfig {
  return parseOrExplain(uiCommandSchema, UI_SETTINGS, flags, flags);
}

/** Validates `values`, naming the flag (when it came from `flags`) or the variable of the first problem. */
function parseOrExplain<S extends z.ZodType>(schema: S, settings: Record<string, Setting>, flags: object, values: unknown): z.output<S> {
  const parsed = schema.safeParse(values);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const key = String(issue?.path[0] ?? '');
    const setting = settings[key];
    const source = key in flags ? setting?.flag : setting?.env;
    throw new ConfigError(`invalid value for ${source ?? key}: ${issue?.message ?? 'invalid'}`);
  }
  return parsed.data;
}

/** The flag with its value, as commander takes it and people type it: `--allowed-origins <origins...>`. */
export function flagSpelling(setting: Setting): string {
  if (setting.value === undefined) return setting.flag;
  return `${setting.flag} <${setting.value}${setting.list === 'variadic' ? '...' : ''}>`;
}

function meaning(setting: Setting): string {
  return setting.list === 'repeatable' ? `${setting.help}; repeatable` : setting.help;
}

const commaSeparated = (setting: Setting): string => (setting.list ? ', comma-separated' : '');

/** The setting's line in --help: what it does, then its default and variable (plain text: no backticks). */
export function helpLine(setting: Setting): string {
  const notes = [
    setting.shownDefault === null ? [] : [`default: ${setting.shownDefault}`],
    setting.env === undefined ? [] : [`env ${setting.env}${commaSeparated(setting)}`],
  ].flat();
  const text = meaning(setting);
  // a meaning that already ends in brackets takes the notes inside them: "port (0 picks a free port; default: 8000)"
  const line = notes.length === 0 ? text : text.endsWith(')') ? `${text.slice(0, -1)}; ${notes.join('; ')})` : `${text} (${notes.join('; ')})`;
  return line.replaceAll('`', '');
}

/** A markdown table laid out as prettier lays one out (the texts have no wide characters), so the docs pass `prettier --check`. */
function markdownTable(header: string[], rows: string[][]): string {
  const cells = [header, ...rows].map((row) => row.map((cell) => cell.replaceAll('|', '\\|')));
  const widths = header.map((_, column) => Math.max(3, ...cells.map((row) => row[column]!.length)));
  const line = (row: string[]): string => `| ${row.map((cell, column) => cell.padEnd(widths[column]!)).join(' | ')} |`;
  return [line(cells[0]!), line(widths.map((width) => '-'.repeat(width))), ...cells.slice(1).map(line)].join('\n');
}

function flagTable(settings: Record<string, Setting>): string {
  const rows = Object.values(settings).map((setting) => {
    const help = meaning(setting);
    return [code(flagSpelling(setting)), setting.shownDefault ?? (setting.value === undefined ? 'off' : 'none'), help[0]!.toUpperCase() + help.slice(1)];
  });
  return markdownTable(['Flag', 'Default', 'Meaning'], rows);
}

function variableTable(settings: Record<string, Setting>): string {
  const rows = Object.values(settings).flatMap((setting) =>
    setting.env === undefined ? [] : [[code(setting.env), code(setting.flag) + commaSeparated(setting)]],
  );
  return markdownTable(['Variable', 'Equivalent of'], rows);
}

/**
 * `markdown` (docs/configuration.md) with the tables made from the settings written between their markers,
 * `<!-- serve-flags:begin -->` … `<!-- serve-flags:end -->` and the same for `serve-variables` and `ui-flags`.
 */
export function withConfigurationTables(markdown: string): string {
  const tables = { 'serve-flags': flagTable(SERVE_SETTINGS), 'serve-variables': variableTable(SERVE_SETTINGS), 'ui-flags': flagTable(UI_SETTINGS) };
  let out = markdown;
  for (const [name, table] of Object.entries(tables)) {
    const begin = `<!-- ${name}:begin -->`;
    const end = `<!-- ${name}:end -->`;
    const from = out.indexOf(begin);
    const to = out.indexOf(end);
    if (from < 0 || to < from) throw new Error(`no ${begin} … ${end} markers`);
    out = `${out.slice(0, from + begin.length)}\n\n${table}\n\n${out.slice(to)}`;
  }
  return out;
}
