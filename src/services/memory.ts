/**
 * A model that would not fit in memory is refused before its engine loads it (docs/models.md, "Loading and
 * unloading"), with the numbers: a load that cannot fit would otherwise end in swapping or the OOM killer.
 */
import os from 'node:os';
import { ApiError } from '../errors.js';
import { formatBytes } from './hub/progress.js';

/**
 * Memory this process can still take, or null where it cannot be told. On Linux: what the system has available
 * (MemAvailable: free memory and the cache it can reclaim, the model's own just-downloaded file included), and within
 * a container's limit what the limit leaves above this process. Elsewhere the system reports free pages only, far
 * below what it would give, so no model is refused there.
 */
export function availableMemoryBytes(): number | null {
  if (process.platform !== 'linux') return null;
  const available = os.freemem();
  if (available <= 0) return null;
  // the cgroup's own count would hold the page cache against the model; this process's resident set does not
  const limit = process.constrainedMemory() ?? 0;
  if (limit <= 0 || limit >= os.totalmem()) return available;
  return Math.min(available, Math.max(0, limit - process.memoryUsage.rss()));
}

/** Throws 507 insufficient_memory when a model that takes `bytes` would not fit (never where that cannot be told). */
export function ensureMemoryFor(modelId: string, bytes: number, available = availableMemoryBytes()): void {
  if (available === null || bytes <= available) return;
  throw new ApiError(
    'insufficient_memory',
    `model ${modelId} needs about ${formatBytes(bytes)} of memory, and ${formatBytes(available)} is available: ` +
      'unload another model (DELETE /v1/models), lower --max-loaded-models, or use a smaller quantisation',
    { param: 'model' },
  );
}
