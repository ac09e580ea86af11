/**
 * `npm run fuzz`: runs the fuzz targets for a bounded time and reports, per target, the cases run and what was
 * found. Each target first replays its recorded crashers (test/fuzz/crashers/<target>/), then fuzzes from its seed
 * corpus for its share of the time; every new crashing input is written there, to be committed as a test.
 *
 *   node dist/test/fuzz/run.js [--seconds 60] [--seed S] [--target NAME]...
 *
 * Exits 1 when anything was found (or a target could not run its cases), 0 otherwise. The seed is printed, so a
 * run can be repeated: the same seed gives the same inputs (though not the same count in the same time).
 */
import { randomInt } from 'node:crypto';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { Rng, seedFrom } from './random.js';
import { readCrashers, readSeeds, ROOT, saveCrasher, type Finding, type FuzzTarget } from './target.js';
import { TARGETS } from './targets.js';

interface TargetReport {
  cases: number;
  replayed: number;
  seconds: number;
  counts: Record<Finding['kind'], number>;
  /** One line per finding: what, and where its input is. */
  lines: string[];
  /** The target itself failed (setup, or a case that threw): its run stopped early. */
  broken: string | null;
}

const { values } = parseArgs({
  options: {
    seconds: { type: 'string', default: '60' },
    seed: { type: 'string' },
    target: { type: 'string', multiple: true },
  },
});
const seconds = Number(values.seconds);
if (!Number.isFinite(seconds) || seconds <= 0) throw new Error(`--seconds must be a positive number (got ${values.seconds})`);
const names = values.target ?? Object.keys(TARGETS);
const unknown = names.filter((name) => !Object.hasOwn(TARGETS, name));
if (unknown.length > 0) throw new Error(`unknown fuzz target ${unknown.join(', ')}; targets: ${Object.keys(TARGETS).join(', ')}`);
const seed = values.seed ?? String(randomInt(2 ** 31));

console.log(`fuzz: seed ${seed}, ${seconds} s over ${names.join(', ')}`);
const rng = new Rng(seedFrom(seed));
const deadline = performance.now() + seconds * 1000;
let findings = 0;
let broken = 0;
for (const [index, name] of names.entries()) {
  // what the earlier targets left (a skipped one leaves its share) is spread over this one and the rest
  const share = (deadline - performance.now()) / (names.length - index);
  const report = await fuzz(TARGETS[name]!(), rng.fork(name), share);
  if (!report) continue;
  const { counts } = report;
  findings += counts.crash + counts.hang + counts.failure;
  if (report.broken) broken++;
  console.log(
    `${name}: ${report.cases} cases in ${report.seconds.toFixed(1)} s (${(report.cases / report.seconds).toFixed(1)}/s), ` +
      `${report.replayed} recorded crashers replayed; ${counts.crash} crashes, ${counts.hang} hangs, ${counts.failure} failures`,
  );
  for (const line of report.lines) console.log(`  ${line}`);
  if (report.broken) console.log(`  stopped early: ${report.broken}`);
}
console.log(`fuzz: ${findings} findings${broken ? `, ${broken} targets broken` : ''}`);
process.exit(findings > 0 || broken > 0 ? 1 : 0);

/** Replays a target's crashers, then fuzzes it until `budgetMs` has passed; null when it cannot run here. */
async function fuzz<I>(target: FuzzTarget<I>, rng: Rng, budgetMs: number): Promise<TargetReport | null> {
  const why = await target.unavailable?.();
  if (why) {
    console.log(`${target.name}: skipped (${why})`);
    return null;
  }
  const started = performance.now();
  const report: TargetReport = { cases: 0, replayed: 0, seconds: 0, counts: { crash: 0, hang: 0, failure: 0 }, lines: [], broken: null };
  const record = (finding: Finding, file: string): void => {
    report.counts[finding.kind]++;
    report.lines.push(`${finding.kind}: ${finding.detail} (${path.relative(ROOT, file)})`);
  };
  try {
    await target.setup?.();
    for (const saved of readCrashers(target.name, target.format)) {
      const finding = await target.run(saved.input);
      report.replayed++;
      if (finding) record(finding, saved.file);
    }
    const seeds = readSeeds(target.name);
    while (performance.now() - started < budgetMs) {
      const input = target.generate(rng, seeds);
      const finding = await target.run(input);
      report.cases++;
      if (finding) record(finding, saveCrasher(target.name, target.format, input));
    }
  } catch (error) {
    report.broken = error instanceof Error ? (error.stack ?? error.message) : String(error);
  } finally {
    await target.teardown?.();
  }
  report.seconds = (performance.now() - started) / 1000;
  return report;
}
