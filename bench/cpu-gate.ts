/**
 * Models computing at once, with and without the process-wide lease on the cores (`npm run bench:cpu-gate`;
 * docs/architecture.md "Sharing the cores").
 *
 * Runs the same work in child processes, one with the leases (the default) and one with VOXD_CPU_GATE=0 in turn for
 * each of `--rounds` rounds, so that both see the same machine:
 * random-weight Whisper (base.en), Pocket TTS and Qwen3-TTS models (scripts/make-*-test-model.mjs) loaded through the
 * addon with their default thread counts; a round times a Whisper transcription of jfk.wav alone, four Pocket
 * syntheses alone, two Qwen3 syntheses alone, then all of it at once, and counts the CPU time each part took. It
 * prints, per mode, the median over the rounds of "all at once" against the three parts one after another, in wall
 * time and in CPU time.
 *
 * The target: with the leases, all at once takes no longer than 1.2x the parts one after another (each part already
 * uses every core, so at once can only share them). The exit status is 1 when it is missed.
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import type { NativeTtsGgmlRequest, NativeWhisperParams } from '../src/native/addon.js';
import { loadNative } from '../src/native/load.js';
import { mixModels } from '../test/helpers/abort-mix.js';
import { JFK_WAV } from '../test/helpers/paths.js';
import { readWavMono } from '../test/helpers/wav.js';
import { median } from './stats.js';

const { values: flags } = parseArgs({ options: { rounds: { type: 'string', default: '5' }, child: { type: 'boolean', default: false } } });
const rounds = Number(flags.rounds);
const TARGET = 1.2;

interface Timing {
  ms: number;
  cpuMs: number;
}
interface Round {
  capacity: number;
  alone: Timing;
  together: Timing;
}

async function timed(work: () => Promise<unknown>): Promise<Timing> {
  const cpu = process.cpuUsage();
  const started = performance.now();
  await work();
  const used = process.cpuUsage(cpu);
  return { ms: performance.now() - started, cpuMs: (used.user + used.system) / 1000 };
}

/** The work, in this process: what a child runs and reports on stdout as JSON. */
async function child(): Promise<void> {
  const native = loadNative();
  const models = await mixModels('base');
  const whisper = await native.WhisperModel.load(models.whisper, { maxBatch: 8 });
  const ttsFiles = (dir: string, name: string): { model: string; mmproj: string } => ({ model: `${dir}/${name}.gguf`, mmproj: `${dir}/mmproj-${name}.gguf` });
  const pocket = await native.TtsGgmlModel.load({ ...ttsFiles(models.pocket, 'pocket-tts-tiny-random-f16'), sequences: 9 });
  const qwen = await native.TtsGgmlModel.load({ ...ttsFiles(models.qwen, 'qwen3-tts-tiny-random-f16'), sequences: 9 });
  const { samples } = readWavMono(JFK_WAV);
  const params: NativeWhisperParams = {
    language: 'en',
    translate: false,
    initialPrompt: null,
    temperature: 0,
    temperatureInc: 0,
    maxTokens: 64,
    wordTimestamps: false,
  };
  const speech: NativeTtsGgmlRequest = {
    text: 'The quick brown fox jumps over the lazy dog. It was a sunny day.',
    reference: null,
    language: null,
    seed: 1,
    temperature: null,
    maxFrames: null,
  };
  const transcribe = (): Promise<unknown> => whisper.transcribe(samples, params, null);
  const pockets = (): Promise<unknown> => Promise.all(Array.from({ length: 4 }, () => pocket.synthesize(speech)));
  const qwens = (): Promise<unknown> => Promise.all(Array.from({ length: 2 }, () => qwen.synthesize(speech)));
  await Promise.all([transcribe(), pockets(), qwens()]); // warm-up: first graphs, allocations
  const parts = [await timed(transcribe), await timed(pockets), await timed(qwens)];
  const alone = { ms: parts.reduce((s, p) => s + p.ms, 0), cpuMs: parts.reduce((s, p) => s + p.cpuMs, 0) };
  const together = await timed(() => Promise.all([transcribe(), pockets(), qwens()]));
  whisper.release();
  pocket.release();
  qwen.release();
  const round: Round = { capacity: native.systemInfo().cpuGate.capacity, alone, together };
  console.log(JSON.stringify(round));
}

function runRound(gate: boolean): Round {
  const result = spawnSync(process.execPath, [fileURLToPath(import.meta.url), '--child'], {
    env: { ...process.env, VOXD_CPU_GATE: gate ? '1' : '0' },
    encoding: 'utf8',
    maxBuffer: 16 * 1024 * 1024,
  });
  const line = result.stdout.split('\n').find((l) => l.startsWith('{'));
  if (result.status !== 0 || !line) throw new Error(`the ${gate ? 'gated' : 'ungated'} run failed (${result.status}): ${result.stderr.slice(-2000)}`);
  return JSON.parse(line) as Round;
}

if (flags.child) {
  await child();
} else {
  const runs: Record<'on' | 'off', Round[]> = { on: [], off: [] };
  for (let i = 0; i < rounds; i++) {
    runs.on.push(runRound(true));
    runs.off.push(runRound(false));
  }
  const ratios: Record<string, number> = {};
  for (const [mode, report] of Object.entries(runs)) {
    const label = `leases ${mode}`;
    const ratio = median(report.map((r) => r.together.ms / r.alone.ms));
    const cpuRatio = median(report.map((r) => r.together.cpuMs / r.alone.cpuMs));
    ratios[label] = ratio;
    const together = median(report.map((r) => r.together.ms)) / 1000;
    const alone = median(report.map((r) => r.alone.ms)) / 1000;
    console.log(
      `${label.padEnd(10)} (${report[0]?.capacity} cores): all at once ${together.toFixed(2)} s, one after another ${alone.toFixed(2)} s: ` +
        `${ratio.toFixed(2)}x the time, ${cpuRatio.toFixed(2)}x the CPU time (median of ${rounds} rounds)`,
    );
  }
  const gated = ratios['leases on'] as number;
  console.log(`all at once with the leases: ${gated.toFixed(2)}x one after another (target <= ${TARGET})`);
  process.exitCode = gated <= TARGET ? 0 : 1;
}
