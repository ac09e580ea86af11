/** Files that readers never see half made: written under a temporary name beside the target, then renamed. */
import { randomUUID } from 'node:crypto';
import fsp from 'node:fs/promises';
import path from 'node:path';

/** Creates `target` under a temporary name, then renames it into place: readers never see it half made. */
export async function replaceAtomically(target: string, write: (temporary: string) => Promise<void>): Promise<void> {
  await fsp.mkdir(path.dirname(target), { recursive: true });
  const temporary = `${target}.${randomUUID()}.tmp`;
  try {
    await write(temporary);
    await fsp.rename(temporary, target);
  } catch (error) {
    await fsp.rm(temporary, { force: true });
    throw error;
  }
}
