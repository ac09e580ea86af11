/**
 * The addon when its environment goes away: worker_threads that load it are terminated while engine calls are in
 * flight (the decoder and encoder, the VAD, flite, pocketsphinx, a GGML TTS model's executor thread). The process
 * must neither crash nor hang, and no thread the addon started may outlive its worker (the environment's cleanup
 * hook stops the executors; an engine call ending after the environment is gone settles nothing). A streamed
 * synthesis stops once JS can no longer take its audio, rather than holding the worker's teardown until its end.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import { ROOT } from '../helpers/paths.js';
import type { TeardownMode } from '../helpers/teardown-worker.js';
import { FLITE_INSTALLED, SPHINX_INSTALLED } from '../helpers/transcripts.js';

const WORKER = path.join(ROOT, 'dist', 'test', 'helpers', 'teardown-worker.js');
const ROUNDS = 3;
/** How long terminate() may take with a synthesis in flight: the synthesis alone takes 13 s or more, a stop under 0.5 s. */
const TERMINATE_LIMIT_MS = 5000;
/** Frames of the worker's streamed synthesis: 13 to 22 s of work alone for the tiny Pocket TTS model on 2 cores. */
const SYNTHESIS_FRAMES = 4000;

function threadCount(): number {
  return Number(/^Threads:\s+(\d+)/m.exec(fs.readFileSync('/proc/self/status', 'utf8'))?.[1] ?? -1);
}

/** Starts a worker doing `mode`'s work, terminates it `delayMs` after the work began; resolves with terminate()'s time. */
async function terminateBusy(mode: TeardownMode, tts: { model: string; mmproj: string } | undefined, delayMs: number): Promise<number> {
  const worker = new Worker(WORKER, { workerData: { mode, tts, synthesisFrames: SYNTHESIS_FRAMES } });
  const said = await new Promise<string>((resolve, reject) => {
    worker.once('message', resolve);
    worker.once('error', reject);
    worker.once('exit', (code) => resolve(`exited with ${code}`));
  });
  assert.equal(said, 'busy', `${mode}: the worker started its work`);
  await sleep(delayMs);
  const started = performance.now();
  await worker.terminate();
  return performance.now() - started;
}

describe('the addon when a worker_thread that loaded it ends', () => {
  it('survives terminations with engine work in flight, and leaves no thread behind', async (t) => {
    const generator = (await import(pathToFileURL(path.join(ROOT, 'scripts', 'make-tts-test-model.mjs')).href)) as {
      makeTtsTestModel(options: { arch: string; size: 'tiny' }): Promise<{ model: string; mmproj: string }>;
    };
    const tts = await generator.makeTtsTestModel({ arch: 'pockettts', size: 'tiny' });
    const modes: TeardownMode[] = ['codec', 'vad', 'tts', ...(FLITE_INSTALLED ? ['flite' as const] : []), ...(SPHINX_INSTALLED ? ['sphinx' as const] : [])];
    // a first round warms what the process keeps for good: libuv's threads, the engines' libraries and backends
    for (const mode of modes) await terminateBusy(mode, tts, 0);
    await sleep(200);
    const before = threadCount();
    const slowest: Record<string, number> = {};
    for (let round = 0; round < ROUNDS; round++) {
      for (const mode of modes) slowest[mode] = Math.max(slowest[mode] ?? 0, await terminateBusy(mode, tts, round * 40));
    }
    await sleep(200);
    t.diagnostic(
      `terminate() took at most ${Object.entries(slowest)
        .map(([mode, ms]) => `${mode} ${ms.toFixed(0)} ms`)
        .join(', ')}`,
    );
    // Node waits for work in flight before the addon's cleanup hook runs, so a synthesis must stop once JS can no
    // longer take its audio, not run to its end (it used to: terminate() took up to 23 s)
    assert.ok(slowest.tts! < TERMINATE_LIMIT_MS, `terminate() waited ${slowest.tts!.toFixed(0)} ms for a synthesis of ${SYNTHESIS_FRAMES} frames`);
    assert.ok(threadCount() <= before, `threads: ${before} after the warm-up, ${threadCount()} after ${ROUNDS * modes.length} more workers`);
  });
});
