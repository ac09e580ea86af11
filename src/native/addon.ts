/**
 * The whole native surface of voxd, typed in one place. Only engine modules import this file; routes and
 * services reach native code through engines. Every method that can take more than about a millisecond
 * runs on a libuv worker thread and returns a Promise; failures reject with a `NativeError` (message + code).
 */
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** Set by the caller to cancel native work in flight; checked by engines between units of work. */
export interface NativeAbortFlag {
  abort(): void;
  readonly aborted: boolean;
}

export interface NativeVadParams {
  threshold?: number;
  minSpeechDurationMs?: number;
  minSilenceDurationMs?: number;
  maxSpeechDurationS?: number;
  speechPadMs?: number;
}

export interface NativeVadModel {
  /** Speech segments (seconds) of a whole 16 kHz mono clip. */
  segments(samples: Float32Array, params?: NativeVadParams, abort?: NativeAbortFlag): Promise<{ start: number; end: number }[]>;
  /** A streaming detector with its own LSTM state (a pooled context of this model). */
  openStream(): Promise<NativeVadStream>;
}

export interface NativeVadStream {
  /** One speech probability per complete 512-sample frame; a partial frame is kept for the next call. */
  process(samples: Float32Array): Promise<Float32Array>;
  reset(): Promise<void>;
  close(): Promise<void>;
}

export interface NativeSystemInfo {
  version: string;
  ggmlVersion: string;
  ggmlCommit: string;
  llama: string;
  whisper: string;
  devices: { name: string; description: string }[];
}

/** ggml log levels: engine log lines below the level are dropped. */
export const NativeLogLevel = { debug: 1, info: 2, warn: 3, error: 4, none: 5 } as const;

export interface NativeAddon {
  AbortFlag: new () => NativeAbortFlag;
  VadModel: { load(path: string): Promise<NativeVadModel> };
  VadStream: { readonly frameSamples: number };
  systemInfo(): NativeSystemInfo;
  setLogLevel(level: number): void;
}

/** A rejection from native code: `code` is machine-readable (e.g. `model_load_failed`, `aborted`). */
export interface NativeError extends Error {
  code: string;
}

export function isNativeError(error: unknown): error is NativeError {
  return error instanceof Error && typeof (error as Partial<NativeError>).code === 'string';
}

/** The addon could not be loaded: message names the cause and the fix. */
export class NativeLoadError extends Error {
  override name = 'NativeLoadError';
}

const packageRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
let cached: NativeAddon | undefined;

/**
 * Loads the addon once: `VOXD_ADDON` (a path to a .node file, e.g. a custom CUDA build) when set, else what
 * node-gyp-build picks (a local build in build/ wins over prebuilds/).
 */
export function loadNative(): NativeAddon {
  if (cached) return cached;
  const require = createRequire(import.meta.url);
  try {
    const explicit = process.env.VOXD_ADDON;
    cached = explicit ? (require(path.resolve(explicit)) as NativeAddon) : (require('node-gyp-build') as (dir: string) => NativeAddon)(packageRoot);
  } catch (error) {
    const reason = error instanceof Error ? error.message.split('\n')[0] : String(error);
    throw new NativeLoadError(
      `voxd's native addon could not be loaded (${reason}). ` +
        `Rebuild it for this machine with \`npm run build:native\` (in the voxd folder), or reinstall with \`npm install\`.`,
    );
  }
  return cached;
}
