/**
 * `npm run fuzz`, briefly: the runner replays the recorded crashers and fuzzes the flite engine's text for
 * FUZZ_SECONDS with a fixed seed (the same inputs every run, as many as fit), and finds nothing.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { it } from 'node:test';
import { CRASHERS_DIR } from './fuzz/target.js';
import { ROOT } from './helpers/paths.js';
import { FLITE_INSTALLED } from './helpers/transcripts.js';

const FUZZ_SECONDS = 20;
const RUNNER = path.join(ROOT, 'dist', 'test', 'fuzz', 'run.js');

it(
  `fuzzes the flite engine's text for ${FUZZ_SECONDS} s and finds nothing`,
  { skip: FLITE_INSTALLED ? false : 'Debian libflite1 is not installed' },
  async (t) => {
    const child = spawn(process.execPath, [RUNNER, '--seconds', String(FUZZ_SECONDS), '--seed', 'npm-test', '--target', 'flite-text'], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
    const code = await new Promise<number | null>((resolve) => child.once('close', resolve));
    t.diagnostic(output.trim());

    assert.equal(code, 0, output);
    const report = /^flite-text: (\d+) cases .* (\d+) recorded crashers replayed; 0 crashes, 0 hangs, 0 failures$/m.exec(output);
    assert.ok(report, output);
    const recorded = fs.readdirSync(path.join(CRASHERS_DIR, 'flite-text')).length;
    assert.equal(Number(report[2]), recorded, 'every recorded crasher replayed');
    assert.ok(Number(report[1]) >= 20, `${report[1]} cases`);
  },
);
