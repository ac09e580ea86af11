// The system tools and libraries the native build needs, in ONE list (SYSTEM_DEPS). Checked before every
// build; as root on Debian/Ubuntu the missing ones are installed with apt-get, elsewhere the build stops with
// the exact command to run. A new system library is one more entry, e.g.
//   { what: 'FFmpeg libavcodec', check: pkgConfig('libavcodec'), debian: 'libavcodec-dev' }
//   { what: 'flite', check: header('flite/flite.h'), debian: 'flite1-dev' }
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { InstallError, log } from './build-native.mjs';

/** @typedef {() => string | null} Check */
/** @typedef {{ what: string, check: Check, debian: string, optional?: boolean }} SystemDep what a check looks for, and the Debian package that provides it */

/**
 * @param {string} a
 * @param {string} b
 */
function compareVersions(a, b) {
  const [x, y] = [a, b].map((v) => v.split('.').map(Number));
  for (let i = 0; i < Math.max(x.length, y.length); i++) {
    if ((x[i] ?? 0) !== (y[i] ?? 0)) return (x[i] ?? 0) - (y[i] ?? 0);
  }
  return 0;
}

// A check returns null when satisfied, else a short reason.

/**
 * One of `names` runs (`<name> --version`, or the flag given), reporting at least `minVersion` when given.
 * @param {string[]} names
 * @param {string} [minVersion]
 * @param {string} [versionFlag]
 * @returns {Check}
 */
export function command(names, minVersion, versionFlag = '--version') {
  return () => {
    for (const name of names) {
      const run = spawnSync(name, [versionFlag], { encoding: 'utf8' });
      if (run.error || run.status !== 0) continue;
      const version = run.stdout.match(/\d+\.\d+(?:\.\d+)?/)?.[0];
      if (minVersion && !(version && compareVersions(version, minVersion) >= 0)) return `found ${name} ${version ?? '(unknown version)'}, too old`;
      return null;
    }
    return 'not found';
  };
}

/**
 * A library pkg-config knows, e.g. pkgConfig('libavcodec >= 59').
 * @param {string} module
 * @returns {Check}
 */
export function pkgConfig(module) {
  return () => (spawnSync('pkg-config', ['--exists', module]).status === 0 ? null : 'not found by pkg-config');
}

/**
 * A header the C compiler finds on its default include path.
 * @param {string} name
 * @returns {Check}
 */
export function header(name) {
  return () =>
    spawnSync(process.env.CC || 'cc', ['-E', '-x', 'c', '-o', '/dev/null', '-'], { input: `#include <${name}>\n` }).status === 0 ? null : 'header not found';
}

/**
 * A module Debian's python imports (/usr/bin/python3: a python elsewhere on PATH may not see Debian's packages).
 * @param {string} name
 * @returns {Check}
 */
export function pythonModule(name) {
  return () => (spawnSync('/usr/bin/python3', ['-c', `import ${name}`]).status === 0 ? null : 'not found by /usr/bin/python3');
}

/**
 * A shared library the dynamic loader finds by its soname (for libraries the addon opens at run time).
 * @param {string} soname
 * @returns {Check}
 */
export function sharedLibrary(soname) {
  return () => {
    for (const ldconfig of ['ldconfig', '/sbin/ldconfig', '/usr/sbin/ldconfig']) {
      const run = spawnSync(ldconfig, ['-p'], { encoding: 'utf8', maxBuffer: 16 << 20 });
      if (run.error || run.status !== 0) continue;
      return run.stdout.includes(`${soname} (`) ? null : 'not found by ldconfig';
    }
    return 'cannot run ldconfig';
  };
}

/**
 * A file that a package installs (data read at run time, e.g. a model).
 * @param {string} path
 * @returns {Check}
 */
export function file(path) {
  return () => (fs.existsSync(path) ? null : `${path} missing`);
}

/**
 * A file that a package installs under /usr/lib/<multiarch triplet>/ (data a library reads at run time).
 * @param {string} relativePath
 * @returns {Check}
 */
export function multiarchFile(relativePath) {
  return () => {
    const triplets = fs.existsSync('/usr/lib') ? fs.readdirSync('/usr/lib').filter((dir) => /-linux-gnu/.test(dir)) : [];
    return triplets.some((dir) => fs.existsSync(`/usr/lib/${dir}/${relativePath}`)) ? null : `/usr/lib/<multiarch>/${relativePath} missing`;
  };
}

/** @type {SystemDep[]} the tools of every native build */
const TOOLCHAIN = [
  { what: 'cmake >= 3.18', check: command(['cmake'], '3.18'), debian: 'cmake' },
  { what: 'a C compiler', check: command(process.env.CC ? [process.env.CC] : ['cc', 'gcc', 'clang']), debian: 'gcc' },
  { what: 'a C++ compiler', check: command(process.env.CXX ? [process.env.CXX] : ['c++', 'g++', 'clang++']), debian: 'g++' },
  { what: 'ninja or make', check: command(['ninja', 'make']), debian: 'ninja-build' },
  { what: 'git (unpacks the llama.cpp source bundle)', check: command(['git']), debian: 'git' },
  { what: 'pkg-config', check: command(['pkg-config']), debian: 'pkg-config' },
];

/**
 * What building a platform package needs (scripts/prebuild.mjs): the toolchain, make and xz for the bundled C
 * libraries' own builds (scripts/bundled-deps.mjs), strip; none of the system's FFmpeg, flite, pocketsphinx or espeak-ng.
 * @type {SystemDep[]}
 */
export const BUNDLED_BUILD_DEPS = [
  ...TOOLCHAIN,
  { what: 'make (the bundled libraries build with it)', check: command(['make']), debian: 'make' },
  { what: "xz (unpacks FFmpeg, libogg and Debian's espeak-ng patches)", check: command(['xz']), debian: 'xz-utils' },
  { what: "bison (sphinxbase's configure asks for it)", check: command(['bison']), debian: 'bison' },
  { what: "patch (applies Debian's espeak-ng patches)", check: command(['patch']), debian: 'patch' },
  // espeak-ng's source tarball comes without its configure script: its autogen.sh makes it
  { what: 'autoconf (espeak-ng)', check: command(['autoreconf']), debian: 'autoconf' },
  { what: 'automake (espeak-ng)', check: command(['automake']), debian: 'automake' },
  { what: 'libtool (espeak-ng)', check: command(['libtoolize']), debian: 'libtool' },
  { what: 'strip', check: command(['strip']), debian: 'binutils' },
];

/** @type {SystemDep[]} what a source build needs */
export const SYSTEM_DEPS = [
  ...TOOLCHAIN,
  // FFmpeg 5.1 or newer (audio decoding; its channel-layout API), Debian 12's versions as the floor
  { what: 'FFmpeg libavformat >= 59.27', check: pkgConfig('libavformat >= 59.27'), debian: 'libavformat-dev' },
  { what: 'FFmpeg libavcodec >= 59.37', check: pkgConfig('libavcodec >= 59.37'), debian: 'libavcodec-dev' },
  { what: 'FFmpeg libswresample >= 4.7', check: pkgConfig('libswresample >= 4.7'), debian: 'libswresample-dev' },
  { what: 'FFmpeg libavutil >= 57.28', check: pkgConfig('libavutil >= 57.28'), debian: 'libavutil-dev' },
  // pocketsphinx 5prealpha, the built-in `sphinx` recognizer: its headers to build; the addon opens the library
  // and reads the US English model at run time, and only that model fails without them (hence optional here)
  { what: 'pocketsphinx headers', check: pkgConfig('pocketsphinx'), debian: 'libpocketsphinx-dev' },
  { what: 'libpocketsphinx.so.3 (run time, built-in sphinx model)', check: sharedLibrary('libpocketsphinx.so.3'), debian: 'libpocketsphinx3', optional: true },
  {
    what: 'pocketsphinx US English model (run time, built-in sphinx model)',
    check: file('/usr/share/pocketsphinx/model/en-us/en-us/mdef'),
    debian: 'pocketsphinx-en-us',
    optional: true,
  },
  // flite 2.2, the built-in `flite` voices: its headers to build (no pkg-config file); the addon opens the library
  // and its voices at run time, and only that model fails without them (hence optional here)
  { what: 'flite headers', check: header('flite/flite.h'), debian: 'flite1-dev' },
  { what: 'libflite.so.1 and its voices (run time, built-in flite model)', check: sharedLibrary('libflite.so.1'), debian: 'libflite1', optional: true },
  // espeak-ng 1.51, Kokoro's text frontend: its static library and headers are linked in; the addon reads its data
  // (the phoneme tables and dictionaries) at run time, and only Kokoro fails without it (hence optional here)
  { what: 'espeak-ng headers and static library', check: header('espeak-ng/speak_lib.h'), debian: 'libespeak-ng-dev' },
  { what: "espeak-ng's data (run time, Kokoro)", check: multiarchFile('espeak-ng-data/phontab'), debian: 'espeak-ng-data', optional: true },
  { what: 'ccache (faster rebuilds)', check: command(['ccache']), debian: 'ccache', optional: true },
];

/**
 * What `npm test` needs beyond the build, each for the test files whose names match `tests`: the browser its
 * web-interface tests drive (test/server/ui.test.ts), nginx, which checks deploy/nginx/voxd.conf
 * (test/server/deploy.test.ts) and balances real instances (test/server/scale-out.test.ts), and python-zeroconf, which
 * discovers the Wyoming listener (test/server/wyoming.test.ts).
 * @type {(SystemDep & { tests: RegExp })[]}
 */
export const TEST_DEPS = [
  { what: 'chromium (browser tests of the web interface)', check: command(['chromium', 'chromium-browser']), debian: 'chromium', tests: /^ui[.-]/ },
  {
    what: 'nginx (checks deploy/nginx/voxd.conf and balances the scale-out test)',
    check: command(['nginx', '/usr/sbin/nginx'], undefined, '-v'),
    debian: 'nginx',
    tests: /^(deploy|scale-out)\./,
  },
  {
    what: "python3-zeroconf (Home Assistant's mDNS library: finds the Wyoming listener as Home Assistant does)",
    check: pythonModule('zeroconf'),
    debian: 'python3-zeroconf',
    tests: /^wyoming\./,
  },
];

/** @param {SystemDep[]} deps */
function findMissing(deps) {
  return deps.map((dep) => ({ ...dep, problem: dep.check() })).filter((dep) => dep.problem);
}

function isDebianLike() {
  try {
    const osRelease = fs.readFileSync('/etc/os-release', 'utf8');
    return /^(ID|ID_LIKE)=.*\b(debian|ubuntu)\b/m.test(osRelease);
  } catch {
    return false;
  }
}

/** @param {string[]} args */
function aptGet(args) {
  const run = spawnSync('apt-get', args, { encoding: 'utf8', maxBuffer: 64 << 20, env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } });
  if (run.status === 0) return;
  console.error(`${run.stdout ?? ''}${run.stderr ?? ''}`.trimEnd().split('\n').slice(-20).join('\n'));
  throw new InstallError(`\`apt-get ${args.join(' ')}\` failed (output above). Fix that, then try again.`);
}

/**
 * Makes sure every required entry of `deps` (by default the build's, SYSTEM_DEPS) is present, installing what it
 * can; throws InstallError otherwise, saying what `purpose` needs and how to get it, then to run `rerun` again.
 * @param {SystemDep[]} [deps]
 * @param {{ purpose?: string, rerun?: string }} [options]
 */
export function ensureSystemDeps(deps = SYSTEM_DEPS, { purpose = 'the native addon has to be built here, but the build', rerun = 'npm install' } = {}) {
  let missing = findMissing(deps);
  if (missing.length && process.getuid?.() === 0 && isDebianLike()) {
    const packages = missing.map((dep) => dep.debian);
    log(`installing system packages: ${packages.join(' ')}`);
    aptGet(['update']);
    aptGet(['install', '-y', '--no-install-recommends', ...packages]);
    missing = findMissing(deps);
  }
  const required = missing.filter((dep) => !dep.optional);
  if (required.length) {
    const problems = required.map((dep) => `${dep.what} (${dep.problem})`).join(', ');
    const fix = isDebianLike()
      ? `sudo apt-get install -y --no-install-recommends ${missing.map((dep) => dep.debian).join(' ')}`
      : `install ${missing.map((dep) => dep.what).join(', ')} with your system's package manager`;
    throw new InstallError(`${purpose} needs: ${problems}. Fix: ${fix}, then run \`${rerun}\` again.`);
  }
  for (const dep of missing) log(`optional: ${dep.what} ${dep.problem} (package ${dep.debian})`);
}
