/** voxd's version, from its package.json (the CLI's --version, the Wyoming `info`). */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const packageJson = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'package.json');

export const VOXD_VERSION = (JSON.parse(fs.readFileSync(packageJson, 'utf8')) as { version: string }).version;
