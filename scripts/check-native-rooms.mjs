#!/usr/bin/env node
// Part of `npm run lint`: holds the wall between the native side's two rooms (docs/architecture.md "The native
// side"). native/src/engine/ is pure engine code: it includes nothing of Node (napi.h, node_api.h, uv.h) and nothing
// of the addon. native/src/addon/ binds engines to JS: it calls no engine library (whisper.cpp, llama.cpp, libmtmd,
// ggml, pocketsphinx, flite, espeak-ng, FFmpeg) itself, only the engine room's own functions. The build holds the first rule
// too (voxd_engine has no Node include path); this check names the file and the line.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const nativeDir = path.join(root, 'native', 'src');

const nodeHeader = /#\s*include\s*[<"](napi\.h|node_api\.h|node\.h|uv\.h|js_native_api\.h)[>"]/;
const addonHeader = /#\s*include\s*"(async\.h|bindings\.h|pcm-stream\.h|addon\/[^"]+)"/;
const engineLibraryCall = /\b(whisper|llama|mtmd|clip|gguf|ggml|ps|cmd_ln|flite|cst|espeak|av|avcodec|avformat|avio|swr|swresample)_\w+\s*\(/;

/** @param {string} dir */
function sourcesUnder(dir) {
  return fs
    .readdirSync(dir, { recursive: true })
    .map(String)
    .filter((f) => /\.(cpp|h)$/.test(f))
    .map((f) => path.relative(root, path.join(dir, f)));
}

// Comments and string literals say what they like; only code counts. Newlines are kept for line numbers.
/** @param {string} text */
function codeOnly(text) {
  return text.replace(/\/\*[\s\S]*?\*\/|\/\/[^\n]*|"(?:[^"\\\n]|\\.)*"/g, (m) => (m.startsWith('"') ? '""' : m.replace(/[^\n]/g, ' ')));
}

/** @type {string[]} */
const problems = [];
for (const file of sourcesUnder(path.join(nativeDir, 'engine'))) {
  fs.readFileSync(path.join(root, file), 'utf8')
    .split('\n')
    .forEach((/** @type {string} */ line, /** @type {number} */ i) => {
      if (nodeHeader.test(line)) problems.push(`${file}:${i + 1}: engine code includes a Node header: ${line.trim()}`);
      if (addonHeader.test(line)) problems.push(`${file}:${i + 1}: engine code includes an addon header: ${line.trim()}`);
    });
}
for (const file of sourcesUnder(path.join(nativeDir, 'addon'))) {
  codeOnly(fs.readFileSync(path.join(root, file), 'utf8'))
    .split('\n')
    .forEach((/** @type {string} */ line, /** @type {number} */ i) => {
      const call = engineLibraryCall.exec(line);
      if (call) problems.push(`${file}:${i + 1}: a binding calls an engine library (${call[0].replace(/\s*\($/, '')}): move the call into native/src/engine`);
    });
}

for (const problem of problems) console.error(`[voxd lint] ${problem}`);
if (problems.length > 0) {
  console.error('[voxd lint] the native rooms are mixed: engine code knows nothing of Node; bindings call only engine code (docs/architecture.md)');
  process.exit(1);
}
