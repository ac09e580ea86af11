// The C libraries a platform package links statically (docs/install.md): a minimal FFmpeg with the MP3, Vorbis and
// Opus encoders it wraps, flite 2.2 with the voices voxd offers, pocketsphinx 5prealpha with sphinxbase, and
// espeak-ng 1.51 (Kokoro's text frontend) with the data of Kokoro's languages. Each is the upstream source tarball
// as Debian's archive ships it (the .orig tarball of the Debian source package; for espeak-ng with Debian's patches
// too), pinned by SHA-256 and fetched at build time into the pack cache, never committed. `buildBundledDeps` configures
// and builds each, position-independent and static, into one prefix that CMakeLists.txt takes as
// VOXD_BUNDLED_DEPS; a stamp per library makes a second run skip what is built already.
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { InstallError, cacheDir, formatDuration, log, relative, root } from './build-native.mjs';
import { crossTarget, emulationEnv } from './cross.mjs';

// Debian's archive, its snapshot, then Ubuntu's, which carries the same .orig tarballs (deb.debian.org answered 404 for
// espeak-ng 1.51's in November 2026; the SHA-256 pins make any of them as good as another)
const MIRRORS = [
  'http://deb.debian.org/debian/pool/main',
  'https://snapshot.debian.org/archive/debian/20251101T000000Z/pool/main',
  'http://archive.ubuntu.com/ubuntu/pool/main',
  'http://archive.ubuntu.com/ubuntu/pool/universe',
];
const PACKS = path.join(cacheDir, 'packs');

/**
 * Where the libraries of `arch` (default: this machine's) are built, and the prefix they are installed into.
 * @param {string} [arch]
 */
export function bundledDirs(arch) {
  const dir = path.join(root, 'build', crossTarget(arch) ? `bundled-${arch}` : 'bundled');
  return { dir, prefix: path.join(dir, 'prefix') };
}

// The formats the decoder reads and the encoder writes (docs/api.md): containers, codecs and the parsers the
// demuxers need. Everything else of FFmpeg is left out (no programs, devices, filters, network or video).
const FFMPEG_COMPONENTS = {
  demuxer: [
    ...['wav', 'w64', 'aiff', 'au', 'caf', 'flac', 'mp3', 'ogg', 'matroska', 'mov', 'aac', 'ac3', 'eac3', 'wv', 'asf', 'mpegps', 'mpegts', 'amr'],
    // not audio, but recognised, so that the error can say what the file is (a PNG, a JPEG, a GIF)
    ...['image_png_pipe', 'image_jpeg_pipe', 'image_gif_pipe', 'image_webp_pipe'],
  ],
  decoder: [
    ...['pcm_u8', 'pcm_s8', 'pcm_s16le', 'pcm_s16be', 'pcm_s24le', 'pcm_s24be', 'pcm_s32le', 'pcm_s32be', 'pcm_f32le', 'pcm_f32be', 'pcm_f64le'],
    ...['pcm_f64be', 'pcm_alaw', 'pcm_mulaw', 'adpcm_ima_wav', 'adpcm_ms', 'gsm_ms', 'mp3float', 'mp3', 'mp2float', 'mp2', 'flac', 'vorbis'],
    ...['opus', 'aac', 'aac_latm', 'alac', 'ac3', 'eac3', 'wavpack', 'wmav1', 'wmav2', 'amrnb', 'amrwb'],
  ],
  parser: ['mpegaudio', 'flac', 'vorbis', 'opus', 'aac', 'aac_latm', 'ac3'],
  encoder: ['pcm_s16le', 'flac', 'aac', 'libmp3lame', 'libvorbis', 'libopus'],
  muxer: ['wav', 'mp3', 'flac', 'ogg', 'adts', 'pcm_s16le'],
};

// flite builds the languages, lexicons and voices a `.lv` file lists: these are the voices voxd offers
const FLITE_LANGVOX = `LEXES += cmulex
LANGS += usenglish
VOXES += cmu_us_kal16 cmu_us_awb cmu_us_rms cmu_us_slt
`;

// flite's calls of rand, exit and vfprintf go to voxd (native/src/engine/tts/flite.cpp says why): in a shared libflite
// they are redirected at run time, in the static one at compile time
const FLITE_REDIRECTS = ['rand', 'exit', 'vfprintf'].map((fn) => `-D${fn}=voxd_flite_static_${fn}`);

// espeak-ng's data for Kokoro's languages (native/src/engine/tts/kokoro/phonemizer.cpp names the same voices): the
// compiled dictionaries and voice files, with the phoneme tables every voice reads; the rest of its 100 languages
// is left out of the platform package
const ESPEAK_DICTIONARIES = ['en', 'es', 'fr', 'hi', 'it', 'pt'];
const ESPEAK_VOICES = ['gmw/en', 'gmw/en-US', 'roa/es', 'roa/fr', 'inc/hi', 'roa/it', 'roa/pt-BR'];
const ESPEAK_TABLES = ['phontab', 'phonindex', 'phondata', 'intonations'];

/**
 * @typedef {{ name: string, version: string, file: string, pool: string, sha256: string, licence: string,
 *   licenceFiles: string[], debianPatches?: { file: string, sha256: string }, options?: unknown,
 *   build: (src: string, prefix: string, jobs: number, host: string | null) => void }} BundledDep
 * `debianPatches`: the Debian source package's packaging tarball, whose patches (debian/patches/series) are applied
 * in order; `options`: what the build takes besides its own code (a change rebuilds it); `host`: the GNU triple of
 * the architecture to cross-compile for (scripts/cross.mjs), null for this machine's
 */

/** @type {BundledDep[]} in build order: each may use the ones before it (FFmpeg links LAME, Vorbis and Opus) */
export const BUNDLED_DEPS = [
  {
    name: 'libogg',
    version: '1.3.5',
    file: 'libogg_1.3.5.orig.tar.xz',
    pool: 'libo/libogg',
    sha256: 'c4d91be36fc8e54deae7575241e03f4211eb102afb3fc0775fbbc1b740016705',
    licence: 'BSD-3-Clause',
    licenceFiles: ['COPYING'],
    build: (src, prefix, jobs, host) => autotools(src, prefix, jobs, host, []),
  },
  {
    name: 'libvorbis',
    version: '1.3.7',
    file: 'libvorbis_1.3.7.orig.tar.gz',
    pool: 'libv/libvorbis',
    sha256: '0e982409a9c3fc82ee06e08205b1355e5c6aa4c36bca58146ef399621b0ce5ab',
    licence: 'BSD-3-Clause',
    licenceFiles: ['COPYING'],
    build: (src, prefix, jobs, host) => autotools(src, prefix, jobs, host, ['--disable-docs', '--disable-examples', '--disable-oggtest']),
  },
  {
    name: 'opus',
    version: '1.3.1',
    file: 'opus_1.3.1.orig.tar.gz',
    pool: 'o/opus',
    sha256: '65b58e1e25b2a114157014736a3d9dfeaad8d41be1c8179866f144a2fb44ff9d',
    licence: 'BSD-3-Clause',
    licenceFiles: ['COPYING'],
    build: (src, prefix, jobs, host) => autotools(src, prefix, jobs, host, ['--disable-doc', '--disable-extra-programs']),
  },
  {
    name: 'lame',
    version: '3.100',
    file: 'lame_3.100.orig.tar.gz',
    pool: 'l/lame',
    sha256: 'ddfe36cab873794038ae2c1210557ad34857a4b6bdc515785d1da9e175b1da1e',
    licence: 'LGPL-2.0-or-later',
    licenceFiles: ['COPYING', 'LICENSE'],
    build: (src, prefix, jobs, host) =>
      autotools(src, prefix, jobs, host, ['--disable-frontend', '--disable-decoder', '--disable-gtktest', '--disable-analyzer-hooks']),
  },
  {
    name: 'flite',
    version: '2.2',
    file: 'flite_2.2.orig.tar.gz',
    pool: 'f/flite',
    sha256: 'ab1555fe5adc3f99f1d4a1a0eb1596d329fd6d74f1464a0097c81f53c0cf9e5c',
    licence: 'BSD-4-Clause-style (flite)',
    licenceFiles: ['COPYING'],
    options: [FLITE_LANGVOX, FLITE_REDIRECTS],
    build: (src, prefix, jobs, host) => {
      fs.writeFileSync(path.join(src, 'config', 'voxd.lv'), FLITE_LANGVOX);
      const cflags = ['-O2', '-fPIC', '-U_FORTIFY_SOURCE', '-D_FORTIFY_SOURCE=0', ...FLITE_REDIRECTS].join(' ');
      const configure = [`--prefix=${prefix}`, '--disable-shared', '--disable-sockets', '--with-audio=none', '--with-langvox=voxd', ...hostArgs(host)];
      run('./configure', configure, src, { CFLAGS: cflags });
      // the libraries only: flite's programs would need the redirected functions, which only the addon defines
      for (const dir of ['include', 'src', 'lang']) run('make', [`-j${jobs}`, '-C', dir], src);
      const libs = path.join(src, 'build', fliteTarget(src), 'lib');
      fs.mkdirSync(path.join(prefix, 'lib'), { recursive: true });
      for (const lib of fs.readdirSync(libs).filter((f) => f.endsWith('.a'))) fs.copyFileSync(path.join(libs, lib), path.join(prefix, 'lib', lib));
      fs.cpSync(path.join(src, 'include'), path.join(prefix, 'include', 'flite'), { recursive: true, filter: (f) => !f.endsWith('Makefile') });
    },
  },
  {
    name: 'sphinxbase',
    version: '5prealpha',
    file: 'sphinxbase_0.8+5prealpha+1.orig.tar.gz',
    pool: 's/sphinxbase',
    sha256: 'f72bdb59e50b558bed47cc2105777200d2b246a0f328e913de16a9b22f9a246f',
    licence: 'BSD-2-Clause (CMU)',
    licenceFiles: ['LICENSE'],
    // its audio-device library (unused by voxd) takes PulseAudio or ALSA when the build machine has their headers,
    // and its pkg-config file would then ask every link for them: told they are absent, it takes plain OSS
    build: (src, prefix, jobs, host) =>
      autotools(src, prefix, jobs, host, ['--without-python', '--without-lapack', 'ac_cv_header_pulse_pulseaudio_h=no', 'ac_cv_header_alsa_asoundlib_h=no']),
  },
  {
    name: 'pocketsphinx',
    version: '5prealpha',
    file: 'pocketsphinx_0.8+5prealpha+1.orig.tar.gz',
    pool: 'p/pocketsphinx',
    sha256: 'ef5bb5547e2712bdf571f256490ef42a47962033892efd9d7df8eed7fe573ed9',
    licence: 'BSD-2-Clause (CMU)',
    licenceFiles: ['LICENSE'],
    build: (src, prefix, jobs, host) => {
      autotools(src, prefix, jobs, host, ['--without-python']);
      // the en-us acoustic model, language model and dictionary the `sphinx` model decodes with
      const model = path.join(prefix, 'share', 'pocketsphinx', 'model', 'en-us');
      fs.rmSync(model, { recursive: true, force: true });
      fs.cpSync(path.join(src, 'model', 'en-us'), model, { recursive: true, filter: (f) => !/phone\.lm\.bin$|Makefile/.test(f) });
    },
  },
  {
    name: 'ffmpeg',
    version: '5.1.9',
    file: 'ffmpeg_5.1.9.orig.tar.xz',
    pool: 'f/ffmpeg',
    sha256: 'd9b593bb2ba93d4b50f74177e0cdcd41747e708596367deed0c30348a71dd176',
    licence: 'LGPL-2.1-or-later',
    licenceFiles: ['COPYING.LGPLv2.1', 'LICENSE.md'],
    options: FFMPEG_COMPONENTS,
    build: (src, prefix, jobs, host) => {
      // a cross build names the target; pkg-config stays this machine's, reading the prefix's files only
      const cross = host
        ? ['--enable-cross-compile', `--cross-prefix=${host}-`, `--arch=${host.split('-')[0]}`, '--target-os=linux', '--pkg-config=pkg-config']
        : [];
      const components = Object.entries(FFMPEG_COMPONENTS).map(([kind, names]) => `--enable-${kind}=${names.join(',')}`);
      run(
        './configure',
        [
          `--prefix=${prefix}`,
          '--pkg-config-flags=--static',
          `--extra-cflags=-I${prefix}/include`,
          `--extra-ldflags=-L${prefix}/lib`,
          '--enable-pic',
          '--enable-static',
          '--disable-shared',
          '--disable-autodetect', // nothing of the build machine's libraries gets in by chance
          '--disable-everything',
          '--disable-programs',
          '--disable-doc',
          '--disable-network',
          '--disable-avdevice',
          '--disable-avfilter',
          '--disable-swscale',
          '--disable-postproc',
          '--disable-x86asm', // no nasm needed; audio decoding is a small part of voxd's time
          '--enable-swresample',
          '--enable-libmp3lame',
          '--enable-libvorbis',
          '--enable-libopus',
          ...cross,
          ...components,
        ],
        src,
        prefixPkgConfig(prefix),
      );
      run('make', [`-j${jobs}`], src);
      run('make', ['install'], src);
    },
  },
  {
    name: 'espeak-ng',
    version: '1.51',
    file: 'espeak-ng_1.51+dfsg.orig.tar.gz',
    pool: 'e/espeak-ng',
    sha256: '72242d7c06a4d80f5056335977c5be1ff79ff27bb502d4d054be1803ff787fa9',
    // bookworm's 1.51+dfsg-10+deb12u2, the source builds' libespeak-ng: its fixes of CVE-2023-49990 to 49994 among them
    debianPatches: { file: 'espeak-ng_1.51+dfsg-10+deb12u2.debian.tar.xz', sha256: '7b8155d1d735ed4eb493945f7bec24895a4f70f96eade430f138bf1af7821210' },
    licence: 'GPL-3.0-or-later',
    licenceFiles: ['COPYING', 'COPYING.APACHE', 'COPYING.BSD2', 'COPYING.UCD'],
    options: [ESPEAK_DICTIONARIES, ESPEAK_VOICES, ESPEAK_TABLES],
    build: (src, prefix, jobs, host) => {
      if (!fs.existsSync(path.join(src, 'configure'))) run('./autogen.sh', [], src);
      // phonemes only: no audio output, speed-up, MBROLA, Klatt or speechPlayer (C++), no threads of its own
      const without = ['pcaudiolib', 'sonic', 'async', 'mbrola', 'klatt', 'speechplayer', 'extdict-ru', 'extdict-cmn', 'extdict-yue'];
      const env = { CFLAGS: '-O2 -fPIC', ...prefixPkgConfig(prefix) };
      const configure = [`--prefix=${prefix}`, '--disable-shared', '--enable-static', '--with-pic', ...without.map((w) => `--without-${w}`), ...hostArgs(host)];
      run('./configure', configure, src, env);
      // the library, the program that compiles the data (another architecture's runs through qemu: scripts/cross.mjs), the phoneme tables and Kokoro's dictionaries (not all 100)
      run('make', [`-j${jobs}`, 'src/libespeak-ng.la', 'src/espeak-ng'], src, env);
      run('make', ['espeak-ng-data/phontab', ...ESPEAK_DICTIONARIES], src, env);
      fs.mkdirSync(path.join(prefix, 'lib'), { recursive: true });
      fs.copyFileSync(path.join(src, 'src', '.libs', 'libespeak-ng.a'), path.join(prefix, 'lib', 'libespeak-ng.a'));
      fs.cpSync(path.join(src, 'src', 'include', 'espeak-ng'), path.join(prefix, 'include', 'espeak-ng'), { recursive: true });
      // where the library looks by default (configure's datadir), so the native tests find it too
      const data = path.join(prefix, 'share', 'espeak-ng-data');
      fs.rmSync(data, { recursive: true, force: true });
      const files = [...ESPEAK_TABLES, ...ESPEAK_DICTIONARIES.map((l) => `${l}_dict`), ...ESPEAK_VOICES.map((v) => path.join('lang', v))];
      for (const file of files) fs.cpSync(path.join(src, 'espeak-ng-data', file), path.join(data, file));
    },
  },
];

/**
 * @param {string} cmd
 * @param {string[]} args
 * @param {string} cwd
 * @param {NodeJS.ProcessEnv} [env] added to the environment
 */
function run(cmd, args, cwd, env = {}) {
  const result = spawnSync(cmd, args, {
    cwd,
    env: { ...process.env, ...emulation, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    encoding: 'utf8',
    maxBuffer: 1 << 28,
  });
  const logFile = buildLog;
  fs.appendFileSync(logFile, `\n$ (${relative(cwd)}) ${cmd} ${args.join(' ')}\n${result.stdout}${result.stderr}`);
  if (result.status !== 0) {
    throw new InstallError(
      `${cmd} ${args.slice(0, 3).join(' ')} failed in ${relative(cwd)}:\n${(result.stderr || result.stdout).trim().split('\n').slice(-25).join('\n')}\n(full log: ${relative(logFile)})`,
    );
  }
}

/**
 * pkg-config of the prefix only: no library of the build machine is taken by chance.
 * @param {string} prefix
 */
const prefixPkgConfig = (prefix) => ({ PKG_CONFIG_PATH: '', PKG_CONFIG_LIBDIR: path.join(prefix, 'lib', 'pkgconfig') });

/** The log of the build under way (buildBundledDeps sets it: one per architecture). */
let buildLog = path.join(bundledDirs().dir, 'build.log');
/** What a program of the target needs to run under qemu in a cross build (espeak-ng's data compiler), else nothing. */
let emulation = {};

/**
 * configure's options for a cross build: the target's triple, whose compilers and tools (`<triple>-gcc`, `-ar`, ...)
 * configure then takes.
 * @param {string | null} host
 */
const hostArgs = (host) => (host ? [`--host=${host}`] : []);

/**
 * configure && make && make install, static and position-independent.
 * @param {string} src
 * @param {string} prefix
 * @param {number} jobs
 * @param {string | null} host
 * @param {string[]} extra
 */
function autotools(src, prefix, jobs, host, extra) {
  const env = { CFLAGS: '-O2 -fPIC', ...prefixPkgConfig(prefix) };
  run('./configure', [`--prefix=${prefix}`, '--disable-shared', '--enable-static', '--with-pic', ...hostArgs(host), ...extra], src, env);
  run('make', [`-j${jobs}`], src, env);
  run('make', ['install'], src, env);
}

/** @param {string} src flite's build directory is named by its target triple */
function fliteTarget(src) {
  const build = path.join(src, 'build');
  const [target] = fs.readdirSync(build);
  if (!target) throw new InstallError(`flite built nothing in ${relative(build)}`);
  return target;
}

/** @param {string} file */
function sha256Of(file) {
  return createHash('sha256').update(fs.readFileSync(file)).digest('hex');
}

/**
 * The dependency's tarball in the pack cache, downloaded when missing and checked against its pin.
 * @param {Pick<BundledDep, 'file' | 'pool' | 'sha256'>} dep
 */
export async function bundledTarball(dep) {
  const file = path.join(PACKS, dep.file);
  if (fs.existsSync(file) && sha256Of(file) === dep.sha256) return file;
  fs.mkdirSync(PACKS, { recursive: true });
  const failures = [];
  for (const mirror of MIRRORS) {
    const url = `${mirror}/${dep.pool}/${encodeURIComponent(dep.file)}`;
    try {
      const response = await fetch(url, { signal: AbortSignal.timeout(300_000) });
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      const bytes = Buffer.from(await response.arrayBuffer());
      const digest = createHash('sha256').update(bytes).digest('hex');
      if (digest !== dep.sha256) throw new Error(`SHA-256 ${digest}, pinned ${dep.sha256}`);
      fs.writeFileSync(`${file}.tmp`, bytes);
      fs.renameSync(`${file}.tmp`, file);
      log(`fetched ${url} (${(bytes.length / 2 ** 20).toFixed(1)} MB, SHA-256 checked)`);
      return file;
    } catch (error) {
      failures.push(`${url}: ${/** @type {Error} */ (error).message}`);
    }
  }
  throw new InstallError(`could not fetch ${dep.file}:\n  ${failures.join('\n  ')}`);
}

/**
 * Applies the patches of a Debian packaging tarball (its debian/patches/series, in order) to the source in `src`.
 * @param {{ file: string, sha256: string }} patches
 * @param {string} pool
 * @param {string} src
 */
async function applyDebianPatches(patches, pool, src) {
  const tarball = await bundledTarball({ file: patches.file, sha256: patches.sha256, pool });
  execFileSync('tar', ['xf', tarball, '-C', src]);
  const dir = path.join(src, 'debian', 'patches');
  for (const patch of fs.readFileSync(path.join(dir, 'series'), 'utf8').split('\n')) {
    const name = patch.replace(/#.*/, '').trim();
    if (name) run('patch', ['-p1', '-i', path.join(dir, name)], src);
  }
}

/**
 * What a library's build depends on: its tarball, its recipe and the helpers it calls (whitespace and trailing
 * commas aside, so that reformatting this file rebuilds nothing) and its options.
 * @param {BundledDep} dep
 */
const stampOf = (dep) => {
  const recipe = [dep.build, autotools, hostArgs, prefixPkgConfig, run, applyDebianPatches]
    .map(String)
    .join('\n')
    .replace(/\s+/g, '')
    .replace(/,([\])}])/g, '$1');
  return `${dep.file} ${dep.sha256}${dep.debianPatches ? ` ${dep.debianPatches.sha256}` : ''} ${createHash('sha256')
    .update(recipe)
    .update(JSON.stringify(dep.options ?? null))
    .digest('hex')}`;
};

/**
 * Builds every bundled library of `arch` (default: this machine's; another is cross-compiled, scripts/cross.mjs) into
 * its prefix (those whose stamp matches are kept); returns the prefix.
 * @param {{ jobs?: number, arch?: string }} [options]
 */
export async function buildBundledDeps({ jobs = Number(process.env.VOXD_BUILD_JOBS) || os.availableParallelism(), arch } = {}) {
  const { dir, prefix } = bundledDirs(arch);
  const cross = crossTarget(arch);
  const host = cross?.triple ?? null;
  fs.mkdirSync(dir, { recursive: true });
  buildLog = path.join(dir, 'build.log');
  emulation = cross ? emulationEnv(cross) : {};
  let rebuildRest = false; // a library rebuilt means those after it (which may link it) are rebuilt too
  for (const dep of BUNDLED_DEPS) {
    const stampFile = path.join(prefix, 'stamps', dep.name);
    if (!rebuildRest && fs.existsSync(stampFile) && fs.readFileSync(stampFile, 'utf8') === stampOf(dep)) continue;
    rebuildRest = true;
    const tarball = await bundledTarball(dep);
    const src = path.join(dir, 'src', dep.name);
    fs.rmSync(src, { recursive: true, force: true });
    fs.mkdirSync(src, { recursive: true });
    execFileSync('tar', ['xf', tarball, '-C', src, '--strip-components=1']);
    if (dep.debianPatches) await applyDebianPatches(dep.debianPatches, dep.pool, src);
    const started = Date.now();
    log(`building ${dep.name} ${dep.version} (static, position-independent${host ? `, for ${host}` : ''}) into ${relative(prefix)}`);
    dep.build(src, prefix, jobs, host);
    const licences = path.join(prefix, 'licences', dep.name);
    fs.mkdirSync(licences, { recursive: true });
    for (const name of dep.licenceFiles) fs.copyFileSync(path.join(src, name), path.join(licences, name));
    fs.mkdirSync(path.dirname(stampFile), { recursive: true });
    fs.writeFileSync(stampFile, stampOf(dep));
    log(`built ${dep.name} in ${formatDuration(Date.now() - started)}`);
  }
  return prefix;
}
