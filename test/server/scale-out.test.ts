/**
 * bench/scale-out in its short form (docs/deploy.md#nginx-in-front): Debian's nginx with deploy/nginx/voxd.conf in
 * front of three real voxd instances under mixed load (transcriptions, speech, separations, six realtime
 * sessions), through a rolling restart (SIGTERM: no request fails, no turn is lost, the drained sessions continue
 * elsewhere) and a SIGKILL (only what was in flight on the killed instance fails, each with a clear error; all that
 * was sent after it succeeds). The benchmark decides; this test runs it and reads its verdict.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { describe, it } from 'node:test';
import { NO_NGINX } from '../helpers/nginx.js';
import { ROOT } from '../helpers/paths.js';
import { killGroup } from '../helpers/process.js';
import { SPHINX_INSTALLED } from '../helpers/transcripts.js';

const BENCH = path.join(ROOT, 'dist', 'bench', 'scale-out.js');
const LIMIT_MS = 240_000;

describe('three instances behind nginx (bench/scale-out --short)', () => {
  const skip = NO_NGINX || (SPHINX_INSTALLED ? false : 'pocketsphinx-en-us is not installed');
  it('loses nothing in a rolling restart, and only what was in flight on an instance that is killed', { skip }, async () => {
    // its own process group: past the limit, nginx and the instances it started go with it
    const child = spawn(process.execPath, [BENCH, '--short'], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    let output = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
    const timer = setTimeout(() => killGroup(child.pid), LIMIT_MS);
    const code = await new Promise<number | null>((resolve) => child.once('close', resolve));
    clearTimeout(timer);
    assert.equal(code, 0, output);
    for (const line of [
      /ok +the drained instance exited 0/,
      /ok +rolling restart: 0 failed requests or lost turns/,
      /ok +the drain moved [1-9]\d* sessions/,
      /ok +kill: \d+ in flight on the killed instance failed with a clear error; of [1-9]\d* sent after it, 0 failed/,
      /ok +failures other than those in flight at the kill: 0/,
    ])
      assert.match(output, line, output);
  });
});
