#!/usr/bin/env node
// Builds the web interface into ui/dist (docs/ui.md): one minified ES module and one stylesheet, both named by
// content hash, and index.html pointing at them. The AudioWorklet that captures the microphone is bundled first
// and embedded in the main module as text (a worklet must be its own module; a blob: URL spares a request).
// `npm install` runs it through `prepare`; `npm test` and `npm run build:ui` run it too.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as esbuild from 'esbuild';

const here = path.dirname(fileURLToPath(import.meta.url));
const outDir = path.join(here, 'dist');
/** @type {esbuild.BuildOptions} */
const common = { bundle: true, minify: true, format: 'esm', target: ['chrome111', 'firefox115', 'safari16.4'], legalComments: 'none', logLevel: 'warning' };

const worklet = await esbuild.build({ ...common, entryPoints: [path.join(here, 'src', 'pcm-worklet.ts')], write: false });

fs.rmSync(outDir, { recursive: true, force: true });
const result = await esbuild.build({
  ...common,
  entryPoints: { main: path.join(here, 'src', 'main.tsx') },
  outdir: path.join(outDir, 'assets'),
  entryNames: '[name]-[hash]',
  jsx: 'automatic',
  jsxImportSource: 'preact',
  define: { PCM_WORKLET_SOURCE: JSON.stringify(worklet.outputFiles[0].text) },
  metafile: true,
});

const outputs = Object.keys(result.metafile.outputs).map((file) => '/' + path.relative(outDir, file).split(path.sep).join('/'));
const script = outputs.find((file) => file.endsWith('.js'));
const stylesheet = outputs.find((file) => file.endsWith('.css'));
const html = fs
  .readFileSync(path.join(here, 'index.html'), 'utf8')
  .replace('<!--voxd-assets-->', `<link rel="stylesheet" href="${stylesheet}" />\n    <script type="module" src="${script}"></script>`);
fs.writeFileSync(path.join(outDir, 'index.html'), html);
console.log(`[voxd ui] built ${script} and ${stylesheet} into ui/dist`);
