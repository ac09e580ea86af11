/**
 * Finding and loading the native addon (docs/install.md): `VOXD_ADDON`, a source build, the platform package, a
 * prebuild. The only module that loads a .node file of voxd's; everything else calls `loadNative()`. It imports
 * nothing of voxd's at run time, so the install script and the loader's tests can run it from a bare layout
 * (native/test-load.ts).
 */
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { NativeAddon } from './addon.js';

/** The addon could not be loaded: message names the cause and the fix. */
export class NativeLoadError extends Error {
  override name = 'NativeLoadError';
  constructor(
    message: string,
    /** Why the installed platform package was not taken, when it was not. */
    readonly passedOver: string | null = null,
  ) {
    super(message);
  }
}

const packageRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
let cached: { addon: NativeAddon; origin: NativeOrigin } | undefined;

/** Where the loaded addon came from (docs/install.md). */
export interface NativeOrigin {
  kind: 'VOXD_ADDON' | 'platform package' | 'source build';
  /** The .node file. */
  file: string;
  /** Data shipped beside the addon: the `sphinx` model's files (a platform package's), else null (the system's). */
  sphinxModelDir: string | null;
  /**
   * espeak-ng's data directory, Kokoro's text frontend (a platform package's), else null: the addon's espeak-ng then
   * reads the directory it was built with (Debian's /usr/lib/<multiarch>/espeak-ng-data, package espeak-ng-data).
   */
  espeakDataDir: string | null;
  /** Why the installed platform package was not taken, when it was not. */
  passedOver: string | null;
  /** One line for the log: what was loaded, and why not the platform package when it was passed over. */
  summary: string;
}

/** What a platform package says of itself in its package.json (`voxd`), written by scripts/release.mjs. */
interface PlatformManifest {
  name: string;
  version: string;
  voxd?: { cpu?: string; requiresCpuFlags?: string[]; bundles?: string };
}

/**
 * The platform package npm installs on this machine, or on one of this libc with another CPU architecture (`arch`):
 * voxd's optionalDependencies, of which npm takes the one whose os, cpu and libc match. `@voxd/addon-linux-x64-gnu`,
 * `@voxd/addon-linux-arm64-gnu` and so on.
 */
export function platformPackageName(arch: string = process.arch): string {
  const glibc = (process.report?.getReport() as { header?: { glibcVersionRuntime?: string } } | undefined)?.header?.glibcVersionRuntime;
  const libc = process.platform === 'linux' ? (glibc ? '-gnu' : '-musl') : '';
  return `@voxd/addon-${process.platform}-${arch}${libc}`;
}

/**
 * The CPU's features in /proc/cpuinfo's words: x86's `flags` line (`avx2`, ...), ARM's `Features` (`asimd`, ...), as
 * the kernel of `arch` writes them; null when it has no such line (under qemu's user-mode emulation /proc/cpuinfo is
 * the host's, and says nothing of the CPU emulated).
 */
export function cpuFlagsOf(cpuinfo: string, arch: string = process.arch): Set<string> | null {
  const line = (arch === 'arm64' ? /^Features\s*:(.*)$/m : /^flags\s*:(.*)$/m).exec(cpuinfo);
  return line ? new Set((line[1] as string).trim().split(/\s+/)) : null;
}

/** This CPU's features (Linux), or null where /proc/cpuinfo cannot be read. */
function cpuFlags(): Set<string> | null {
  try {
    return cpuFlagsOf(fs.readFileSync('/proc/cpuinfo', 'utf8'));
  } catch {
    return null;
  }
}

/**
 * The platform package's addon when it is installed, is voxd's version, suits this CPU and loads; else why not
 * (null: not installed, nothing to say).
 */
function loadPlatformPackage(require: NodeRequire): { addon: NativeAddon; origin: NativeOrigin } | { skipped: string | null } {
  const name = platformPackageName();
  let manifestFile: string;
  try {
    manifestFile = require.resolve(`${name}/package.json`);
  } catch {
    return { skipped: null };
  }
  const dir = path.dirname(manifestFile);
  try {
    const manifest = JSON.parse(fs.readFileSync(manifestFile, 'utf8')) as PlatformManifest;
    const version = (JSON.parse(fs.readFileSync(path.join(packageRoot, 'package.json'), 'utf8')) as { version: string }).version;
    if (manifest.version !== version) return { skipped: `${name} is ${manifest.version}, not voxd's ${version}` };
    const flags = cpuFlags();
    const lacking = flags ? (manifest.voxd?.requiresCpuFlags ?? []).filter((flag) => !flags.has(flag)) : [];
    if (lacking.length) return { skipped: `${name} needs a ${manifest.voxd?.cpu ?? 'newer'} CPU (this one lacks ${lacking.join(', ')})` };
    const file = path.join(dir, 'voxd.node');
    const addon = require(file) as NativeAddon;
    const summary = `native addon: ${name} ${manifest.version} (prebuilt${manifest.voxd?.cpu ? ` for ${manifest.voxd.cpu}` : ''}${manifest.voxd?.bundles ? `, with ${manifest.voxd.bundles}` : ''})`;
    return {
      addon,
      origin: {
        kind: 'platform package',
        file,
        sphinxModelDir: path.join(dir, 'pocketsphinx', 'en-us'),
        espeakDataDir: path.join(dir, 'espeak-ng-data'),
        passedOver: null,
        summary,
      },
    };
  } catch (error) {
    return { skipped: `${name} did not load (${error instanceof Error ? error.message.split('\n')[0] : String(error)})` };
  }
}

/**
 * Loads the addon once, the first of: `VOXD_ADDON` (a path to a .node file, e.g. a custom CUDA build); a source
 * build in build/Release (the install made one because it was asked to, VOXD_BUILD_FROM_SOURCE=1 or VOXD_CUDA=1, or
 * because the platform package was passed over; in a clone, the developer's build); the platform package when it is
 * installed, suits this CPU and loads (not with VOXD_BUILD_FROM_SOURCE=1); a prebuild in prebuilds/ (`npm run
 * prebuild`), through node-gyp-build.
 */
function load(): { addon: NativeAddon; origin: NativeOrigin } {
  if (cached) return cached;
  const require = createRequire(import.meta.url);
  const explicit = process.env.VOXD_ADDON;
  let passedOver: string | null = null;
  try {
    if (explicit) {
      const file = path.resolve(explicit);
      cached = {
        addon: require(file) as NativeAddon,
        origin: { kind: 'VOXD_ADDON', file, sphinxModelDir: null, espeakDataDir: null, passedOver, summary: `native addon: ${file} (VOXD_ADDON)` },
      };
      return cached;
    }
    const localBuild = path.join(packageRoot, 'build', 'Release', 'voxd.node');
    if (!fs.existsSync(localBuild) && process.env.VOXD_BUILD_FROM_SOURCE !== '1') {
      const platform = loadPlatformPackage(require);
      if ('addon' in platform) return (cached = platform);
      passedOver = platform.skipped;
    }
    const gypBuild = require('node-gyp-build') as { (dir: string): NativeAddon; path(dir: string): string };
    const file = gypBuild.path(packageRoot);
    const summary = `native addon: ${path.relative(packageRoot, file)} (built from source${passedOver ? `; ${passedOver}` : ''})`;
    cached = { addon: require(file) as NativeAddon, origin: { kind: 'source build', file, sphinxModelDir: null, espeakDataDir: null, passedOver, summary } };
  } catch (error) {
    const reason = error instanceof Error ? error.message.split('\n')[0] : String(error);
    throw new NativeLoadError(
      `voxd's native addon could not be loaded (${reason}${passedOver ? `; ${passedOver}` : ''}). ` +
        `Rebuild it for this machine with \`npm run build:native\` (in the voxd folder), or reinstall with \`npm install\`.`,
      passedOver,
    );
  }
  return cached;
}

export function loadNative(): NativeAddon {
  return load().addon;
}

/** Where the addon came from (loading it first). */
export function nativeOrigin(): NativeOrigin {
  return load().origin;
}
