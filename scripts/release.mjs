#!/usr/bin/env node
// `npm run release [-- --arch arm64]`: the npm packages of a release for this machine's platform, or with --arch for
// another architecture's, cross-compiled and checked under qemu (docs/install.md, scripts/cross.mjs), checked.
//   1. `npm run prebuild` (unless --reuse-prebuild finds one): the self-contained addon.
//   2. The platform package in build/release/package-<arch>: package.json (os, cpu, libc, the CPU it needs),
//      voxd.node, the pocketsphinx US English model, espeak-ng's data for Kokoro's languages, the licences of what it
//      bundles; then `npm pack` of it and of voxd.
//   3. The check: both tarballs installed into an empty directory inside a mount namespace that hides the compilers,
//      cmake, make, the system's headers and its FFmpeg, flite, pocketsphinx and espeak-ng (`unshare`, as root); there the
//      server starts, transcribes WAV and MP3, speaks in every format, separates and transcribes a live turn, and
//      `ldd` of the installed addon lists only libc and the C/C++ runtime. For another architecture npm, the install
//      script and the server run on that architecture's official Node under qemu, and the engine library's C++ tests
//      run there too. --source-install also times the other path: voxd's tarball alone, built from source.
// Prints the download size and install time of each path.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { InstallError, formatDuration, quoted, log, relative, requireFromRoot, root, sharedLibrariesOf } from './build-native.mjs';
import { BUNDLED_DEPS, bundledDirs } from './bundled-deps.mjs';
import { crossTarget, ensureCrossTools, nodeFor } from './cross.mjs';
import { completion, exerciseServer, freePort, untilReady } from './server-check.mjs';
import { SOURCES } from './sources.mjs';

const argv = process.argv.slice(2);
const args = new Set(argv);
const arch = argv.includes('--arch') ? argv[argv.indexOf('--arch') + 1] : process.arch;
const cross = crossTarget(arch);
const RELEASE = path.join(root, 'build', 'release');
const PACKAGE_DIR = path.join(RELEASE, `package-${arch}`);
const voxd = requireFromRoot('./package.json');

// The instruction sets VOXD_PORTABLE compiles ggml for on x64 (CMakeLists.txt: the AVX2 level of x86-64-v3), as
// /proc/cpuinfo names them: what the loader checks before it loads the addon. Only these: a virtual machine may hide
// others of x86-64-v3 (LZCNT's abm, say) that the addon never uses.
const X64_V3_FLAGS = ['avx', 'avx2', 'fma', 'f16c', 'bmi2'];
// What VOXD_PORTABLE compiles for on arm64 (CMakeLists.txt), as /proc/cpuinfo's Features name it: armv8-a's
// floating point and NEON, which every 64-bit ARM core running Linux has
const ARM64_V8_FLAGS = ['fp', 'asimd'];
// The test cases another architecture's addon runs under qemu besides the C++ tests: batching's promise (the same
// samples alone or in any batch) on the code path of CPUs other than x86, about 4 minutes under qemu on 2 cores. (Whisper's
// and Parakeet's JS cases need their suites' earlier cases or an x86 oracle; Parakeet's batching is in the C++ tests.)
const EMULATED_SUITES = { files: ['server/tts-ggml.test.js'], pattern: 'batch' };
/** The CPU each architecture's platform package is built for, and the flags the loader checks. */
const CPU_BASELINES = { x64: { cpu: 'x86-64-v3', flags: X64_V3_FLAGS }, arm64: { cpu: 'armv8-a', flags: ARM64_V8_FLAGS } };

// What the check hides: the tools of a source build, every system header, and the system's copies of the libraries
// the platform package bundles. Paths that do not exist here are skipped.
const HIDDEN_DIRS = [
  ...['/usr/include', '/usr/lib/gcc', '/usr/libexec/gcc', '/usr/share/pocketsphinx', '/usr/local/include'],
  ...['/usr/lib/gcc-cross', '/usr/aarch64-linux-gnu/include'],
  ...['/usr/lib/x86_64-linux-gnu/espeak-ng-data', '/usr/lib/aarch64-linux-gnu/espeak-ng-data', '/usr/share/espeak-ng-data'],
];
const HIDDEN_PROGRAMS = ['cc', 'c++', 'gcc', 'g++', 'cpp', 'clang', 'clang++', 'cmake', 'make', 'ninja', 'ld', 'as'];
const HIDDEN_LIBRARIES = /^lib(avcodec|avformat|avutil|swresample|flite|pocketsphinx|sphinxbase|mp3lame|vorbis|opus|ogg|espeak-ng|pcaudio|sonic)\b.*\.so/;

/** @param {string} file */
const megabytes = (file) => `${(fs.statSync(file).size / 2 ** 20).toFixed(1)} MB`;

/**
 * @param {string} cmd
 * @param {string[]} argv
 * @param {import('node:child_process').SpawnSyncOptions} [options]
 */
function run(cmd, argv, options = {}) {
  const result = spawnSync(cmd, argv, { encoding: 'utf8', maxBuffer: 1 << 28, ...options });
  if (result.status !== 0) {
    throw new InstallError(
      `${cmd} ${argv.join(' ')} failed (${result.signal ?? `exit code ${result.status}`}):\n${`${result.stdout ?? ''}${result.stderr ?? ''}`.trim().split('\n').slice(-30).join('\n')}`,
    );
  }
  return String(result.stdout ?? '');
}

/** The platform package's name for `arch`, as the server's loader computes it (it needs `npm run build:ts`). */
async function platformName() {
  const loader = path.join(root, 'dist', 'src', 'native', 'load.js');
  if (!fs.existsSync(loader)) throw new InstallError('dist/ is missing: run `npm run build:ts` first.');
  return (await import(pathToFileURL(loader).href)).platformPackageName(arch);
}

function prebuildFile() {
  const dir = path.join(root, 'prebuilds', `${process.platform}-${arch}`);
  const [file] = fs.existsSync(dir) ? fs.readdirSync(dir).filter((f) => f.endsWith('.node')) : [];
  return file ? path.join(dir, file) : null;
}

/** The licences file of the platform package: what it bundles, under which licence, from where. */
function licencesText() {
  const rows = [
    ...BUNDLED_DEPS.map((dep) => `| ${dep.name} ${dep.version} | ${dep.licence} | Debian's ${dep.file}, SHA-256 ${dep.sha256.slice(0, 16)}… |`),
    ...Object.values(SOURCES).map((src) => `| ${src.dir} (${src.pkg} ${src.version}) | ${src.licence} | npm registry |`),
  ];
  return `# What this package bundles

voxd's native addon with these libraries linked in statically, the pocketsphinx US English model (pocketsphinx/en-us,
BSD-2-Clause, CMU) and espeak-ng's data for Kokoro's languages (espeak-ng-data, GPL-3.0-or-later). Each licence's text
is under licences/<name>/.

voxd's own source is MIT. espeak-ng is GPL-3.0-or-later and is linked into voxd.node, so this package as a whole (the
addon and everything in it) is distributed under the terms of the GNU General Public License, version 3 or later.
Its corresponding source is the voxd package of the same version, the source tarballs its scripts/bundled-deps.mjs
pins (Debian's archive; espeak-ng with Debian's patches) and the engine sources its scripts/sources.mjs names; \`npm
run prebuild\` rebuilds and relinks the addon from them (the LGPL libraries, FFmpeg and LAME, the same way).

| Library | Licence | Source |
| ------- | ------- | ------ |
${rows.join('\n')}
`;
}

/**
 * Writes build/release/package-<arch> from the prebuild and the bundled prefix.
 * @param {string} prebuild
 */
async function assemblePlatformPackage(prebuild) {
  fs.rmSync(PACKAGE_DIR, { recursive: true, force: true });
  fs.mkdirSync(PACKAGE_DIR, { recursive: true });
  fs.copyFileSync(prebuild, path.join(PACKAGE_DIR, 'voxd.node'));
  const { prefix } = bundledDirs(arch);
  fs.cpSync(path.join(prefix, 'share', 'pocketsphinx', 'model', 'en-us'), path.join(PACKAGE_DIR, 'pocketsphinx', 'en-us'), { recursive: true });
  fs.cpSync(path.join(prefix, 'share', 'espeak-ng-data'), path.join(PACKAGE_DIR, 'espeak-ng-data'), { recursive: true });
  fs.cpSync(path.join(prefix, 'licences'), path.join(PACKAGE_DIR, 'licences'), { recursive: true });
  fs.writeFileSync(path.join(PACKAGE_DIR, 'LICENSES.md'), licencesText());
  const name = await platformName();
  const [, platform, , libc] = /** @type {RegExpExecArray} */ (/^@voxd\/addon-(\w+)-(\w+)(?:-(\w+))?$/.exec(name));
  const baseline = CPU_BASELINES[/** @type {keyof typeof CPU_BASELINES} */ (arch)];
  const manifest = {
    name,
    version: voxd.version,
    description: `voxd's native addon for ${platform} ${arch}${libc ? ` (${libc === 'gnu' ? 'glibc' : libc})` : ''}, with FFmpeg, flite, pocketsphinx and espeak-ng inside`,
    license: 'SEE LICENSE IN LICENSES.md',
    os: [platform],
    cpu: [arch],
    ...(libc ? { libc: [libc === 'gnu' ? 'glibc' : libc] } : {}),
    files: ['voxd.node', 'pocketsphinx', 'espeak-ng-data', 'licences', 'LICENSES.md'],
    // read by src/native/load.ts
    voxd: {
      cpu: baseline?.cpu ?? arch,
      requiresCpuFlags: baseline?.flags ?? [],
      bundles: `FFmpeg ${BUNDLED_DEPS.find((d) => d.name === 'ffmpeg')?.version}, flite 2.2, pocketsphinx 5prealpha, espeak-ng ${BUNDLED_DEPS.find((d) => d.name === 'espeak-ng')?.version}`,
    },
  };
  fs.writeFileSync(path.join(PACKAGE_DIR, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`);
  return manifest;
}

/**
 * `npm pack` of `dir` into build/release; returns the tarball.
 * @param {string} dir
 */
function pack(dir) {
  const out = run('npm', ['pack', dir, '--pack-destination', RELEASE, '--json'], { cwd: root, env: { ...process.env, npm_config_ignore_scripts: 'true' } });
  const [{ filename }] = JSON.parse(out.slice(out.indexOf('[')));
  return path.join(RELEASE, filename);
}

/** A shell script that hides the build tools and the bundled libraries' system copies, then runs its arguments. */
function hidingScript() {
  const lines = ['set -e'];
  for (const dir of HIDDEN_DIRS) if (fs.existsSync(dir)) lines.push(`mount -t tmpfs none ${quoted(dir)}`);
  for (const bin of ['/usr/bin', '/usr/local/bin', '/bin']) {
    for (const name of HIDDEN_PROGRAMS) {
      const file = path.join(bin, name);
      if (fs.existsSync(file) && !fs.lstatSync(file).isDirectory()) lines.push(`mount --bind /dev/null ${quoted(file)}`);
    }
    if (!fs.existsSync(bin)) continue;
    for (const name of fs.readdirSync(bin))
      if (/^(x86_64|aarch64)-linux-gnu-(gcc|g\+\+|cpp|ld|as)/.test(name)) lines.push(`mount --bind /dev/null ${quoted(path.join(bin, name))}`);
  }
  for (const dir of ['/usr/lib/x86_64-linux-gnu', '/usr/lib/aarch64-linux-gnu', '/usr/lib', '/lib/x86_64-linux-gnu']) {
    if (!fs.existsSync(dir) || fs.realpathSync(dir) !== dir) continue;
    for (const name of fs.readdirSync(dir)) {
      if (HIDDEN_LIBRARIES.test(name) && fs.statSync(path.join(dir, name), { throwIfNoEntry: false })?.isFile())
        lines.push(`mount --bind /dev/null ${quoted(path.join(dir, name))}`);
    }
  }
  lines.push('exec "$@"');
  return lines.join('\n');
}

/**
 * `argv` started in a mount namespace where the hiding script has run.
 * @param {string[]} argv
 * @param {import('node:child_process').SpawnOptions} options
 */
function hidden(argv, options) {
  return spawn('unshare', ['--mount', '--propagation', 'private', 'sh', '-c', hidingScript(), 'sh', ...argv], options);
}

// Inside the namespace each of these must fail: what a source build would need is out of reach
const MUST_FAIL = {
  'a C compiler': 'cc --version',
  'a C++ compiler': 'c++ --version',
  cmake: 'cmake --version',
  make: 'make --version',
  'system headers': 'test -e /usr/include/stdio.h',
  'the system FFmpeg': 'for f in /usr/lib/*/libavcodec.so.*; do test -s "$f" && exit 0; done; exit 1',
  'the system flite': 'for f in /usr/lib/*/libflite.so.*; do test -s "$f" && exit 0; done; exit 1',
  'the system pocketsphinx':
    'for f in /usr/lib/*/libpocketsphinx.so.*; do test -s "$f" && exit 0; done; test -e /usr/share/pocketsphinx/model/en-us/en-us/mdef',
  "the system espeak-ng's data": 'for f in /usr/lib/*/espeak-ng-data/phontab /usr/share/espeak-ng-data/phontab; do test -e "$f" && exit 0; done; exit 1',
};

/** Throws unless everything of MUST_FAIL is out of reach in the namespace; returns what was checked. */
async function assertHidden() {
  for (const [what, probe] of Object.entries(MUST_FAIL)) {
    const { code } = await completion(hidden(['sh', '-c', probe], { stdio: ['ignore', 'pipe', 'pipe'] }));
    if (code === 0) throw new InstallError(`the check's namespace still has ${what} (\`${probe}\` succeeded there)`);
  }
  return Object.keys(MUST_FAIL);
}

/**
 * The server of the installation in `dir`, in the namespace, on `runner`'s Node, put through exerciseServer().
 * @param {string} dir
 * @param {{ env: NodeJS.ProcessEnv }} runner
 */
async function checkServer(dir, runner) {
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const child = hidden(
    [path.join(dir, 'node_modules', '.bin', 'voxd'), 'serve', '--host', '127.0.0.1', '--port', String(port), '--log-dir', path.join(dir, 'logs')],
    {
      cwd: dir,
      env: { ...runner.env, HF_ENDPOINT: 'http://127.0.0.1:9', HF_HUB_CACHE: path.join(dir, 'hub'), VOXD_CACHE_DIR: path.join(dir, 'cache') },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  const done = completion(child);
  // under emulation Node starts and compiles its code many times slower
  const startLimit = cross ? 1500 : 150;
  try {
    await untilReady(base, child, done, startLimit);
    return await exerciseServer(base);
  } finally {
    child.kill('SIGTERM');
    const { output } = await done;
    const line = /native addon: [^"{\n]*\)/.exec(output);
    if (line) log(`the installed server logged: ${line[0]}`);
  }
}

/** npm's own script, for another architecture's Node to run: the npm running this release, else the one on PATH. */
function npmCli() {
  if (process.env.npm_execpath?.endsWith('.js')) return process.env.npm_execpath;
  const npm = spawnSync('sh', ['-c', 'command -v npm'], { encoding: 'utf8' }).stdout.trim();
  return path.join(path.dirname(fs.realpathSync(npm)), 'npm-cli.js');
}

/**
 * Installs `tarballs` into a new empty directory (in the namespace when `hide`) with npm on `runner`'s Node; returns
 * it and the time taken.
 * @param {string} name
 * @param {string[]} tarballs
 * @param {{ hide: boolean, runner: { node: string, env: NodeJS.ProcessEnv }, env?: NodeJS.ProcessEnv }} options
 */
async function installInto(name, tarballs, { hide, runner, env = {} }) {
  const dir = path.join(os.tmpdir(), `voxd-release-${name}-${process.pid}`);
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(dir);
  fs.writeFileSync(path.join(dir, 'package.json'), '{"name":"voxd-release-check","private":true}\n');
  const argv = [...(cross ? [runner.node, npmCli()] : ['npm']), 'install', '--no-audit', '--no-fund', '--foreground-scripts', ...tarballs];
  const options = {
    cwd: dir,
    env: { ...runner.env, npm_config_cache: path.join(dir, '.npm'), ...env },
    stdio: /** @type {import('node:child_process').StdioOptions} */ (['ignore', 'pipe', 'pipe']),
  };
  const started = Date.now();
  const { code, output } = await completion(hide ? hidden(argv, options) : spawn(argv[0], argv.slice(1), options));
  const elapsed = Date.now() - started;
  if (code !== 0) throw new InstallError(`npm install in ${dir} failed (exit code ${code}):\n${output.trim().split('\n').slice(-30).join('\n')}`);
  for (const line of output.split('\n').filter((l) => /\[voxd\]/.test(l))) log(`  install: ${line.replace(/^.*\[voxd\] /, '')}`);
  return { dir, elapsed };
}

async function main() {
  if (process.platform !== 'linux')
    throw new InstallError('the release check uses Linux mount namespaces; on other platforms run `npm run prebuild` and pack by hand.');
  if (process.getuid?.() !== 0)
    throw new InstallError('the check hides the build tools in a mount namespace, which takes root: run it as root (or in a throwaway container).');
  fs.mkdirSync(RELEASE, { recursive: true });

  if (cross) ensureCrossTools(cross);
  let prebuild = args.has('--reuse-prebuild') ? prebuildFile() : null;
  if (!prebuild) {
    run(process.execPath, [path.join(root, 'scripts', 'prebuild.mjs'), '--arch', arch], { stdio: 'inherit' });
    prebuild = prebuildFile();
    if (!prebuild) throw new InstallError('npm run prebuild left no prebuild');
  }
  const manifest = await assemblePlatformPackage(prebuild);
  for (const old of fs.readdirSync(RELEASE).filter((f) => f.endsWith('.tgz'))) fs.rmSync(path.join(RELEASE, old));
  const platformTarball = pack(PACKAGE_DIR);
  const voxdTarball = pack(root);
  if (voxd.optionalDependencies?.[manifest.name] !== manifest.version) {
    throw new InstallError(`package.json's optionalDependencies must name ${manifest.name} ${manifest.version}`);
  }
  log(`packed ${relative(voxdTarball)} (${megabytes(voxdTarball)}) and ${relative(platformTarball)} (${megabytes(platformTarball)})`);

  const hiddenThings = await assertHidden();
  const runner = nodeFor(arch);
  const on = cross ? ` on ${arch} Node ${spawnSync(runner.node, ['--version'], { encoding: 'utf8', env: runner.env }).stdout.trim()} under qemu` : '';
  log(`installing both into an empty directory where these are out of reach${on}: ${hiddenThings.join(', ')}`);
  const prebuilt = await installInto('prebuilt', [voxdTarball, platformTarball], { hide: true, runner });
  const addon = path.join(prebuilt.dir, 'node_modules', ...manifest.name.split('/'), 'voxd.node');
  const { all, beyondRuntime } = sharedLibrariesOf(addon, arch);
  if (beyondRuntime.length) throw new InstallError(`the installed addon needs ${beyondRuntime.join(', ')}`);
  const checkStarted = Date.now();
  const served = await checkServer(prebuilt.dir, runner);
  log(
    `installed server${on}: transcribed jfk.wav and jfk.mp3 ("${served.transcript.trim().slice(0, 60)}…"), spoke ${served.spoken.join(', ')}, ` +
      `separated the drum loop, live turn "${served.live.slice(0, 60)}…" (${formatDuration(Date.now() - checkStarted)})`,
  );
  log(`ldd ${path.basename(addon)}: ${all.join(', ')}`);
  if (cross) {
    log(`the engine library's C++ tests on ${arch}, under qemu (Parakeet's batch invariance among them)`);
    let started = Date.now();
    run(process.execPath, [path.join(root, 'scripts', 'test-native.mjs'), '--arch', arch], { stdio: 'inherit' });
    log(`the engine library's C++ tests passed on ${arch} under qemu in ${formatDuration(Date.now() - started)}`);
    log(`GGML text-to-speech's batch invariance on ${arch}, under qemu (${EMULATED_SUITES.files.join(', ')})`);
    started = Date.now();
    const suites = EMULATED_SUITES.files.map((file) => path.join(root, 'dist', 'test', file));
    const env = { ...runner.env, VOXD_ADDON: prebuild };
    run(runner.node, ['--test', `--test-name-pattern=${EMULATED_SUITES.pattern}`, ...suites], { stdio: 'inherit', env, cwd: root });
    log(`they passed on ${arch} under qemu in ${formatDuration(Date.now() - started)}`);
  }

  const rows = [
    [
      'prebuilt (voxd + platform package)',
      `${megabytes(voxdTarball)} + ${megabytes(platformTarball)}`,
      formatDuration(prebuilt.elapsed),
      'no compiler, no system libraries',
    ],
  ];
  if (args.has('--source-install') && !cross) {
    log('installing voxd alone, built from source (VOXD_BUILD_FROM_SOURCE=1; the build cache is bypassed)');
    const source = await installInto('source', [voxdTarball], {
      hide: false,
      runner,
      env: { VOXD_BUILD_FROM_SOURCE: '1', VOXD_CACHE_DIR: path.join(os.tmpdir(), `voxd-release-cache-${process.pid}`) },
    });
    rows.push([
      'from source (voxd alone)',
      `${megabytes(voxdTarball)} + engine sources`,
      formatDuration(source.elapsed),
      'compiler, cmake, FFmpeg, flite, pocketsphinx dev packages',
    ]);
    fs.rmSync(source.dir, { recursive: true, force: true });
  }
  fs.rmSync(prebuilt.dir, { recursive: true, force: true });
  console.log(`\nInstall paths${cross ? ` for ${arch}, under qemu` : ''} on this machine (${os.cpus().length} cores, Node ${process.version}):`);
  console.log('| Path | Download | npm install time | Needs |\n| ---- | -------- | ---------------- | ----- |');
  for (const row of rows) console.log(`| ${row.join(' | ')} |`);
}

main().catch((error) => {
  console.error(`[voxd] release failed: ${error instanceof InstallError ? error.message : (error?.stack ?? error)}`);
  process.exit(1);
});
