#!/usr/bin/env node
// `npm run prebuild`: a portable (no -march=native) CPU build of the addon, stripped and placed where
// node-gyp-build looks for prebuilds: prebuilds/<platform>-<arch>/voxd.napi.glibc.node (prebuilds/ is packed into
// the npm tarball, never committed). prebuildify 6 can only drive node-gyp, so cmake-js is driven here into its
// own build directory (build/prebuild, so the native build in build/ stays incremental) and the file is named
// with prebuildify's tags: napi (any Node ABI) and the libc.
import fs from 'node:fs';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { InstallError, buildAddon, formatDuration, log, relative, replaceFile, requireFromRoot, root, testLoad } from './build-native.mjs';
import { fetchSources } from './fetch-sources.mjs';
import { ensureSystemDeps } from './system-deps.mjs';

const OUT_DIR = path.join('build', 'prebuild');
const NATIVE_TUNING = /-m(?:arch|tune|cpu)=native\b/;

/** Fails unless the build's compile commands exist and none of them tunes for the build machine. */
function assertPortable() {
  const commandsFile = path.join(root, OUT_DIR, 'compile_commands.json');
  const commands = JSON.parse(fs.readFileSync(commandsFile, 'utf8'));
  if (!commands.some((entry) => entry.file.includes('ggml-cpu'))) {
    throw new InstallError(`${relative(commandsFile)} lists no ggml-cpu sources, so portability cannot be checked.`);
  }
  const native = commands.filter((entry) => NATIVE_TUNING.test(entry.command ?? entry.arguments.join(' ')));
  if (native.length) {
    throw new InstallError(
      `the portable build compiled ${native.length} files for this CPU only (e.g. ${relative(native[0].file)} has ` +
        `${(native[0].command ?? native[0].arguments.join(' ')).match(NATIVE_TUNING)[0]}). Fix: make VOXD_PORTABLE=ON turn that flag off in CMakeLists.txt.`,
    );
  }
}

function libc() {
  return fs.existsSync('/etc/alpine-release') ? 'musl' : 'glibc';
}

/** The file node-gyp-build resolves when it may only use prebuilds. */
function resolvedPrebuild() {
  process.env.PREBUILDS_ONLY = '1'; // read by node-gyp-build when it is first required
  return requireFromRoot('node-gyp-build').path(root);
}

async function main() {
  ensureSystemDeps();
  fetchSources();
  log(`building the portable addon into ${OUT_DIR} (a few minutes the first time; log: ${path.join(OUT_DIR, 'voxd-build.log')})`);
  const { file, elapsedMs } = await buildAddon({ outDir: OUT_DIR, flags: { cuda: false, portable: true } });
  assertPortable();

  const platformDir = path.join(root, 'prebuilds', `${process.platform}-${process.arch}`);
  const prebuild = path.join(platformDir, `voxd.napi${process.platform === 'linux' ? `.${libc()}` : ''}.node`);
  fs.mkdirSync(platformDir, { recursive: true });
  for (const name of fs.readdirSync(platformDir)) fs.rmSync(path.join(platformDir, name), { recursive: true, force: true }); // one prebuild per platform
  replaceFile(file, prebuild);
  if (process.platform === 'linux' || process.platform === 'darwin') {
    const strip = spawnSync('strip', process.platform === 'darwin' ? ['-Sx', prebuild] : ['--strip-all', prebuild], { encoding: 'utf8' });
    if (strip.status !== 0) throw new InstallError(`strip failed on ${relative(prebuild)}: ${strip.stderr || strip.error}. Fix: install binutils.`);
  }

  const resolved = resolvedPrebuild();
  if (resolved !== prebuild) throw new InstallError(`node-gyp-build resolves ${relative(resolved)} instead of ${relative(prebuild)}.`);
  const failure = testLoad(prebuild);
  if (failure) throw new InstallError(`the prebuild ${relative(prebuild)} does not load: ${failure}.`);
  const megabytes = (fs.statSync(prebuild).size / 2 ** 20).toFixed(1);
  log(`prebuild ready: ${relative(prebuild)} (${megabytes} MB, portable, loads; built in ${formatDuration(elapsedMs)})`);
}

main().catch((error) => {
  console.error(`[voxd] prebuild failed: ${error instanceof InstallError ? error.message : (error?.message ?? error)}`);
  process.exit(1);
});
