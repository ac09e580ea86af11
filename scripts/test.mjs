#!/usr/bin/env node
// `npm test`: compiles the TypeScript (src and tests), checks that the native addon loads, then runs every
// test file with node's test runner against real servers on loopback ports.
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const step = (message) => console.log(`[voxd test] ${message}`);

step('compiling TypeScript');
execFileSync(process.execPath, [path.join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', path.join(root, 'tsconfig.json')], { stdio: 'inherit' });

const probe = spawnSync(process.execPath, ['-e', `require('node-gyp-build')(${JSON.stringify(root)})`], { cwd: root, encoding: 'utf8' });
if (probe.status !== 0) {
  console.error('[voxd test] the native addon does not load; build it with `npm install` (or `npm run build:native`)');
  console.error(probe.stderr.split('\n')[0]);
  process.exit(1);
}

const testDir = path.join(root, 'dist', 'test');
const only = process.argv.slice(2);
const files = fs
  .readdirSync(testDir)
  .filter((f) => f.endsWith('.test.js'))
  .filter((f) => only.length === 0 || only.some((o) => f.includes(o)))
  .sort()
  .map((f) => path.join(testDir, f));
step(`running ${files.length} test files`);
// spec output for people, TAP into a file for the closing summary line
const tapFile = path.join(root, 'dist', 'test-results.tap');
const reporters = ['--test-reporter=spec', '--test-reporter-destination=stdout', '--test-reporter=tap', `--test-reporter-destination=${tapFile}`];
const result = spawnSync(process.execPath, ['--test', ...reporters, '--test-timeout=120000', ...files], { cwd: root, stdio: 'inherit' });
const tap = fs.existsSync(tapFile) ? fs.readFileSync(tapFile, 'utf8') : '';
const count = (name) => Number(tap.match(new RegExp(`^# ${name} (\\d+)$`, 'm'))?.[1] ?? 0);
console.log(`${count('pass')} passed, ${count('fail') + count('cancelled')} failed, ${count('skipped')} skipped`);
process.exit(result.status ?? 1);
