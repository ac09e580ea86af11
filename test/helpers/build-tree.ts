/**
 * Tools of the addon's build tree (whisper.cpp's whisper-cli and parakeet-cli, llama.cpp's llama-tts): CMake targets
 * that CMakeLists.txt builds only on request, from third_party/ with the same libraries as the addon, so the
 * benchmarks compare with them and the tests hold the engines to them.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ROOT } from './paths.js';

const BUILD_DIR = path.join(ROOT, 'build');
const LOCKED_BUILD = path.join(ROOT, 'test', 'helpers', 'build-tree-target.cmake');
const OUTPUT_SHOWN = 4000;
const ready = new Set<string>();

/**
 * The path of `build/<target>`, built first if it is not there (an existing binary is taken as it is). The check and
 * the build happen under a lock on the tree, so test files that ask at once build it once and none runs a binary
 * still being linked.
 */
export function buildTreeTool(target: string): string {
  const binary = path.join(BUILD_DIR, target);
  if (ready.has(target)) return binary;
  if (!fs.existsSync(path.join(BUILD_DIR, 'CMakeCache.txt'))) {
    throw new Error(
      `cannot build ${target}: build/ is not configured (no build/CMakeCache.txt; an install that took the addon from the ` +
        'build cache or a platform package configures none): run `npm run test:native` (or `npm run build:native`) first',
    );
  }
  if (!fs.existsSync(binary)) console.error(`building ${target} (cmake --build build --target ${target}) ...`);
  const jobs = Number(process.env.VOXD_BUILD_JOBS) || os.availableParallelism();
  const build = spawnSync('cmake', [`-DBUILD_DIR=${BUILD_DIR}`, `-DTARGET=${target}`, `-DJOBS=${jobs}`, '-P', LOCKED_BUILD], {
    encoding: 'utf8',
    maxBuffer: 256 * 1024 * 1024,
  });
  if (build.status !== 0 || !fs.existsSync(binary)) {
    const output = `${build.stdout ?? ''}${build.stderr ?? ''}`.slice(-OUTPUT_SHOWN);
    throw new Error(`building ${target} failed (${build.error?.message ?? `cmake exited with ${build.status}`}):\n${output}`);
  }
  ready.add(target);
  return binary;
}
