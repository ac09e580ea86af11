// Shared by scripts/install.mjs and scripts/prebuild.mjs: the addon's build key, the cmake-js build, and a
// test-load in a child process (a binary that crashes on load must not take the installer down with it).
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setInterval, clearInterval } from 'node:timers';
import { Buffer } from 'node:buffer';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { crossTarget, emulationEnv } from './cross.mjs';
import { SOURCES_KEY } from './sources.mjs';

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const cacheDir = process.env.VOXD_CACHE_DIR || path.join(os.homedir(), '.cache', 'voxd');
export const requireFromRoot = createRequire(path.join(root, 'package.json'));
const packageVersion = requireFromRoot('./package.json').version;

/** A failure whose message already says what went wrong and how to fix it; printed without a stack. */
export class InstallError extends Error {}

/**
 * @typedef {{ cuda: boolean, portable: boolean, bundled?: string, arch?: string }} BuildFlags the build options that
 * change the binary; `bundled`: the prefix of the static C libraries to link (scripts/bundled-deps.mjs), else the
 * system's; `arch`: the CPU architecture to cross-compile for (scripts/cross.mjs), else this machine's
 */

/** @param {string} line */
export function log(line) {
  console.log(`[voxd] ${line}`);
}

export const relative = (/** @type {string} */ file) => path.relative(root, file) || '.';

/** @param {string} text a word for sh, single-quoted */
export const quoted = (text) => `'${text.replace(/'/g, `'\\''`)}'`;

/** @param {number} ms */
export function formatDuration(ms) {
  const seconds = Math.round(ms / 1000);
  return seconds < 60 ? `${seconds}s` : `${Math.floor(seconds / 60)}m${String(seconds % 60).padStart(2, '0')}s`;
}

/** @param {string} dir */
function filesUnder(dir) {
  return fs
    .readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => path.join(entry.parentPath, entry.name))
    .sort();
}

/**
 * @param {string} cmd
 * @param {string[]} args
 */
function firstLineOf(cmd, args) {
  const run = spawnSync(cmd, args, { encoding: 'utf8' });
  return run.status === 0 ? run.stdout.split('\n')[0].trim() : 'none';
}

/**
 * Names one build of the addon: everything that changes the binary (our sources, the pinned engine sources,
 * build flags, the Node ABI, the toolchain). Two machines or clones with equal keys can share the binary.
 * @param {BuildFlags} flags
 */
export function buildKey(flags) {
  const hash = createHash('sha256');
  for (const file of [...filesUnder(path.join(root, 'native', 'src')), path.join(root, 'CMakeLists.txt')]) {
    hash
      .update(`${relative(file)}\0`)
      .update(fs.readFileSync(file))
      .update('\0');
  }
  hash.update(
    JSON.stringify({
      sources: SOURCES_KEY,
      flags,
      version: packageVersion,
      nodeAddonApi: requireFromRoot('node-addon-api/package.json').version,
      modules: process.versions.modules,
      napi: process.versions.napi,
      platform: process.platform,
      arch: process.arch,
      cc: firstLineOf(process.env.CC || 'cc', ['--version']),
      cxx: firstLineOf(process.env.CXX || 'c++', ['--version']),
    }),
  );
  return hash.digest('hex').slice(0, 20);
}

const LOAD_IN_CHILD = `try { require(process.argv[1]); } catch (error) { console.error(String(error.message).split('\\n')[0]); process.exit(1); }`;

/**
 * Loads `file` in a child Node (this one, or `node`: another architecture's, under emulation, with `env`); returns
 * null when it loads, else the reason it did not.
 * @param {string} file
 * @param {{ node: string, env: NodeJS.ProcessEnv }} [runner]
 */
export function testLoad(file, runner = { node: process.execPath, env: process.env }) {
  const run = spawnSync(runner.node, ['-e', LOAD_IN_CHILD, file], { encoding: 'utf8', env: runner.env });
  if (run.status === 0) return null;
  if (run.signal) return `the process loading it died with ${run.signal}`;
  return run.stderr.trim().split('\n').pop() || `exit code ${run.status}`;
}

// What a platform package's addon may need of the system: the C library, its loader, and the C/C++ runtime
const SYSTEM_RUNTIME = /^(linux-vdso|linux-gate|ld-linux[\w.-]*|libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s)\.so\b/;

/**
 * The shared libraries `ldd` lists for `file` (Linux), and those of them beyond the C/C++ runtime and libc. For another
 * architecture (`arch`), what ldd itself does: the target's dynamic loader lists them, run through qemu.
 * @param {string} file
 * @param {string} [arch]
 */
export function sharedLibrariesOf(file, arch) {
  const cross = crossTarget(arch);
  const [cmd, ...args] = cross ? [path.join(cross.sysroot, 'lib', cross.loader), '--list', file] : ['ldd', file];
  const run = spawnSync(cmd, args, { encoding: 'utf8', env: { ...process.env, ...(cross ? emulationEnv(cross) : {}) } });
  if (run.status !== 0) throw new InstallError(`ldd ${relative(file)} failed: ${(run.stderr || run.stdout || run.error?.message || '').trim()}`);
  // one line a library, `name => path (address)` or `path (address)`; under qemu the vDSO's has no name
  const all = run.stdout
    .split('\n')
    .map((line) => line.trim().split(/\s+/)[0] ?? '')
    .filter((name) => name && !name.startsWith('('))
    .map((name) => path.basename(name));
  return { all, beyondRuntime: all.filter((name) => !SYSTEM_RUNTIME.test(name)) };
}

/**
 * Copies to a temporary name and renames, so a process that has the old file mapped keeps running.
 * @param {string} from
 * @param {string} to
 */
export function replaceFile(from, to) {
  fs.mkdirSync(path.dirname(to), { recursive: true });
  const temporary = `${to}.tmp-${process.pid}`;
  fs.copyFileSync(from, temporary);
  fs.renameSync(temporary, to);
}

function ccacheAvailable() {
  return spawnSync('ccache', ['--version']).status === 0;
}

const PROGRESS = /\[\s*(\d+)(?:\/(\d+)|%)\]/g; // ninja "[12/345]" or make "[ 45%]"

/** @param {string} logFile */
function progressOf(logFile) {
  const size = fs.statSync(logFile).size;
  const fd = fs.openSync(logFile, 'r');
  try {
    const length = Math.min(size, 8192);
    const tail = Buffer.alloc(length);
    fs.readSync(fd, tail, 0, length, size - length);
    const last = [...tail.toString('utf8').matchAll(PROGRESS)].pop();
    if (!last) return '';
    return last[2] ? ` ${Math.floor((100 * Number(last[1])) / Number(last[2]))}%` : ` ${last[1]}%`;
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * The part of a failed build's log worth showing: from the first failing command or error, else its tail.
 * @param {string} logFile
 */
function failureExcerpt(logFile) {
  const lines = fs.readFileSync(logFile, 'utf8').trimEnd().split('\n');
  const first = lines.findIndex((line) => /^FAILED:|\berror:|CMake Error/.test(line));
  return (first >= 0 ? lines.slice(first, first + 60) : lines.slice(-40)).join('\n');
}

/**
 * Runs one cmake-js command; its output goes to the log file (or the terminal with VOXD_VERBOSE_BUILD=1).
 * @param {string[]} args
 * @param {{ env: NodeJS.ProcessEnv, logFile: string, verbose: boolean }} options
 * @returns {Promise<string | null>} null on success, else the exit code or signal
 */
function cmakeJs(args, { env, logFile, verbose }) {
  const bin = path.join(path.dirname(requireFromRoot.resolve('cmake-js/package.json')), 'bin', 'cmake-js');
  const output = verbose ? 'inherit' : fs.openSync(logFile, 'a');
  return new Promise((/** @type {(failure: string | null) => void} */ resolve, reject) => {
    const child = spawn(process.execPath, [bin, ...args], { cwd: root, env, stdio: ['ignore', output, output] });
    child.on('error', reject);
    child.on('exit', (code, signal) => resolve(code === 0 ? null : (signal ?? `exit code ${code}`)));
  }).finally(() => {
    if (!verbose) fs.closeSync(/** @type {number} */ (output));
  });
}

/**
 * Configures and builds the addon into `outDir` (relative to the package root) with cmake-js; returns the .node
 * file and the time taken. An existing build directory is reused, so cmake only recompiles what changed. `target`
 * builds another target than the addon (the C++ tests: scripts/test-native.mjs), `sanitize` with AddressSanitizer
 * and UndefinedBehaviorSanitizer (VOXD_SANITIZE in CMakeLists.txt).
 * @param {{ outDir: string, flags: BuildFlags, target?: string, sanitize?: boolean }} options
 */
export async function buildAddon({ outDir, flags, target, sanitize = false }) {
  const verbose = process.env.VOXD_VERBOSE_BUILD === '1';
  const jobs = Number(process.env.VOXD_BUILD_JOBS) || os.availableParallelism();
  const logFile = path.join(root, outDir, 'voxd-build.log');
  fs.mkdirSync(path.dirname(logFile), { recursive: true });
  fs.writeFileSync(logFile, '');

  const env = { ...process.env };
  /** @type {Record<string, string>} cmake -D definitions */
  const defines = {
    VOXD_VERSION: packageVersion,
    // Passed even when OFF: cmake keeps cached values, so a reused build directory would keep an old choice.
    VOXD_CUDA: flags.cuda ? 'ON' : 'OFF',
    VOXD_PORTABLE: flags.portable ? 'ON' : 'OFF',
    VOXD_BUNDLED_DEPS: flags.bundled ?? '',
    VOXD_SANITIZE: sanitize ? 'ON' : 'OFF',
    CMAKE_EXPORT_COMPILE_COMMANDS: 'ON',
  };
  const cross = crossTarget(flags.arch);
  if (cross) {
    if (!flags.portable) throw new InstallError(`a build for ${flags.arch} is a portable one: it cannot tune for this machine's CPU`);
    defines.CMAKE_TOOLCHAIN_FILE = cross.toolchain;
  }
  if (ccacheAvailable()) {
    env.CCACHE_DIR ||= path.join(cacheDir, 'ccache');
    env.CCACHE_BASEDIR ||= root; // paths relative to the clone, so a fresh clone elsewhere still hits the cache
    for (const language of ['C', 'CXX', ...(flags.cuda ? ['CUDA'] : [])]) defines[`CMAKE_${language}_COMPILER_LAUNCHER`] = 'ccache';
  }
  const defineArgs = Object.entries(defines).map(([name, value]) => `--CD${name}=${value}`);

  const started = Date.now();
  const heartbeat = verbose ? undefined : setInterval(() => log(`still building${progressOf(logFile)} (${formatDuration(Date.now() - started)})`), 30_000);
  let failure;
  try {
    // `cmake-js build` configures only a fresh directory, so configure explicitly: flags may have changed.
    failure =
      (await cmakeJs(['configure', '-O', outDir, ...defineArgs], { env, logFile, verbose })) ??
      (await cmakeJs(['build', '-O', outDir, '--parallel', String(jobs), ...(target ? ['--target', target] : [])], { env, logFile, verbose }));
  } finally {
    clearInterval(heartbeat);
  }
  if (failure) {
    const shownLog = verbose ? 'the output above' : `excerpt above; full log: ${relative(logFile)}`;
    if (!verbose) console.error(failureExcerpt(logFile));
    const outOfMemory = !verbose && /Killed signal terminated program|virtual memory exhausted|out of memory/i.test(fs.readFileSync(logFile, 'utf8'));
    throw new InstallError(
      outOfMemory
        ? `the native build ran out of memory (${shownLog}). Fix: build with fewer parallel jobs: VOXD_BUILD_JOBS=1 npm run build:native`
        : `the native build failed (${failure}; ${shownLog}). Fix the first error shown there, then run \`npm run build:native\` ` +
            `(VOXD_VERBOSE_BUILD=1 shows the whole build output).`,
    );
  }
  return { file: path.join(root, outDir, 'Release', 'voxd.node'), elapsedMs: Date.now() - started };
}
