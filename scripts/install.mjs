#!/usr/bin/env node
// The package's `install` script (and `npm run build:native` = `node scripts/install.mjs --force-build`).
// Makes sure a native addon that loads on this machine is there:
//   0. the platform package npm installed (docs/install.md) suits this CPU and loads -> nothing to build
//   1. a prebuild or an up-to-date local build that loads  -> nothing to do
//   2. the machine's addon cache has this exact build      -> copy it to build/Release (seconds)
//   3. otherwise: system tools, engine sources, cmake-js build into build/ (incremental), then cache it.
// --force-build skips 0 to 2: it always runs the compiler (someone may be editing third_party/).
// Environment: VOXD_BUILD_FROM_SOURCE=1 (never use a platform package or prebuild), VOXD_CUDA=1 (CUDA backend; implies from source),
// VOXD_CACHE_DIR (default ~/.cache/voxd), VOXD_VERBOSE_BUILD=1 (show the build output), VOXD_BUILD_JOBS (compile jobs).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { InstallError, buildAddon, buildKey, cacheDir, formatDuration, log, relative, replaceFile, requireFromRoot, root, testLoad } from './build-native.mjs';
import { fetchSources } from './fetch-sources.mjs';
import { ensureSystemDeps } from './system-deps.mjs';

const LOCAL_BUILD = path.join(root, 'build', 'Release', 'voxd.node');
// Records which build key produced build/Release/voxd.node, so a stale local build is never taken as current.
const LOCAL_BUILD_KEY = `${LOCAL_BUILD}.key`;
const ADDON_CACHE = path.join(cacheDir, 'addon');
const CACHE_ENTRIES_KEPT = 4;

function readLocalBuildKey() {
  try {
    return fs.readFileSync(LOCAL_BUILD_KEY, 'utf8');
  } catch {
    return null;
  }
}

/**
 * Step 0: whether the server's own loader takes the platform package, test-loaded in a child process
 * (dist/src/native/test-load.js: a binary that crashes on load must not take the installer down). A clone before its
 * first build has no loader yet: it builds from source.
 */
function platformPackageLoads() {
  const testLoader = path.join(root, 'dist', 'src', 'native', 'test-load.js');
  if (!fs.existsSync(testLoader)) return false;
  const run = spawnSync(process.execPath, [testLoader], { encoding: 'utf8', env: { ...process.env, VOXD_ADDON: '' } });
  /** @type {{ kind?: string, summary?: string, passedOver?: string | null }} */
  let origin = {};
  try {
    origin = JSON.parse(run.stdout.trim().split('\n').pop() ?? '{}');
  } catch {
    log(`the platform package check ended ${run.signal ?? `with exit code ${run.status}`}; building from source`);
    return false;
  }
  if (origin.kind === 'platform package') {
    log(`${origin.summary}: nothing to build`);
    return true;
  }
  if (origin.passedOver) log(`${origin.passedOver}; building from source`);
  return false;
}

/**
 * Step 1: the binary node-gyp-build would load, if it is current and loads.
 * @param {import('./build-native.mjs').BuildFlags} flags
 * @param {boolean} fromSource
 */
function existingBinaryLoads(flags, fromSource) {
  let found;
  try {
    found = requireFromRoot('node-gyp-build').path(root);
  } catch {
    return false; // neither a local build nor a prebuild for this platform
  }
  if (found.startsWith(path.join(root, 'build') + path.sep)) {
    if (readLocalBuildKey() !== buildKey(flags)) return false;
  } else if (fromSource || flags.cuda) {
    return false; // prebuilds are CPU-only
  }
  const failure = testLoad(found);
  if (failure) {
    log(`${relative(found)} does not load here (${failure}); building from source`);
    return false;
  }
  log(`native addon ready: ${relative(found)} (\`npm run build:native\` rebuilds it)`);
  return true;
}

/**
 * Step 2: a build with this key made earlier on this machine (any clone).
 * @param {string} key
 */
function installFromCache(key) {
  const entry = path.join(ADDON_CACHE, key);
  const cached = path.join(entry, 'voxd.node');
  if (!fs.existsSync(cached)) return false;
  fs.rmSync(LOCAL_BUILD_KEY, { force: true });
  replaceFile(cached, LOCAL_BUILD);
  const failure = testLoad(LOCAL_BUILD);
  if (failure) {
    log(`cached build ${key} does not load (${failure}); rebuilding`);
    fs.rmSync(entry, { recursive: true, force: true });
    return false;
  }
  fs.writeFileSync(LOCAL_BUILD_KEY, key);
  const now = new Date();
  fs.utimesSync(entry, now, now); // the most recently used entries survive pruning
  log(`native addon ready: ${relative(LOCAL_BUILD)} (from the build cache ${entry})`);
  return true;
}

/**
 * @param {string} file
 * @param {string} key
 */
function storeInCache(file, key) {
  const entry = path.join(ADDON_CACHE, key);
  replaceFile(file, path.join(entry, 'voxd.node'));
  const entries = fs
    .readdirSync(ADDON_CACHE)
    .map((name) => ({ dir: path.join(ADDON_CACHE, name), mtime: fs.statSync(path.join(ADDON_CACHE, name)).mtimeMs }))
    .sort((a, b) => b.mtime - a.mtime);
  for (const old of entries.slice(CACHE_ENTRIES_KEPT)) fs.rmSync(old.dir, { recursive: true, force: true });
}

async function main() {
  const forceBuild = process.argv.includes('--force-build');
  const flags = { cuda: process.env.VOXD_CUDA === '1', portable: false };
  const fromSource = process.env.VOXD_BUILD_FROM_SOURCE === '1';
  if (!forceBuild && !fromSource && !flags.cuda && platformPackageLoads()) return;
  if (!forceBuild && existingBinaryLoads(flags, fromSource)) return;

  const key = buildKey(flags);
  if (!forceBuild && installFromCache(key)) return;

  ensureSystemDeps();
  try {
    fetchSources();
  } catch (error) {
    throw new InstallError(
      `could not fetch the engine sources (${String(/** @type {Error} */ (error).message).split('\n')[0]}). Fix: this step needs the npm registry once ` +
        `(the tarballs are then kept in ${path.join(cacheDir, 'packs')}); fix the error above, then run \`npm install\` again.`,
    );
  }

  // Removed so the linker always writes it: a copy from the cache may look newer than this build's objects.
  for (const stale of [LOCAL_BUILD, LOCAL_BUILD_KEY]) fs.rmSync(stale, { force: true });
  log(`building the native addon${flags.cuda ? ' with CUDA' : ''} (a few minutes the first time; log: build/voxd-build.log)`);
  const { file, elapsedMs } = await buildAddon({ outDir: 'build', flags });
  const failure = testLoad(file);
  if (failure) {
    throw new InstallError(
      `the freshly built ${relative(file)} does not load: ${failure}. Fix: ` +
        (flags.cuda
          ? 'VOXD_CUDA=1 needs the NVIDIA driver at run time; unset it for a CPU build.'
          : 'run `npm run build:native` again; if it persists, report this message.'),
    );
  }
  fs.writeFileSync(LOCAL_BUILD_KEY, key);
  try {
    storeInCache(file, key);
  } catch (error) {
    log(`could not store the build in ${ADDON_CACHE} (${/** @type {Error} */ (error).message}); the next clean clone will build again`);
  }
  log(`native addon ready: ${relative(file)} (built in ${formatDuration(elapsedMs)}, cache key ${key})`);
}

main().catch((error) => {
  const message =
    error instanceof InstallError ? error.message : `${error?.message ?? error}. Fix: run \`VOXD_VERBOSE_BUILD=1 npm run build:native\` to see more.`;
  console.error(`[voxd] install failed: ${message}`);
  process.exit(1);
});
