/**
 * Kokoro-82M for the tests: random-weight models laid out as the released hexgrad/Kokoro-82M
 * (scripts/make-kokoro-test-model.mjs), and upstream's own model code as the oracle (../shared/reference/kokoro,
 * its README.md and oracle.py), run with Debian's python3-torch.
 */
import { execFile, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { PYTHON, ROOT, SHARED } from './paths.js';

export interface KokoroTestModelOptions {
  /** tiny (the default): ALBERT 64 wide; full: the released shapes throughout */
  size?: 'tiny' | 'full';
  seed?: number;
}

/** A model directory: config.json, kokoro-v1_0.pth and voices/<name>.pt (the 54 released voice packs). */
export interface KokoroModelPaths {
  dir: string;
  checkpoint: string;
  config: string;
  voices: string;
}

interface Generator {
  makeKokoroTestModel(options: KokoroTestModelOptions): Promise<KokoroModelPaths>;
  writeKokoroTestModel(out: string, options: KokoroTestModelOptions): Promise<KokoroModelPaths>;
}

export async function kokoroGenerator(): Promise<Generator> {
  return (await import(pathToFileURL(path.join(ROOT, 'scripts', 'make-kokoro-test-model.mjs')).href)) as Generator;
}

/** A cached random-weight model (written on first use, a few seconds); resolves to its paths. */
export async function kokoroTestModel(options: KokoroTestModelOptions = {}): Promise<KokoroModelPaths> {
  return (await kokoroGenerator()).makeKokoroTestModel(options);
}

/** Upstream's model code and oracle.py (not part of voxd; never imported, only run). */
export const KOKORO_REFERENCE = path.join(SHARED, 'reference', 'kokoro');

let unavailable: string | false | undefined;
/** Why the oracle cannot run here (a skip message), or false when it can. */
export function kokoroOracleUnavailable(): string | false {
  if (unavailable === undefined) {
    const probe = spawnSync(PYTHON, ['-c', 'import torch, numpy'], { encoding: 'utf8' });
    if (!fs.existsSync(path.join(KOKORO_REFERENCE, 'oracle.py'))) unavailable = `no Kokoro reference at ${KOKORO_REFERENCE}`;
    else if (probe.status !== 0) unavailable = `${PYTHON} cannot import torch and numpy (Debian: apt-get install python3-torch)`;
    else unavailable = false;
  }
  return unavailable;
}

/** Runs a python snippet with arguments; resolves to its stdout. */
export async function runPython(code: string, args: string[]): Promise<string> {
  const { stdout } = await promisify(execFile)(PYTHON, ['-c', code, ...args], { maxBuffer: 64 << 20, encoding: 'utf8' });
  return stdout;
}

export interface KokoroOracleOptions {
  checkpoint: string;
  /** the config.json the checkpoint was written with (oracle.py builds the model from it) */
  config: string;
  /** a voice pack: voices/<name>.pt (torch.save, as released) or <name>.bin (raw float32, as kokoro-js ships it) */
  voice: string;
  phonemes: string;
  /** where oracle.py writes its outputs (created) */
  out: string;
  speed?: number;
  /** zero the generator's random phases and noise, so an implementation can match the waveform exactly */
  noNoise?: boolean;
}

export interface KokoroOracleResult {
  audio: Float32Array;
  /** frames (600 samples each) per token, the two pad tokens included */
  predDur: number[];
  inputIds: number[];
  styleRow: number;
}

/** Upstream KModel on a checkpoint: oracle.py's outputs (its intermediates stay in `out` as .npy). */
export async function runKokoroOracle(options: KokoroOracleOptions): Promise<KokoroOracleResult> {
  fs.mkdirSync(options.out, { recursive: true });
  let voice = options.voice;
  if (voice.endsWith('.pt')) {
    voice = path.join(options.out, `${path.basename(voice, '.pt')}.bin`);
    await runPython('import sys, torch; torch.load(sys.argv[1], weights_only=True).numpy().astype("<f4").tofile(sys.argv[2])', [options.voice, voice]);
  }
  const args = [path.join(KOKORO_REFERENCE, 'oracle.py'), '--checkpoint', options.checkpoint, '--config', options.config, '--out', options.out];
  args.push('--voice', voice, '--phonemes', options.phonemes, '--speed', String(options.speed ?? 1));
  if (options.noNoise) args.push('--no-noise');
  await promisify(execFile)(PYTHON, args, { maxBuffer: 16 << 20 });
  const read = (name: string) => fs.readFileSync(path.join(options.out, name));
  const audio = read('audio.f32');
  const ids = JSON.parse(read('input_ids.json').toString('utf8')) as { input_ids: number[]; style_row: number };
  return {
    audio: new Float32Array(audio.buffer.slice(audio.byteOffset, audio.byteOffset + audio.length)),
    predDur: JSON.parse(read('pred_dur.json').toString('utf8')) as number[],
    inputIds: ids.input_ids,
    styleRow: ids.style_row,
  };
}
