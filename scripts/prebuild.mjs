#!/usr/bin/env node
// `npm run prebuild`: the addon of this machine's platform package (docs/install.md), made with prebuildify:
// portable (no -march=native; x86-64-v3 on x64), linked with the static FFmpeg, flite and pocketsphinx of
// scripts/bundled-deps.mjs and the static C++ runtime, stripped, and placed where node-gyp-build looks for
// prebuilds: prebuilds/<platform>-<arch>/voxd.<libc>.node (prebuildify's name for an N-API build: any Node ABI,
// tagged with the libc; never committed). scripts/release.mjs puts it into the platform package. prebuildify 6 only
// knows node-gyp, so its `nodeGyp` is scripts/prebuild-backend.mjs, which builds with cmake-js; it runs in the
// staging directory build/prebuild, so the native build in build/ stays incremental.
import fs from 'node:fs';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { InstallError, formatDuration, log, relative, requireFromRoot, root, sharedLibrariesOf, testLoad } from './build-native.mjs';
import { buildBundledDeps } from './bundled-deps.mjs';
import { fetchSources } from './fetch-sources.mjs';
import { REPORTED_FAILURE } from './prebuild-backend.mjs';
import { BUNDLED_BUILD_DEPS, ensureSystemDeps } from './system-deps.mjs';

const STAGING = path.join(root, 'build', 'prebuild'); // prebuildify's cwd; cmake-js builds into STAGING/build
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
  if (process.platform === 'linux' && spawnSync('strip', ['--version']).status !== 0) {
    throw new InstallError('`strip` was not found. Fix: install binutils.');
  }
  try {
    return (await import('prebuildify')).default;
  } catch {
    throw new InstallError('prebuildify is not installed. Fix: run `npm install` (it is a devDependency).');
  }
}

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
    arch: process.arch,
    strip: true,
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

/** The file node-gyp-build resolves when it may only use prebuilds. */
function resolvedPrebuild() {
  process.env.PREBUILDS_ONLY = '1'; // read by node-gyp-build when it is first required
  return requireFromRoot('node-gyp-build').path(root);
}

async function main() {
  const started = Date.now();
  const run = await loadPrebuildify();
  ensureSystemDeps(BUNDLED_BUILD_DEPS, { purpose: 'the platform package build', rerun: 'npm run prebuild' });
  fetchSources();
  process.env.VOXD_BUNDLED_DEPS = await buildBundledDeps(); // read by the build backend prebuildify spawns

  const platformDir = path.join(root, 'prebuilds', `${process.platform}-${process.arch}`);
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
    const resolved = resolvedPrebuild();
    if (resolved !== prebuild) throw new InstallError(`node-gyp-build resolves ${relative(resolved)} instead of ${relative(prebuild)}.`);
    const failure = testLoad(prebuild);
    if (failure) throw new InstallError(`the prebuild ${relative(prebuild)} does not load: ${failure}.`);
    const { beyondRuntime } = sharedLibrariesOf(prebuild);
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
    `prebuild ready: ${relative(prebuild)} (${megabytes} MB, portable, self-contained, stripped, loads; made with prebuildify in ${formatDuration(Date.now() - started)})`,
  );
}

main().catch((error) => {
  if (!(error instanceof InstallError) || error.message) {
    console.error(`[voxd] prebuild failed: ${error instanceof InstallError ? error.message : (error?.message ?? error)}`);
  }
  process.exit(1);
});
