#!/usr/bin/env node
// `npm run container:check [-- --arch x64] [-- --arch arm64]` (as root on Debian): builds voxd's container image
// (the Dockerfile) for each architecture with podman, as `docker buildx build --platform` does, and runs each image as
// docs/deploy.md does: the server comes up as its non-root user and answers a transcription of WAV and MP3, speech in
// every format, a separation and a live turn (scripts/server-check.mjs). An arm64 image is built with its build stage
// on this machine (the Dockerfile cross-compiles) and runs under qemu (scripts/cross.mjs).
//
// The base image: `--node-image IMAGE` names one for every architecture (node:22-bookworm-slim where a registry is
// reachable). Without it the base is a stand-in made here from what is reachable, laid out as the official image is:
// Debian 12 minbase (debootstrap, from Debian's archive), with the official Node 22 of the architecture (npm's
// node-linux-<arch>) and npm (from the npm registry) in /usr/local.
// Prints each image's size, build time and check time.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { InstallError, cacheDir, formatDuration, log, quoted, root } from './build-native.mjs';
import { CROSS_TARGETS, ensureCrossTools, officialNode } from './cross.mjs';
import { completion, exerciseServer, freePort, untilReady } from './server-check.mjs';

/** Container platforms by Node's name of the architecture. */
const PLATFORMS = { x64: 'amd64', arm64: 'arm64' };
/** @param {string} arch one of PLATFORMS' keys (ensureHostTools checks) */
const platformOf = (arch) => PLATFORMS[/** @type {keyof typeof PLATFORMS} */ (arch)];
const HOST_PACKAGES = ['podman', 'runc', 'debootstrap'];
const STAND_IN = 'localhost/voxd-node:22-bookworm-slim';
const NODE_MAJOR = 22;
/** The npm line that Node 22's releases bundle (npm's node-linux-<arch> packages carry no npm). */
const NPM_MAJOR = 10;
const DEBIAN_MIRROR = 'http://deb.debian.org/debian';
const IMAGE_USER = '10001';
/** Where the build sees this machine's extra CA certificates. */
const BUILD_CA = '/run/voxd-build-ca.crt';

const argv = process.argv.slice(2);
const arches = argv.flatMap((arg, i) => (argv[i - 1] === '--arch' ? [arg] : []));
if (arches.length === 0) arches.push(process.arch);
const nodeImage = argv.includes('--node-image') ? argv[argv.indexOf('--node-image') + 1] : undefined;

/**
 * Runs a command with its output shown; throws when it fails.
 * @param {string} cmd
 * @param {string[]} args
 * @param {import('node:child_process').SpawnSyncOptions} [options]
 */
function run(cmd, args, options = {}) {
  const result = spawnSync(cmd, args, { stdio: 'inherit', ...options });
  if (result.status !== 0) throw new InstallError(`${cmd} ${args.slice(0, 3).join(' ')} … failed (exit ${result.status ?? result.signal})`);
}

/** @param {string} cmd @param {string[]} args */
const output = (cmd, args) => spawnSync(cmd, args, { encoding: 'utf8' }).stdout.trim();

// podman as this machine allows it: runc, because crun refuses cgroups in hybrid mode; limits within this process's
// own, because podman's defaults are above them and raising a hard limit needs a capability containers lack here
const PODMAN = ['--runtime', 'runc'];
const openFiles = output('sh', ['-c', 'ulimit -Hn']);
const LIMITS = ['--ulimit', `nofile=${openFiles}:${openFiles}`, '--ulimit', 'nproc=4096:4096'];

function ensureHostTools() {
  const missing = HOST_PACKAGES.filter((pkg) => output('dpkg-query', ['-W', '-f=${Status}', pkg]) !== 'install ok installed');
  if (missing.length) {
    if (process.getuid?.() !== 0) throw new InstallError(`the container check needs ${missing.join(', ')}: sudo apt-get install -y ${missing.join(' ')}`);
    log(`installing ${missing.join(' ')}`);
    run('apt-get', ['install', '-y', '--no-install-recommends', ...missing], { env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } });
  }
  for (const arch of arches) {
    if (!(arch in PLATFORMS)) throw new InstallError(`--arch ${arch}: the Dockerfile builds for ${Object.keys(PLATFORMS).join(' and ')}`);
    if (arch !== process.arch) ensureCrossTools(/** @type {import('./cross.mjs').CrossTarget} */ (CROSS_TARGETS[arch]));
  }
}

/**
 * The stand-in base image of `arch` (above), made once; returns its name.
 * @param {string} arch
 */
function standInBase(arch) {
  const platform = platformOf(arch);
  const image = `${STAND_IN}-${platform}`;
  if (spawnSync('podman', ['image', 'exists', image]).status === 0) return image;
  const rootfs = path.join(cacheDir, 'container', `rootfs-${platform}`);
  fs.rmSync(rootfs, { recursive: true, force: true });
  log(`making the stand-in for node:${NODE_MAJOR}-bookworm-slim on ${platform}: Debian 12 from ${DEBIAN_MIRROR}, Node from npm`);
  run('debootstrap', [`--arch=${platform}`, '--variant=minbase', '--include=ca-certificates', 'bookworm', rootfs, DEBIAN_MIRROR]);
  // Node as the official image has it: the binary and its headers in /usr/local
  const nodePackage = path.dirname(officialNode(arch, NODE_MAJOR).dir);
  fs.cpSync(path.join(nodePackage, 'bin', 'node'), path.join(rootfs, 'usr', 'local', 'bin', 'node'));
  fs.cpSync(path.join(nodePackage, 'include'), path.join(rootfs, 'usr', 'local', 'include'), { recursive: true });
  const npmDir = path.join(rootfs, 'usr', 'local', 'lib', 'node_modules', 'npm');
  fs.mkdirSync(npmDir, { recursive: true });
  const packed = output('npm', ['pack', `npm@${NPM_MAJOR}`, '--pack-destination', rootfs]);
  run('tar', ['xzf', path.join(rootfs, packed), '-C', npmDir, '--strip-components=1']);
  fs.rmSync(path.join(rootfs, packed));
  for (const bin of ['npm', 'npx']) fs.symlinkSync(`../lib/node_modules/npm/bin/${bin}-cli.js`, path.join(rootfs, 'usr', 'local', 'bin', bin));
  for (const dir of ['var/cache/apt/archives', 'var/lib/apt/lists']) {
    for (const entry of fs.readdirSync(path.join(rootfs, dir)))
      if (entry !== 'partial' && entry !== 'lock') fs.rmSync(path.join(rootfs, dir, entry), { recursive: true });
  }
  const changes = ['CMD ["node"]', 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'].map((change) => `--change ${quoted(change)}`);
  // arm64's variant named: podman looks for linux/arm64/v8
  const variant = platform === 'arm64' ? '--variant v8' : '';
  run('sh', ['-c', `tar -C ${quoted(rootfs)} -c . | podman import --os linux --arch ${platform} ${variant} ${changes.join(' ')} - ${image}`]);
  fs.rmSync(rootfs, { recursive: true, force: true });
  return image;
}

/**
 * The base image for every architecture asked and this machine's (the build stage runs here): --node-image, or a
 * manifest list of the stand-ins, which podman resolves per platform as a registry's would be.
 */
function baseImage() {
  if (nodeImage) return nodeImage;
  spawnSync('podman', ['manifest', 'rm', STAND_IN], { stdio: 'ignore' });
  run('podman', ['manifest', 'create', STAND_IN]);
  for (const arch of new Set([process.arch, ...arches])) run('podman', ['manifest', 'add', STAND_IN, `containers-storage:${standInBase(arch)}`]);
  return STAND_IN;
}

/**
 * Builds the image of `arch` from the Dockerfile; returns its name.
 * @param {string} arch
 * @param {string} base
 */
function build(arch, base) {
  const platform = platformOf(arch);
  const image = `localhost/voxd:${platform}`;
  // the host's network, so that apt and npm inside the build reach what this machine reaches; the docker format (OCI's
  // has no HEALTHCHECK, and podman would drop it); BUILDPLATFORM named, as podman 4.3 (Debian 12's) sets none
  const buildPlatform = `linux/${platformOf(process.arch)}`;
  const buildArgs = ['--build-arg', `NODE_IMAGE=${base}`, '--build-arg', `BUILDPLATFORM=${buildPlatform}`];
  // this machine's extra CA certificates (a proxy that inspects TLS), for the build's npm and Node
  const extraCa = process.env.NODE_EXTRA_CA_CERTS;
  if (extraCa && fs.existsSync(extraCa)) buildArgs.push('--volume', `${extraCa}:${BUILD_CA}:ro`, '--build-arg', `NODE_EXTRA_CA_CERTS=${BUILD_CA}`);
  run('podman', [...PODMAN, 'build', '--format', 'docker', '--platform', `linux/${platform}`, '--network', 'host', ...LIMITS, ...buildArgs, '-t', image, root]);
  return image;
}

/**
 * Runs `image` as docs/deploy.md does (on the host's network, on a free port) and puts the server through
 * exerciseServer(); throws on a failure.
 * @param {string} image
 * @param {string} arch
 */
async function check(image, arch) {
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const platform = platformOf(arch);
  const name = `voxd-check-${platform}`;
  spawnSync('podman', ['rm', '-f', name], { stdio: 'ignore' });
  const child = spawn(
    'podman',
    [
      ...PODMAN,
      'run',
      '--rm',
      '--name',
      name,
      '--network',
      'host',
      ...LIMITS,
      image,
      'node',
      'dist/src/cli.js',
      'serve',
      '--host',
      '127.0.0.1',
      '--port',
      String(port),
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const done = completion(child);
  try {
    // under emulation Node starts and compiles its code many times slower
    await untilReady(base, child, done, arch === process.arch ? 300 : 1500);
    const user = output('podman', ['exec', name, 'id', '-u']);
    if (user !== IMAGE_USER) throw new InstallError(`the server runs as user ${user}, not ${IMAGE_USER}`);
    return await exerciseServer(base);
  } finally {
    spawnSync('podman', ['stop', '-t', '10', name], { stdio: 'ignore' });
    await done;
  }
}

async function main() {
  ensureHostTools();
  const base = baseImage();
  /** @type {string[]} */
  const summary = [];
  for (const arch of arches) {
    const started = Date.now();
    const image = build(arch, base);
    const built = Date.now();
    const served = await check(image, arch);
    const size = Number(output('podman', ['image', 'inspect', image, '--format', '{{.Size}}']));
    summary.push(
      `${image} (${output('podman', ['image', 'inspect', image, '--format', '{{.Architecture}}'])}): ${(size / 2 ** 20).toFixed(0)} MB, built in ` +
        `${formatDuration(built - started)}, checked in ${formatDuration(Date.now() - built)}: transcribed "${served.transcript.trim().slice(0, 40)}…", ` +
        `spoke ${served.spoken.length} formats, live turn "${served.live.slice(0, 40)}…"`,
    );
  }
  for (const line of summary) log(line);
}

main().catch((error) => {
  console.error(error instanceof InstallError ? `[voxd container] ${error.message}` : error);
  process.exit(1);
});
