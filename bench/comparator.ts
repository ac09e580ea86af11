/**
 * The benchmarks' comparators (whisper.cpp's CLI, llama.cpp's llama-tts): CMake targets of the addon's build tree,
 * compiled on first use from third_party/ with the same libraries as the addon (CMakeLists.txt).
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ROOT } from '../test/helpers/paths.js';

/** The path of `build/<target>`, built first if it is not there yet (`what` names it in the progress line). */
export function comparator(target: string, what: string): string {
  const binary = path.join(ROOT, 'build', target);
  if (!fs.existsSync(binary)) {
    console.log(`building ${what} (cmake --build build --target ${target}) ...`);
    const build = spawnSync('cmake', ['--build', path.join(ROOT, 'build'), '--target', target, '--parallel', String(os.availableParallelism())], {
      stdio: 'inherit',
    });
    if (build.status !== 0) throw new Error(`building ${target} failed; run \`npm run build:native\` first`);
  }
  return binary;
}
