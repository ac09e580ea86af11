/**
 * `npm run fuzz`, briefly: for each target, the runner replays the recorded crashers and fuzzes for the target's
 * share of about a minute with a fixed seed (the same inputs every run, as many as fit), and finds nothing.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { it } from 'node:test';
import { CRASHERS_DIR } from '../fuzz/target.js';
import { ROOT } from '../helpers/paths.js';
import { FLITE_INSTALLED } from '../helpers/transcripts.js';

const RUNNER = path.join(ROOT, 'dist', 'test', 'fuzz', 'run.js');

/** Seconds of fuzzing per target (setup and the replay of its crashers included), and the fewest cases that is. */
const TARGETS: { name: string; seconds: number; minCases: number; skip: string | false }[] = [
  { name: 'flite-text', seconds: 10, minCases: 20, skip: FLITE_INSTALLED ? false : 'Debian libflite1 is not installed' },
  { name: 'http-request', seconds: 15, minCases: 100, skip: false },
  { name: 'audio-file', seconds: 10, minCases: 200, skip: false },
  { name: 'realtime-events', seconds: 10, minCases: 10, skip: false },
  { name: 'abort-mix', seconds: 20, minCases: 1, skip: false },
];

for (const { name, seconds, minCases, skip } of TARGETS) {
  it(`fuzzes ${name} for ${seconds} s and finds nothing`, { skip }, async (t) => {
    const child = spawn(process.execPath, [RUNNER, '--seconds', String(seconds), '--seed', 'npm-test', '--target', name], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
    const code = await new Promise<number | null>((resolve) => child.once('close', resolve));
    t.diagnostic(output.trim());

    assert.equal(code, 0, output);
    const report = new RegExp(`^${name}: (\\d+) cases .* (\\d+) recorded crashers replayed; 0 crashes, 0 hangs, 0 failures$`, 'm').exec(output);
    assert.ok(report, output);
    const crashers = path.join(CRASHERS_DIR, name);
    const recorded = fs.existsSync(crashers) ? fs.readdirSync(crashers).length : 0;
    assert.equal(Number(report[2]), recorded, 'every recorded crasher replayed');
    assert.ok(Number(report[1]) >= minCases, `${report[1]} cases`);
  });
}
