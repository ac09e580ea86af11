// Building the platform package of another CPU architecture on this one (docs/building.md, "Other architectures"):
// Debian's cross toolchain compiles, qemu's user-mode emulation runs what was compiled (the official Node of that
// architecture, npm's lifecycle scripts, the engine library's C++ tests). Only linux-arm64 from linux-x64 so far.
//   CROSS_TARGETS         what each target needs: its GNU triple, the CMake toolchain file, the Debian packages
//   ensureCrossTools()    installs those packages (as root on Debian) and makes sure the kernel runs the target's
//                         binaries through qemu (binfmt_misc), so that a program started by another runs too
//   nodeFor()             the Node that runs code for an architecture: this one, or the official Node of the
//                         target (npm's node-linux-<arch> packages) under qemu, with the environment that runs it
//   officialNode()        that official Node of any architecture, unpacked into the cache
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
// build-native.mjs imports this module: only functions here use what it exports
import { InstallError, cacheDir, log } from './build-native.mjs';

const SCRIPTS = path.dirname(fileURLToPath(import.meta.url));

/** @typedef {{ triple: string, toolchain: string, sysroot: string, loader: string, qemu: string, debian: string[] }} CrossTarget */

/** @type {Record<string, CrossTarget>} by Node's name of the architecture */
export const CROSS_TARGETS = {
  arm64: {
    triple: 'aarch64-linux-gnu',
    toolchain: path.join(SCRIPTS, 'cross', 'aarch64-linux-gnu.cmake'),
    // the target's C library and C++ runtime, from the cross toolchain's packages: what qemu loads programs against
    sysroot: '/usr/aarch64-linux-gnu',
    loader: 'ld-linux-aarch64.so.1',
    qemu: 'aarch64',
    debian: ['g++-aarch64-linux-gnu', 'binutils-aarch64-linux-gnu', 'qemu-user-static', 'binfmt-support'],
  },
};

/**
 * The target for `arch` when it is not this machine's, else null (a native build).
 * @param {string | undefined} arch
 * @returns {CrossTarget | null}
 */
export function crossTarget(arch) {
  if (!arch || arch === process.arch) return null;
  const target = CROSS_TARGETS[arch];
  if (!target || process.platform !== 'linux' || process.arch !== 'x64') {
    throw new InstallError(
      `cannot build for ${arch} on ${process.platform}-${process.arch}: only linux-x64 builds for ${Object.keys(CROSS_TARGETS).join(', ')}.`,
    );
  }
  return target;
}

const BINFMT = '/proc/sys/fs/binfmt_misc';

/** @param {string[]} argv */
function sh(argv) {
  return spawnSync(argv[0], argv.slice(1), { encoding: 'utf8', env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } });
}

/**
 * Whether the kernel runs the target's programs (through qemu's binfmt_misc entry): its dynamic loader, asked its
 * version.
 * @param {CrossTarget} target
 */
function runsTargetPrograms(target) {
  const loader = path.join(target.sysroot, 'lib', target.loader);
  return spawnSync(loader, ['--version'], { env: { ...process.env, ...emulationEnv(target) } }).status === 0;
}

/**
 * Installs the cross toolchain and qemu when missing (root on Debian), and makes sure the kernel runs the target's
 * programs like the machine's own (binfmt_misc, mounted and registered when a container left it bare), so that a
 * program another starts (npm's scripts, espeak-ng's data compiler) runs too.
 * @param {CrossTarget} target
 */
export function ensureCrossTools(target) {
  const missing = target.debian.filter((pkg) => sh(['dpkg-query', '-W', '-f=${Status}', pkg]).stdout !== 'install ok installed');
  if (missing.length) {
    if (process.getuid?.() !== 0) throw new InstallError(`the cross build needs ${missing.join(', ')}: sudo apt-get install -y ${missing.join(' ')}`);
    log(`installing ${missing.join(' ')}`);
    for (const argv of [
      ['apt-get', 'update'],
      ['apt-get', 'install', '-y', '--no-install-recommends', ...missing],
    ]) {
      const run = sh(argv);
      if (run.status !== 0) throw new InstallError(`\`${argv.join(' ')}\` failed:\n${`${run.stdout}${run.stderr}`.trim().split('\n').slice(-15).join('\n')}`);
    }
  }
  if (runsTargetPrograms(target)) return;
  if (!fs.existsSync(path.join(BINFMT, 'register'))) sh(['mount', '-t', 'binfmt_misc', 'binfmt_misc', BINFMT]);
  sh(['update-binfmts', '--enable', `qemu-${target.qemu}`]);
  if (!runsTargetPrograms(target)) {
    throw new InstallError(
      `this machine does not run ${target.triple} programs: as root, \`mount -t binfmt_misc binfmt_misc ${BINFMT}\` and ` +
        `\`update-binfmts --enable qemu-${target.qemu}\` (in a container, the host does it: a privileged container, or ` +
        '`docker run --privileged --rm tonistiigi/binfmt --install arm64`).',
    );
  }
}

/** What a program of the target needs to run under qemu: its C library and loader, from the cross toolchain. */
export function emulationEnv(/** @type {CrossTarget} */ target) {
  return { QEMU_LD_PREFIX: target.sysroot };
}

/** The Node line the checks under emulation run (the oldest supported: docs/install.md, "Platforms"). */
export const EMULATED_NODE_MAJOR = 22;

/**
 * The Node that runs code for `arch`: this one for this machine's architecture, else the official Node of that
 * architecture (EMULATED_NODE_MAJOR unless `major` says otherwise) under qemu, first on PATH, so that the
 * programs it starts (npm's scripts, a package's bin) run on it too.
 * @param {string | undefined} arch
 * @param {number} [major]
 * @returns {{ node: string, env: NodeJS.ProcessEnv }}
 */
export function nodeFor(arch, major = EMULATED_NODE_MAJOR) {
  const target = crossTarget(arch);
  if (!target) return { node: process.execPath, env: process.env };
  const { node, dir } = officialNode(/** @type {string} */ (arch), major);
  return { node, env: { ...process.env, ...emulationEnv(target), PATH: `${dir}${path.delimiter}${process.env.PATH ?? ''}` } };
}

/**
 * The official Node `major` of `arch` (npm's node-linux-<arch>@<major>), unpacked once into the cache; returns the
 * directory of its `node` binary, for PATH, and the binary.
 * @param {string} arch
 * @param {number} major
 */
export function officialNode(arch, major) {
  const dir = path.join(cacheDir, 'cross', `node-linux-${arch}-${major}`);
  const node = path.join(dir, 'package', 'bin', 'node');
  if (!fs.existsSync(node)) {
    fs.rmSync(dir, { recursive: true, force: true });
    fs.mkdirSync(dir, { recursive: true });
    const pack = spawnSync('npm', ['pack', `node-linux-${arch}@${major}`, '--pack-destination', dir, '--json'], { encoding: 'utf8', cwd: dir });
    if (pack.status !== 0) throw new InstallError(`npm pack node-linux-${arch}@${major} failed: ${pack.stderr.trim().split('\n').pop()}`);
    const [{ filename }] = JSON.parse(pack.stdout.slice(pack.stdout.indexOf('[')));
    const untar = spawnSync('tar', ['xzf', path.join(dir, path.basename(filename)), '-C', dir]);
    if (untar.status !== 0 || !fs.existsSync(node)) throw new InstallError(`node-linux-${arch}@${major} has no bin/node`);
    log(`Node ${major} for ${arch}: ${dir}`);
  }
  return { dir: path.dirname(node), node };
}
