#!/usr/bin/env node
// Part of `npm run lint`: checks the native C++ (native/src and native/test) against .clang-format; `--fix` rewrites the files.
// clang-format is a system tool (Debian: `apt-get install clang-format`), not an npm package.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const files = ['src', 'test']
  .map((dir) => path.join(root, 'native', dir))
  .filter((dir) => fs.existsSync(dir))
  .flatMap((dir) =>
    fs
      .readdirSync(dir, { recursive: true })
      .map(String)
      .filter((f) => /\.(cpp|h)$/.test(f))
      .map((f) => path.join(dir, f)),
  );
const fix = process.argv.includes('--fix');
const args = fix ? ['-i', ...files] : ['--dry-run', '--Werror', ...files];
const result = spawnSync('clang-format', [`--style=file:${path.join(root, '.clang-format')}`, ...args], { stdio: 'inherit' });
if (result.error) {
  console.error('[voxd lint] clang-format was not found. Fix: install it (Debian/Ubuntu: apt-get install clang-format), then run npm run lint again.');
  process.exit(1);
}
if (result.status !== 0) console.error('[voxd lint] native/ is not formatted as .clang-format says. Fix: node scripts/clang-format.mjs --fix');
process.exit(result.status ?? 1);
