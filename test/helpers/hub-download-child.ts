/**
 * A process of its own for the shared-cache tests: `node hub-download-child.js <endpoint> <cacheDir> <repo> <file>`
 * downloads one file with its own HubClient, logs as JSON lines on stderr, and prints `{"path", "sha256"}` (of the bytes
 * it then reads at that path) as one line on stdout.
 */
import { createHash } from 'node:crypto';
import fsp from 'node:fs/promises';
import { HubClient, type HubLogger } from '../../src/services/hub.js';

const [endpoint, cacheDir, repo, file] = process.argv.slice(2);
if (endpoint === undefined || cacheDir === undefined || repo === undefined || file === undefined) {
  process.stderr.write('usage: hub-download-child.js <endpoint> <cacheDir> <repo> <file>\n');
  process.exit(2);
}

const logLine =
  (level: string) =>
  (fields: object, msg = ''): void =>
    void process.stderr.write(`${JSON.stringify({ level, msg, ...fields })}\n`);
const logger: HubLogger = { info: logLine('info'), warn: logLine('warn') };

const client = new HubClient({ endpoint, cacheDir, offline: false, logger });
const filePath = await client.downloadFile(repo, file);
const sha256 = createHash('sha256')
  .update(await fsp.readFile(filePath))
  .digest('hex');
process.stdout.write(`${JSON.stringify({ path: filePath, sha256 })}\n`);
