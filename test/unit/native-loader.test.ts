/**
 * Which addon voxd loads (docs/install.md): an installed layout in a temporary directory — voxd's loader, a source
 * build, and a platform package in node_modules whose addon is this machine's build — and a child process per case
 * test-loads it (src/native/test-load.ts) and says what the loader took and why. The install script's step 0 runs
 * the same test load.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { cpuFlagsOf, platformPackageName, type NativeOrigin } from '../../src/native/load.js';
import type { TestLoadOutcome } from '../../src/native/test-load.js';
import { ROOT } from '../helpers/paths.js';

const BUILT = path.join(ROOT, 'build', 'Release', 'voxd.node');
const skip = fs.existsSync(BUILT) ? false : 'no source build of the addon (npm install makes one)';

describe('the native addon loader', { skip }, () => {
  let dir = '';
  let platformDir = '';
  let version = '';

  /** The platform package as `npm install` leaves it, with `voxd` as its package.json's `voxd` field. */
  function installPlatformPackage(
    voxd: Record<string, unknown>,
    { addon = 'this build', as = version }: { addon?: 'this build' | 'not an addon'; as?: string } = {},
  ): void {
    fs.rmSync(platformDir, { recursive: true, force: true });
    fs.mkdirSync(path.join(platformDir, 'pocketsphinx', 'en-us'), { recursive: true });
    fs.writeFileSync(path.join(platformDir, 'package.json'), JSON.stringify({ name: platformPackageName(), version: as, voxd }));
    if (addon === 'this build') fs.symlinkSync(BUILT, path.join(platformDir, 'voxd.node'));
    else fs.writeFileSync(path.join(platformDir, 'voxd.node'), 'not an ELF file');
  }

  /** Where the layout's own addon is: a local build (build/Release), a prebuild (prebuilds/), or none. */
  function sourceBuild(where: 'build/Release' | 'prebuilds' | 'none'): void {
    for (const d of ['build', 'prebuilds']) fs.rmSync(path.join(dir, d), { recursive: true, force: true });
    if (where === 'none') return;
    const file =
      where === 'build/Release'
        ? path.join(dir, 'build', 'Release', 'voxd.node')
        : path.join(dir, 'prebuilds', `${process.platform}-${process.arch}`, 'voxd.glibc.node');
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.symlinkSync(BUILT, file);
  }

  /** What the loader of the installed layout takes, test-loaded in a child process with `env`. */
  function origin(env: NodeJS.ProcessEnv = {}): NativeOrigin {
    const run = spawnSync(process.execPath, [path.join(dir, 'dist', 'src', 'native', 'test-load.js')], {
      encoding: 'utf8',
      env: { ...process.env, VOXD_ADDON: '', VOXD_BUILD_FROM_SOURCE: '', ...env },
    });
    assert.equal(run.status, 0, run.stderr);
    const outcome = JSON.parse(run.stdout) as TestLoadOutcome;
    assert.notEqual(outcome.kind, 'none', outcome.summary);
    return outcome as NativeOrigin;
  }

  /** scripts/install.mjs of the layout, with a PATH that holds node and nothing else (no compiler, no cmake). */
  function install(): { status: number | null; stdout: string } {
    const run = spawnSync(process.execPath, [path.join(dir, 'scripts', 'install.mjs')], {
      encoding: 'utf8',
      env: { ...process.env, PATH: path.dirname(process.execPath), VOXD_BUILD_FROM_SOURCE: '', VOXD_ADDON: '' },
    });
    return { status: run.status, stdout: run.stdout };
  }

  before(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'voxd-loader-'));
    for (const file of [
      'package.json',
      ...['load', 'test-load'].map((m) => `dist/src/native/${m}.js`),
      ...['install', 'build-native', 'cross', 'fetch-sources', 'sources', 'system-deps'].map((s) => `scripts/${s}.mjs`),
    ]) {
      fs.mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
      fs.copyFileSync(path.join(ROOT, file), path.join(dir, file));
    }
    fs.mkdirSync(path.join(dir, 'node_modules'));
    for (const module of ['node-gyp-build', 'node-addon-api', 'cmake-js'])
      fs.symlinkSync(path.join(ROOT, 'node_modules', module), path.join(dir, 'node_modules', module));
    platformDir = path.join(dir, 'node_modules', ...platformPackageName().split('/'));
    version = (JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8')) as { version: string }).version;
  });
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('names the platform package by platform, CPU and libc', () => {
    assert.match(platformPackageName(), new RegExp(`^@voxd/addon-${process.platform}-${process.arch}(-gnu|-musl)?$`));
  });

  it('chooses on 64-bit ARM the arm64 package voxd depends on, and reads the features ARM cores list', () => {
    const { optionalDependencies } = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { optionalDependencies: Record<string, string> };
    const libc = platformPackageName().replace(/^.*?(-gnu|-musl)?$/, '$1');
    if (process.platform === 'linux' && libc === '-gnu') {
      assert.equal(platformPackageName('arm64'), '@voxd/addon-linux-arm64-gnu');
      assert.ok(platformPackageName('arm64') in optionalDependencies, 'npm installs it on arm64');
    }
    // /proc/cpuinfo of a Raspberry Pi 4 (Cortex-A72, armv8.0) and of an x86-64 machine: the arm64 package needs fp
    // and asimd (scripts/release.mjs), which the oldest 64-bit ARM cores list
    const raspberryPi4 = 'processor\t: 0\nBogoMIPS\t: 108.00\nFeatures\t: fp asimd evtstrm crc32 cpuid\nCPU implementer\t: 0x41\n';
    const x86 = 'processor\t: 0\nflags\t\t: fpu sse2 avx avx2 fma\n';
    assert.deepEqual([...(cpuFlagsOf(raspberryPi4, 'arm64') ?? [])], ['fp', 'asimd', 'evtstrm', 'crc32', 'cpuid']);
    assert.ok(cpuFlagsOf(x86, 'x64')?.has('avx2'));
    // an arm64 Node under qemu on x86 reads the host's /proc/cpuinfo: nothing it says is about the emulated CPU
    assert.equal(cpuFlagsOf(x86, 'arm64'), null);
    assert.equal(cpuFlagsOf(raspberryPi4, 'x64'), null);
  });

  it('takes the source build when no platform package is installed', () => {
    fs.rmSync(platformDir, { recursive: true, force: true });
    sourceBuild('build/Release');
    const taken = origin();
    assert.equal(taken.kind, 'source build');
    assert.equal(taken.summary, 'native addon: build/Release/voxd.node (built from source)');
    assert.equal(taken.sphinxModelDir, null, "the system's sphinx model");
    assert.equal(taken.espeakDataDir, null, "the system's espeak-ng data");
  });

  it("takes the platform package when it suits the CPU and loads, with the sphinx model and espeak-ng's data beside it", () => {
    sourceBuild('none');
    installPlatformPackage({ cpu: 'x86-64-v3', requiresCpuFlags: [], bundles: 'FFmpeg 5.1.9' });
    const taken = origin();
    assert.equal(taken.kind, 'platform package');
    assert.equal(taken.file, path.join(platformDir, 'voxd.node'));
    assert.equal(taken.sphinxModelDir, path.join(platformDir, 'pocketsphinx', 'en-us'));
    assert.equal(taken.espeakDataDir, path.join(platformDir, 'espeak-ng-data'));
    assert.equal(taken.summary, `native addon: ${platformPackageName()} ${version} (prebuilt for x86-64-v3, with FFmpeg 5.1.9)`);
  });

  it('keeps a build made from source over the platform package (VOXD_CUDA=1, VOXD_BUILD_FROM_SOURCE=1 installs, a clone)', () => {
    sourceBuild('build/Release');
    installPlatformPackage({ requiresCpuFlags: [] });
    assert.equal(origin().file, path.join(dir, 'build', 'Release', 'voxd.node'));
  });

  it(
    'passes the platform package over, saying why, for a CPU without its features',
    { skip: fs.existsSync('/proc/cpuinfo') ? false : 'no /proc/cpuinfo' },
    () => {
      sourceBuild('prebuilds');
      installPlatformPackage({ cpu: 'x86-64-v9', requiresCpuFlags: ['sse2', 'voxd_no_such_flag'] });
      const taken = origin();
      assert.equal(taken.kind, 'source build');
      assert.match(taken.passedOver ?? '', /needs a x86-64-v9 CPU \(this one lacks voxd_no_such_flag\)$/);
      assert.match(taken.summary, /\(built from source; .* needs a x86-64-v9 CPU \(this one lacks voxd_no_such_flag\)\)$/);
      // and the install script says so before it looks for another addon
      const run = install();
      assert.match(run.stdout, /needs a x86-64-v9 CPU \(this one lacks voxd_no_such_flag\); building from source/);
    },
  );

  it('passes over a platform package of another version, or whose addon does not load, saying why', () => {
    sourceBuild('prebuilds');
    installPlatformPackage({ requiresCpuFlags: [] }, { as: '9.9.9' });
    assert.match(origin().passedOver ?? '', new RegExp(`is 9\\.9\\.9, not voxd's ${version.replace(/\./g, '\\.')}$`));
    installPlatformPackage({}, { addon: 'not an addon' });
    const taken = origin();
    assert.equal(taken.kind, 'source build');
    assert.match(taken.passedOver ?? '', /did not load \(.*voxd\.node.*\)$/);
  });

  it('takes the source build with VOXD_BUILD_FROM_SOURCE=1, and VOXD_ADDON over both', () => {
    sourceBuild('prebuilds');
    installPlatformPackage({ requiresCpuFlags: [] });
    assert.equal(origin({ VOXD_BUILD_FROM_SOURCE: '1' }).kind, 'source build');
    const explicit = origin({ VOXD_ADDON: BUILT });
    assert.deepEqual([explicit.kind, explicit.file], ['VOXD_ADDON', BUILT]);
  });

  it('the install script builds nothing when the platform package loads', () => {
    sourceBuild('none');
    installPlatformPackage({ cpu: 'x86-64-v3', requiresCpuFlags: [] });
    const run = install();
    assert.equal(run.status, 0);
    assert.match(
      run.stdout,
      new RegExp(`\\[voxd\\] native addon: @voxd/addon-[\\w-]+ ${version.replace(/\./g, '\\.')} \\(prebuilt for x86-64-v3\\): nothing to build`),
    );
  });
});
