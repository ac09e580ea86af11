#!/usr/bin/env node
/**
 * `npm run docs:config`: rewrites the tables of docs/configuration.md that are made from the settings in
 * src/config.ts (flags, variables). It runs the compiled module, so `npm run docs:config` compiles first.
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const doc = path.join(root, 'docs', 'configuration.md');

/** @type {typeof import('../src/config.js')} */
const { withConfigurationTables } = await import(pathToFileURL(path.join(root, 'dist', 'src', 'config.js')).href);

const before = fs.readFileSync(doc, 'utf8');
const after = withConfigurationTables(before);
if (after === before) {
  console.log(`${path.relative(root, doc)} is up to date`);
} else {
  fs.writeFileSync(doc, after);
  console.log(`${path.relative(root, doc)}: tables rewritten`);
}
