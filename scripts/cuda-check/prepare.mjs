#!/usr/bin/env node
// The CUDA variant of the platform addon, checked on a GPU machine that can fetch nothing (docs/install.md#the-cuda-variant):
// this packs into build/cuda-check what its build needs besides the repository — this Node's binary and N-API
// headers, the engine sources without their models and docs, the bundled static C libraries (built first when
// missing), a test clip and the vocabulary base of the random Whisper test model — about 50 MB, under the device
// tool's 64 MiB. There, `bash scripts/cuda-check/run.sh` builds and smoke-tests it.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { log, relative, root } from '../build-native.mjs';
import { bundledDirs, buildBundledDeps } from '../bundled-deps.mjs';
import { fetchSources } from '../fetch-sources.mjs';

const OUT = path.join(root, 'build', 'cuda-check');
const SHARED = path.join(root, '..', 'shared');
// what the addon's CMake project reads of the engine sources (CMakeLists.txt: tools/tts for its llama-tts copy): no
// models, docs, tests or other tools
const SOURCES = [
  ...['CMakeLists.txt', 'cmake', 'ggml', 'src', 'include', 'vendor', 'common', 'tools/mtmd', 'tools/tts', 'LICENSE', 'licenses'].map(
    (p) => `third_party/llama.cpp/${p}`,
  ),
  ...['CMakeLists.txt', 'cmake', 'src', 'include', 'examples', 'LICENSE'].map((p) => `third_party/whisper.cpp/${p}`),
];

/**
 * tar with multi-threaded xz, paths relative to `cwd`.
 * @param {string} file
 * @param {string} cwd
 * @param {string[]} paths
 */
function tarXz(file, cwd, paths) {
  execFileSync('tar', ['cJf', file, '-C', cwd, ...paths], { env: { ...process.env, XZ_OPT: '-6 -T0' } });
  log(`${relative(file)}: ${(fs.statSync(file).size / 2 ** 20).toFixed(1)} MB`);
}

fs.rmSync(OUT, { recursive: true, force: true });
fs.mkdirSync(OUT, { recursive: true });
fetchSources();
await buildBundledDeps();
const nodePrefix = path.resolve(path.dirname(process.execPath), '..');
tarXz(path.join(OUT, 'node.tar.xz'), nodePrefix, [path.relative(nodePrefix, process.execPath)]);
tarXz(path.join(OUT, 'sources.tar.xz'), root, SOURCES);
tarXz(
  path.join(OUT, 'bundled.tar.xz'),
  root,
  ['lib', 'include'].map((d) => path.relative(root, path.join(bundledDirs().prefix, d))),
);
fs.mkdirSync(path.join(OUT, 'node-include'));
for (const header of ['node_api.h', 'node_api_types.h', 'js_native_api.h', 'js_native_api_types.h']) {
  fs.copyFileSync(path.join(nodePrefix, 'include', 'node', header), path.join(OUT, 'node-include', header));
}
fs.copyFileSync(path.join(SHARED, 'audio', 'speech', 'jfk.wav'), path.join(OUT, 'jfk.wav'));
fs.copyFileSync(path.join(SHARED, 'models', 'whisper-format', 'for-tests-ggml-tiny.en.bin'), path.join(OUT, 'for-tests-ggml-tiny.en.bin'));
log(`ready: carry build/cuda-check and node_modules/node-addon-api, run \`bash scripts/cuda-check/run.sh\` there`);
