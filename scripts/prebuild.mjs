#!/usr/bin/env node
// `npm run prebuild [-- --arch arm64]`: the addon of a platform package (docs/install.md), this machine's or, with
// --arch, another architecture's (cross-compiled: scripts/cross.mjs), made with prebuildify: portable (no
// -march=native; x86-64-v3 on x64, armv8-a on arm64), linked with the static FFmpeg, flite and pocketsphinx of
// scripts/bundled-deps.mjs and the static C++ runtime, stripped, and placed where node-gyp-build looks for
// prebuilds: prebuilds/<platform>-<arch>/voxd.<libc>.node (prebuildify's name for an N-API build: any Node ABI,
// tagged with the libc; never committed). scripts/release.mjs puts it into the platform package. prebuildify 6 only
// knows node-gyp, so its `nodeGyp` is scripts/prebuild-backend.mjs, which builds with cmake-js; it runs in the
// staging directory build/prebuild (build/prebuild-<arch> for another architecture), so the native build in build/
// stays incremental. Another architecture's prebuild is checked on that architecture's Node, under qemu.
import fs from 'node:fs';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { InstallError, formatDuration, log, relative, requireFromRoot, root, sharedLibrariesOf, testLoad } from './build-native.mjs';
import { buildBundledDeps } from './bundled-deps.mjs';
import { crossTarget, ensureCrossTools, nodeFor } from './cross.mjs';
import { fetchSources } from './fetch-sources.mjs';
import { REPORTED_FAILURE } from './prebuild-backend.mjs';
import { BUNDLED_BUILD_DEPS, ensureSystemDeps } from './system-deps.mjs';

const archAt = process.argv.indexOf('--arch');
const arch = archAt > 0 ? process.argv[archAt + 1] : process.arch;
const cross = crossTarget(arch);
// prebuildify's cwd; cmake-js builds into STAGING/build
const STAGING = path.join(root, 'build', cross ? `prebuild-${arch}` : 'prebuild');
const BACKEND = path.join(root, 'scripts', 'prebuild-backend.mjs');
const NATIVE_TUNING = /-m(?:arch|tune|cpu)=native\b/;

/** Fails unless the build's compile commands exist and none of them tunes for the build machine. */
function assertPortable() {
  const commandsFile = path.join(STAGING, 'build', 'compile_commands.json');
  /** @type {{ file: string, command?: string, arguments: string[] }[]} compile_commands.json: `arguments` where there is no `command` */
  const commands = JSON.parse(fs.readFileSync(commandsFile, 'utf8'));
  if (!commands.some((entry) => entry.file.includes('ggml-cpu'))) {
    throw new InstallError(`${relative(commandsFile)} lists no ggml-cpu sources, so portability cannot be checked.`);
  }
  const native = commands.filter((entry) => NATIVE_TUNING.test(entry.command ?? entry.arguments.join(' ')));
  if (native.length) {
    throw new InstallError(
      `the portable build compiled ${native.length} files for this CPU only (e.g. ${relative(native[0].file)} has ` +
        `${/** @type {RegExpMatchArray} */ ((native[0].command ?? native[0].arguments.join(' ')).match(NATIVE_TUNING))[0]}). Fix: make VOXD_PORTABLE=ON turn that flag off in CMakeLists.txt.`,
    );
  }
}

/** Checks what prebuildify would otherwise fail on with a stack trace (it does not handle spawn errors). */
async function loadPrebuildify() {
  try {
    fs.accessSync(BACKEND, fs.constants.X_OK);
  } catch {
    throw new InstallError(`${relative(BACKEND)} is not executable. Fix: chmod +x ${relative(BACKEND)}`);
  }
  if (process.platform === 'linux' && spawnSync(stripProgram(), ['--version']).status !== 0) {
    throw new InstallError(`\`${stripProgram()}\` was not found. Fix: install binutils${cross ? `-${cross.triple}` : ''}.`);
  }
  try {
    return (await import('prebuildify')).default;
  } catch {
    throw new InstallError('prebuildify is not installed. Fix: run `npm install` (it is a devDependency).');
  }
}

/** The strip that reads the prebuild's architecture. */
const stripProgram = () => (cross ? `${cross.triple}-strip` : 'strip');

/**
 * Runs prebuildify with our cmake-js backend; a failure it reports is rethrown as one line.
 * @param {typeof import('prebuildify').default} run
 * @returns {Promise<void>}
 */
function prebuildify(run) {
  const options = {
    cwd: STAGING,
    out: root,
    name: 'voxd',
    napi: true,
    targets: [process.versions.node], // only names the headers node-gyp would fetch; the backend ignores it
    platform: process.platform,
    arch, // passed to the backend as --arch
    strip: true,
    stripBin: stripProgram(),
    tagLibc: true,
    nodeGyp: BACKEND,
  };
  return new Promise((resolve, reject) =>
    run(options, (error) => {
      if (!error) return resolve();
      if (error.message === `node-gyp exited with ${REPORTED_FAILURE}`) return reject(new InstallError('')); // already printed
      const exited = /^node-gyp exited with (\d+)$/.exec(error.message);
      reject(new InstallError(exited ? `the build backend ${relative(BACKEND)} exited with code ${exited[1]}.` : `prebuildify: ${error.message}.`));
    }),
  );
}

/**
 * The file node-gyp-build resolves when it may only use prebuilds, on the prebuild's architecture.
 * @param {{ node: string, env: NodeJS.ProcessEnv }} runner
 */
function resolvedPrebuild(runner) {
  const nodeGypBuild = requireFromRoot.resolve('node-gyp-build');
  const code = `process.stdout.write(require(${JSON.stringify(nodeGypBuild)}).path(${JSON.stringify(root)}))`;
  // PREBUILDS_ONLY: read by node-gyp-build when it is first required
  const run = spawnSync(runner.node, ['-e', code], { encoding: 'utf8', env: { ...runner.env, PREBUILDS_ONLY: '1' } });
  if (run.status !== 0) throw new InstallError(`node-gyp-build resolves no prebuild: ${run.stderr.trim().split('\n')[0]}`);
  return run.stdout;
}

async function main() {
  const started = Date.now();
  // the cross tools first: loadPrebuildify checks their strip
  if (cross) ensureCrossTools(cross);
  const run = await loadPrebuildify();
  ensureSystemDeps(BUNDLED_BUILD_DEPS, { purpose: 'the platform package build', rerun: 'npm run prebuild' });
  fetchSources();
  process.env.VOXD_BUNDLED_DEPS = await buildBundledDeps({ arch }); // read by the build backend prebuildify spawns

  const platformDir = path.join(root, 'prebuilds', `${process.platform}-${arch}`);
  const clearPlatformDir = () => fs.rmSync(platformDir, { recursive: true, force: true }); // one prebuild per platform
  clearPlatformDir();
  fs.mkdirSync(STAGING, { recursive: true }); // prebuildify spawns the backend there without creating it
  // prebuildify takes the first .node it finds there; never let it take one left by an interrupted run.
  fs.rmSync(path.join(STAGING, 'build', 'Release', 'voxd.node'), { force: true });
  await prebuildify(run);

  const produced = fs.existsSync(platformDir) ? fs.readdirSync(platformDir) : [];
  if (produced.length !== 1 || !produced[0].endsWith('.node')) {
    throw new InstallError(`prebuildify left [${produced.join(', ')}] in ${relative(platformDir)} instead of one .node file.`);
  }
  const prebuild = path.join(platformDir, produced[0]);
  try {
    assertPortable();
    const runner = nodeFor(arch);
    const resolved = resolvedPrebuild(runner);
    if (resolved !== prebuild) throw new InstallError(`node-gyp-build resolves ${relative(resolved)} instead of ${relative(prebuild)}.`);
    const failure = testLoad(prebuild, runner);
    if (failure) throw new InstallError(`the prebuild ${relative(prebuild)} does not load${cross ? ` on ${arch} Node under qemu` : ''}: ${failure}.`);
    const { beyondRuntime } = sharedLibrariesOf(prebuild, arch);
    if (beyondRuntime.length)
      throw new InstallError(
        `the prebuild ${relative(prebuild)} needs ${beyondRuntime.join(', ')} of the system; it may need only libc and the C/C++ runtime.`,
      );
  } catch (error) {
    clearPlatformDir(); // never leave a prebuild that failed a check where npm pack would ship it
    throw error;
  }
  const megabytes = (fs.statSync(prebuild).size / 2 ** 20).toFixed(1);
  log(
    `prebuild ready: ${relative(prebuild)} (${megabytes} MB, portable, self-contained, stripped, loads${cross ? ' under qemu' : ''}; made with prebuildify in ${formatDuration(Date.now() - started)})`,
  );
}

main().catch((error) => {
  if (!(error instanceof InstallError) || error.message) {
    console.error(`[voxd] prebuild failed: ${error instanceof InstallError ? error.message : (error?.message ?? error)}`);
  }
  process.exit(1);
});
