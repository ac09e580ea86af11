/**
 * Batched engines under clients that give up (`npm run bench:abort-mix`, issue 27): does a server keep answering
 * when a share of its clients abandon their requests mid-way?
 *
 * Starts a real server (`node dist/src/cli.js serve`) with random-weight Whisper, Pocket TTS and Qwen3-TTS models
 * (scripts/make-*-test-model.mjs) and runs the abort mix (test/helpers/abort-mix.ts) from `--clients` clients, each
 * sending one request after another: Whisper transcriptions (some streamed), speech from either TTS model in five
 * formats (some streamed), live Whisper sessions at real-time pace. Rounds of one minute alternate between the mix
 * with no client giving up and the mix where `--abort-share` of the requests are abandoned 0-3 s after they were sent,
 * so that both see the same machine; each side runs `--minutes` minutes. After each round (once its last requests
 * ended) it prints the round's requests by outcome, completed answers per minute, the longest wait and the server's
 * RSS.
 *
 * Targets: no request unanswered for longer than the server's job time limit (`--job-timeout-s`, passed on: 300 s, the
 * server's default, unless given), and the mix with aborts completing at least 80 % of the answers per minute of the
 * mix without. The exit status is 1 when a target was missed.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { mixModels, randomMixRequest, runMixRequest, type MixOptions, type MixOutcome } from '../test/helpers/abort-mix.js';
import { Rng, seedFrom } from '../test/fuzz/random.js';
import { rssMiB, startCliServer, stopCliServer } from './cli-server.js';

const { values: flags } = parseArgs({
  options: {
    minutes: { type: 'string', default: '5' },
    clients: { type: 'string', default: '9' },
    'abort-share': { type: 'string', default: '0.4' },
    'job-timeout-s': { type: 'string', default: '300' },
    whisper: { type: 'string', default: 'base' },
  },
});
const minutes = Number(flags.minutes);
const clients = Number(flags.clients);
const abortShare = Number(flags['abort-share']);
const boundMs = Number(flags['job-timeout-s']) * 1000;
const whisperSize = flags.whisper === 'tiny' ? 'tiny' : 'base';
const ROUND_MS = 60_000;
const THROUGHPUT_TARGET = 0.8;

const models = await mixModels(whisperSize);
const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'voxd-abort-mix-'));
const server = await startCliServer(scratch, ['--log-level', 'warn', '--job-timeout-s', String(boundMs / 1000)]);
const options: MixOptions = { base: server.base, models, boundMs, liveSeconds: 8, livePace: 1 };
console.log(`voxd on ${server.base} (pid ${server.pid}), ${os.availableParallelism()} cores, ${clients} clients, ${whisperSize} Whisper`);
// every model loaded first, so that no round pays for a load
for (const id of Object.values(models)) {
  const response = await fetch(`${server.base}/v1/models?model_name=${encodeURIComponent(id)}`, { method: 'POST' });
  if (!response.ok) throw new Error(`loading ${id}: ${response.status} ${await response.text()}`);
}

interface Side {
  label: string;
  abortShare: number;
  outcomes: MixOutcome[];
  ms: number;
}
const sides: Side[] = [
  { label: 'no aborts', abortShare: 0, outcomes: [], ms: 0 },
  { label: `${Math.round(abortShare * 100)} % aborted`, abortShare, outcomes: [], ms: 0 },
];

/** One round: every client sends requests until the round is over, then waits for its last one. */
async function round(side: Side, rng: Rng): Promise<MixOutcome[]> {
  const ends = performance.now() + ROUND_MS;
  const outcomes: MixOutcome[] = [];
  const client = async (): Promise<void> => {
    while (performance.now() < ends)
      outcomes.push(
        await runMixRequest(
          randomMixRequest(() => rng.float(), side.abortShare),
          options,
        ),
      );
  };
  const started = performance.now();
  await Promise.all(Array.from({ length: clients }, client));
  side.ms += performance.now() - started;
  return outcomes;
}

const perMinute = (side: Side): number => side.outcomes.filter((o) => o.result === 'ok').length / (side.ms / 60_000);
const rng = new Rng(seedFrom('abort-mix'));
for (let i = 0; i < 2 * minutes; i++) {
  const side = sides[i % 2] as Side;
  const outcomes = await round(side, rng);
  side.outcomes.push(...outcomes);
  const count = (result: MixOutcome['result']): number => outcomes.filter((o) => o.result === result).length;
  const errors = [...new Set(outcomes.filter((o) => o.result === 'error').map((o) => `${o.status} ${o.code}`))].join(', ');
  console.log(
    `round ${i + 1} (${side.label}): ${outcomes.length} requests, ${count('ok')} ok, ${count('aborted')} abandoned, ${count('error')} errors` +
      `${errors ? ` (${errors})` : ''}, ${count('no-answer')} unanswered; longest wait ${(Math.max(...outcomes.map((o) => o.ms)) / 1000).toFixed(1)} s; ` +
      `RSS ${rssMiB(server.pid).toFixed(0)} MiB`,
  );
}

const unanswered = sides.flatMap((s) => s.outcomes).filter((o) => o.result === 'no-answer');
const ratio = perMinute(sides[1] as Side) / perMinute(sides[0] as Side);
for (const side of sides) {
  const waits = side.outcomes.map((o) => o.ms);
  console.log(`${side.label}: ${perMinute(side).toFixed(1)} answers a minute, longest wait ${(Math.max(...waits) / 1000).toFixed(1)} s`);
}
console.log(`answers a minute with aborts / without: ${ratio.toFixed(2)} (target >= ${THROUGHPUT_TARGET})`);
console.log(`requests unanswered after ${boundMs / 1000} s: ${unanswered.length} (target 0)`);
const stopped = await stopCliServer(server);
fs.rmSync(scratch, { recursive: true, force: true });
process.exitCode = unanswered.length === 0 && ratio >= THROUGHPUT_TARGET && stopped === 0 ? 0 : 1;
