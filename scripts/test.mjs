#!/usr/bin/env node
// `npm test`: compiles the TypeScript (src, tools and tests), builds the web interface and the shipped VAD model,
// checks that the native addon loads, then runs every test file with node's test runner against real servers on
// loopback ports.
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { InstallError } from './build-native.mjs';
import { buildVadModel } from './build-vad-model.mjs';
import { ensureSystemDeps, TEST_DEPS } from './system-deps.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const step = (/** @type {string} */ message) => console.log(`[voxd test] ${message}`);
const started = Date.now();

step('compiling TypeScript');
// compiled tests only from today's sources: a test file moved or deleted would otherwise still run from dist/
fs.rmSync(path.join(root, 'dist', 'test'), { recursive: true, force: true });
execFileSync(process.execPath, [path.join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', path.join(root, 'tsconfig.json')], { stdio: 'inherit' });
step('building the web interface');
execFileSync(process.execPath, [path.join(root, 'ui', 'build.mjs')], { stdio: 'inherit' });
await buildVadModel();

const probe = spawnSync(process.execPath, ['-e', `require('node-gyp-build')(${JSON.stringify(root)})`], { cwd: root, encoding: 'utf8' });
if (probe.status !== 0) {
  console.error('[voxd test] the native addon does not load; build it with `npm install` (or `npm run build:native`)');
  console.error(probe.stderr.split('\n')[0]);
  process.exit(1);
}

// the suites by what they need (docs/building.md): unit (no model loaded, no voxd server, nginx or browser: the fast
// loop), engines (models, no server), server (real servers on loopback ports). `npm test -- unit` or
// `npm test -- speech` runs the files whose path names it; the C++ tests of the engine library run first, with no
// filter or with `npm test -- native`
const SUITE_DIRS = ['unit', 'engines', 'server'];
const TEST_TIMEOUT_MS = 300_000;
const testDir = path.join(root, 'dist', 'test');
const only = process.argv.slice(2);
// the files that run an upstream tool of the addon's build tree as their oracle (test/helpers/build-tree.ts), and the
// tool: it is built in the background from the start of the run, at the lowest priority, on the cores the other
// suites leave idle (its build took 3 to 4 minutes of CI's 2 cores), and these files run last, in a run of their own
// (node's runner sorts the files it is given, so their place in one list cannot put them last)
const ORACLE_TOOLS = new Map([
  ['unit/parakeet-cli.test.js', 'parakeet-cli'],
  ['engines/parakeet-engine.test.js', 'parakeet-cli'],
  ['engines/audio-lm-engine.test.js', 'llama-server'],
]);
const chosen = SUITE_DIRS.flatMap((dir) =>
  fs
    .readdirSync(path.join(testDir, dir))
    .filter((f) => f.endsWith('.test.js'))
    .map((f) => `${dir}/${f}`)
    .sort(),
).filter((f) => only.length === 0 || only.some((o) => f.includes(o)));
const files = chosen.map((f) => path.join(testDir, f));
const oracleFiles = files.filter((f) => ORACLE_TOOLS.has(path.relative(testDir, f)));
const firstPass = files.filter((f) => !oracleFiles.includes(f));
const oracleTools = [...new Set(chosen.flatMap((f) => ORACLE_TOOLS.get(f) ?? []))];
// what the chosen tests need beyond the build (Debian's chromium for the web interface's tests, nginx for the
// deployment files'), installed here like the build's packages
const testDeps = TEST_DEPS.filter((dep) => files.some((f) => dep.tests.test(path.basename(f))));
if (testDeps.length) {
  try {
    ensureSystemDeps(testDeps, { purpose: 'running these tests', rerun: 'npm test' });
  } catch (error) {
    if (!(error instanceof InstallError)) throw error;
    console.error(`[voxd test] ${error.message}`);
    process.exit(1);
  }
}
// the suites that talk HTTP or WebSocket to a server run a second time on node:http when voxd's own choice is
// uWebSockets.js, so both transports are held to the same tests (where uWS does not load, node:http is the choice).
// The browser suite runs once: what it needs of a transport (the page's serving, CORS, streamed bodies, the
// realtime socket) is held to both by ui-server, speech and realtime, and a second browser pass cost 85 s of CI.
// Model-specific suites (transcriptions on each engine, the model API) run once: what they ask of a transport, uploads
// and JSON answers, http-core and robustness hold both to.
const TRANSPORT_SUITES = ['http-core', 'websocket', 'robustness', 'realtime', 'vad-transcription', 'speech', 'ui-server'];
const autoTransport = spawnSync(
  process.execPath,
  [
    '--input-type=module',
    '-e',
    `const m = await import(${JSON.stringify(path.join(root, 'dist', 'src', 'http', 'transports.js'))}); console.log(m.createTransport('auto').transport.name)`,
  ],
  { cwd: root, encoding: 'utf8' },
).stdout.trim();
const secondPass = autoTransport === 'uws' ? firstPass.filter((f) => TRANSPORT_SUITES.some((suite) => path.basename(f) === `${suite}.test.js`)) : [];

/**
 * Runs test files with node's runner: spec output for people, TAP into a file for the summary line.
 * @param {string} label
 * @param {string[]} testFiles
 * @param {NodeJS.ProcessEnv} env
 */
function run(label, testFiles, env) {
  step(`running ${testFiles.length} test files (${label})`);
  const tapFile = path.join(root, 'dist', `test-results-${label.replace(/\W+/g, '-')}.tap`);
  const reporters = ['--test-reporter=spec', '--test-reporter-destination=stdout', '--test-reporter=tap', `--test-reporter-destination=${tapFile}`];
  // the limit guards against hangs; node applies it to each file as a whole too, and the longest files (the GGML
  // TTS engine, every decoder format) take about a minute and a half on a quiet 2-core machine
  const result = spawnSync(process.execPath, ['--test', ...reporters, `--test-timeout=${TEST_TIMEOUT_MS}`, ...testFiles], { cwd: root, stdio: 'inherit', env });
  const tap = fs.existsSync(tapFile) ? fs.readFileSync(tapFile, 'utf8') : '';
  const count = (/** @type {string} */ name) => Number(tap.match(new RegExp(`^# ${name} (\\d+)$`, 'm'))?.[1] ?? 0);
  return { ok: result.status === 0, pass: count('pass'), fail: count('fail') + count('cancelled'), skipped: count('skipped') };
}

/** The engine library's C++ tests (scripts/test-native.mjs), first: they take seconds and need no server. */
function runNative() {
  const junit = path.join(root, 'dist', 'test-results-native.xml');
  fs.rmSync(junit, { force: true });
  const result = spawnSync(process.execPath, [path.join(root, 'scripts', 'test-native.mjs'), '--junit', junit], { cwd: root, stdio: 'inherit' });
  const xml = fs.existsSync(junit) ? fs.readFileSync(junit, 'utf8') : '';
  const count = (/** @type {string} */ name) => Number(xml.match(new RegExp(`<testsuite[^>]*\\b${name}="(\\d+)"`))?.[1] ?? 0);
  const fail = count('failures') + count('errors');
  return {
    ok: result.status === 0,
    pass: count('tests') - fail - count('skipped'),
    fail: result.status === 0 ? fail : Math.max(fail, 1),
    skipped: count('skipped'),
  };
}

/**
 * Builds `tools` one after another in the background, niced, through the build tree's lock (a test that needs one
 * first waits for it); the output goes to build/oracle-tools.log. Null when there is nothing to build.
 * @param {string[]} tools
 */
function buildInBackground(tools) {
  const buildDir = path.join(root, 'build');
  const missing = tools.filter((tool) => !fs.existsSync(path.join(buildDir, tool)));
  if (missing.length === 0 || !fs.existsSync(path.join(buildDir, 'CMakeCache.txt'))) return null;
  step(`building ${missing.join(' and ')} in the background, for the suites that run them last`);
  const lockedBuild = path.join(root, 'test', 'helpers', 'build-tree-target.cmake');
  const jobs = Number(process.env.VOXD_BUILD_JOBS) || os.availableParallelism();
  const script = missing.map((tool) => `cmake -DBUILD_DIR='${buildDir}' -DTARGET=${tool} -DJOBS=${jobs} -P '${lockedBuild}'`).join('; ');
  const log = fs.openSync(path.join(buildDir, 'oracle-tools.log'), 'w');
  return spawn('nice', ['-n', '19', 'sh', '-c', script], { stdio: ['ignore', log, log] });
}

/** @type {{ ok: boolean, pass: number, fail: number, skipped: number }[]} */
const runs = [];
if (only.length === 0 || only.includes('native')) runs.push(runNative());
// after the C++ tests, which build in the same tree without its lock
const oracleBuild = buildInBackground(oracleTools);
// node's runner given no file looks for every test file itself
if (firstPass.length > 0) runs.push(run(`transport ${autoTransport}`, firstPass, process.env));
if (secondPass.length > 0) runs.push(run('transport node', secondPass, { ...process.env, VOXD_TRANSPORT: 'node' }));
else if (autoTransport !== 'uws') step('no second transport pass: uWebSockets.js does not load here, node:http served every suite');
else step('no second transport pass: none of these files is an HTTP or WebSocket suite');
if (oracleFiles.length > 0) runs.push(run('upstream oracles', oracleFiles, process.env));
oracleBuild?.kill();
const total = (/** @type {'pass' | 'fail' | 'skipped'} */ key) => runs.reduce((sum, r) => sum + r[key], 0);
const seconds = Math.round((Date.now() - started) / 1000);
step(`wall time ${Math.floor(seconds / 60)} min ${seconds % 60} s`);
console.log(`${total('pass')} passed, ${total('fail')} failed, ${total('skipped')} skipped`);
process.exit(runs.every((r) => r.ok) ? 0 : 1);
