/**
 * A model that would not fit in memory is refused before its engine loads it (docs/models.md, "Loading and
 * unloading"), with the numbers: a load that cannot fit would otherwise end in swapping or the OOM killer.
 */
import os from 'node:os';
import { ApiError } from '../errors.js';
import { formatBytes } from './hub/progress.js';

/**
 * Memory this process can still take: what the system has available (Linux's MemAvailable: free memory and cache it
 * can reclaim), and within a container's limit what the limit leaves above this process's resident set.
 */
export function availableMemoryBytes(): number {
  const available = os.freemem();
  // Node 22 reads the cgroup's own account; Node 20 gives the limit alone (0 or far above the machine's memory when none)
  const own = (process as { availableMemory?: () => number }).availableMemory?.();
  if (own !== undefined) return Math.min(available, own);
  const limit = process.constrainedMemory?.() ?? 0;
  if (limit <= 0 || limit >= os.totalmem()) return available;
  return Math.min(available, Math.max(0, limit - process.memoryUsage().rss));
}

/** Throws 507 insufficient_memory when a model whose weights take `bytes` would not fit. */
export function ensureMemoryFor(modelId: string, bytes: number, available = availableMemoryBytes()): void {
  if (bytes <= available) return;
  throw new ApiError(
    'insufficient_memory',
    `model ${modelId} needs about ${formatBytes(bytes)} of memory for its weights, and ${formatBytes(available)} is available: ` +
      'unload another model (DELETE /v1/models), lower --max-loaded-models, or use a smaller quantisation',
    { param: 'model' },
  );
}
