/** A download that would not fit on the cache's disk is refused before it starts, with the numbers. */
import fsp from 'node:fs/promises';
import path from 'node:path';
import { HubError } from './errors.js';
import { formatBytes } from './progress.js';

/** Room left on the disk beside the download, so that finishing it does not leave the disk full. */
const HEADROOM_BYTES = 32 * 1024 * 1024;

/** Throws HubError('disk_full') when `bytes` more would not fit on the disk that holds `dir` (created or not yet). */
export async function ensureFreeSpace(dir: string, bytes: number, what: string): Promise<void> {
  if (bytes <= 0) return;
  let existing = path.resolve(dir);
  while (!(await fsp.stat(existing).catch(() => null))) existing = path.dirname(existing);
  const { bavail, bsize } = await fsp.statfs(existing);
  const free = bavail * bsize;
  if (bytes + HEADROOM_BYTES <= free) return;
  throw new HubError(
    'disk_full',
    `${what} needs ${formatBytes(bytes)} more on disk, and the disk that holds ${dir} has ${formatBytes(free)} free ` +
      `(voxd keeps ${formatBytes(HEADROOM_BYTES)} spare): free some space, or point HF_HUB_CACHE at a larger disk`,
  );
}
