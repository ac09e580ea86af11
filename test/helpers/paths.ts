import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** Repository root (tests run compiled from dist/test/...). */
export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
export const SHARED = path.join(ROOT, '..', 'shared');
export const SILERO_V6 = path.join(SHARED, 'models', 'silero', 'ggml-silero-v6.2.0.bin');
export const SILERO_V5 = path.join(SHARED, 'models', 'silero', 'ggml-silero-v5.1.2.bin');
export const JFK_WAV = path.join(SHARED, 'audio', 'speech', 'jfk.wav');
export const CLI = path.join(ROOT, 'dist', 'src', 'cli.js');
/** Debian's python, which has the python3-* packages the tests use (a python elsewhere on PATH may not). */
export const PYTHON = '/usr/bin/python3';
