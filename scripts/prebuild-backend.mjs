#!/usr/bin/env node
// The build command prebuildify runs in place of node-gyp (scripts/prebuild.mjs passes it as `nodeGyp`).
// prebuildify calls `<this> rebuild --target=<v> --devdir=<dir> --arch=<arch> --release` in its working
// directory and then takes <cwd>/build/Release/*.node, so this builds the portable CPU addon (VOXD_PORTABLE=ON,
// no CUDA, the static C libraries of VOXD_BUNDLED_DEPS; for another --arch, cross-compiled: scripts/cross.mjs) from
// the package root with cmake-js into <cwd>/build. --target and --devdir are node-gyp's header
// download settings and are ignored: cmake-js builds against the Node running it, and the addon uses only N-API.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { InstallError, buildAddon, log, relative, root } from './build-native.mjs';
import { crossTarget } from './cross.mjs';

/** Exit code after this script has printed its own one-line failure, so scripts/prebuild.mjs adds nothing. */
export const REPORTED_FAILURE = 2;

/**
 * The architecture to build for (--arch), checked.
 * @param {string[]} args
 */
function parseArgs(args) {
  /** @type {string} */
  let arch = process.arch;
  const [command, ...options] = args;
  if (command !== 'rebuild') throw new InstallError(`expected node-gyp's \`rebuild\` command, got \`${args.join(' ')}\`.`);
  for (const option of options) {
    const [name, value] = option.split(/=(.*)/s);
    if (name === '--target' || name === '--devdir' || name === '--release' || (name === '--runtime' && value === 'node')) continue;
    if (name === '--arch') {
      crossTarget(value); // throws for an architecture this machine cannot build for
      arch = value;
      continue;
    }
    throw new InstallError(`unsupported build option ${option} (only portable Node release builds are made).`);
  }
  return arch;
}

async function main() {
  const arch = parseArgs(process.argv.slice(2));
  const outDir = path.relative(root, path.join(process.cwd(), 'build'));
  log(`building the portable addon into ${outDir} (a few minutes the first time; log: ${path.join(outDir, 'voxd-build.log')})`);
  const bundled = process.env.VOXD_BUNDLED_DEPS || undefined; // set by scripts/prebuild.mjs
  const { file } = await buildAddon({ outDir, flags: { cuda: false, portable: true, bundled, arch } });
  log(`built ${relative(file)}`);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  main().catch((error) => {
    console.error(`[voxd] prebuild failed: ${error instanceof InstallError ? error.message : (error?.message ?? error)}`);
    process.exit(REPORTED_FAILURE);
  });
}
