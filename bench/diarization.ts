/**
 * Diarization benchmark (`npm run bench:diarization`): the built-in diarizer on the synthetic dialogue set
 * (test/helpers/dialogues.ts: 2, 3 and 4 speakers; clean, with overlapping turn starts, with backchannels, with
 * both; 24 dialogues a seed). Each dialogue goes through the shipped Silero VAD and then the diarizer, as a
 * transcription does; it is scored (test/helpers/der.ts) by the diarization error rate with a 0.25 s collar, overlap
 * scored, split into missed speech, false alarm and confusion, and by whether the diarizer found the right number of
 * speakers. The collar hides a backchannel (0.2-0.7 s) whole, so the DER without a collar is shown too. Beside it: the DER with the reference turns as the speech regions (oracle speech), which tells the VAD's
 * errors from the clustering's, and the time per minute of audio. Then a known-speakers pass: each dialogue again,
 * with reference clips of two of its speakers; a reference segment is named by the speaker the diarizer matched to
 * the reference, taking the hypothesis speaker that overlaps the segment longest. Segments shorter than 0.75 s (the
 * backchannels, and the odd short piece of an excerpt) are also counted apart: a diarizer that gives each moment one
 * speaker gives a backchannel's time to the speaker it interrupts.
 *
 * `--seeds 1,2,3` chooses the set (the default, 72 dialogues); `--json` prints one JSON object (every dialogue's
 * figures and the groups') instead of the tables. Progress goes to stderr.
 */
import os from 'node:os';
import { loadDiarizerModel } from '../src/engines/diarizer.js';
import { SHIPPED_VAD_MODEL, sileroVadEngine } from '../src/engines/silero-vad.js';
import type { Diarization, SpeechSegment } from '../src/engines/types.js';
import { DEFAULT_COLLAR, diarizationErrorRate, speakerNaming, type DerResult, type LabelledSegment, type NamingScore } from '../test/helpers/der.js';
import {
  buildDialogue,
  DIALOGUE_CONDITIONS,
  DIALOGUE_RATE,
  diarizationSet,
  referenceClip,
  type DialogueSpec,
  type ReferenceTurn,
} from '../test/helpers/dialogues.js';

/** The targets on this set. */
const TARGETS = { der2: 0.1, der4: 0.2, countRight: 0.9, knownRight: 0.95 };
const KNOWN_PER_DIALOGUE = 2;
/** Reference segments shorter than this are counted apart in the naming figures (backchannels are at most 0.7 s). */
const SHORT_SEGMENT_S = 0.75;

function option(name: string): string | undefined {
  const at = process.argv.indexOf(name);
  return at < 0 ? undefined : process.argv[at + 1];
}
const seedsArgument = option('--seeds') ?? '1,2,3';
const seeds = seedsArgument.split(',').map(Number);
if (!seeds.length || seeds.some((seed) => !Number.isInteger(seed))) throw new Error(`--seeds takes integers separated by commas (got ${seedsArgument})`);
const asJson = process.argv.includes('--json');

interface DialogueFigures {
  name: string;
  speakers: number;
  condition: string;
  voices: string[];
  seconds: number;
  vadMs: number;
  diarizeMs: number;
  found: number;
  der: Omit<DerResult, 'mapping'>;
  derNoCollar: Omit<DerResult, 'mapping'>;
  oracle: Omit<DerResult, 'mapping'>;
  known: string[];
  /** Per known speaker, the diarizer's speaker it matched, or null. */
  referencesMatched: (number | null)[];
  naming: NamingScore;
  /** The same, for the reference segments shorter than SHORT_SEGMENT_S only. */
  namingShort: NamingScore;
}

const withoutMapping = ({ mapping: _mapping, ...rest }: DerResult): Omit<DerResult, 'mapping'> => rest;
const labelled = (diarization: Diarization, name: (speaker: number) => string): LabelledSegment[] =>
  diarization.turns.map((turn) => ({ speaker: name(turn.speaker), start: turn.start, end: turn.end }));

/** The reference turns as speech regions: their union, in order. */
function oracleSpeech(turns: readonly ReferenceTurn[]): SpeechSegment[] {
  const speech: SpeechSegment[] = [];
  for (const { start, end } of [...turns].sort((a, b) => a.start - b.start)) {
    const last = speech.at(-1);
    if (last && start <= last.end) last.end = Math.max(last.end, end);
    else speech.push({ start, end });
  }
  return speech;
}

const vad = await sileroVadEngine.load({ id: 'silero', path: SHIPPED_VAD_MODEL, projector: null });
const diarizer = await loadDiarizerModel();
const specs = diarizationSet(seeds);

async function measure(spec: DialogueSpec): Promise<DialogueFigures> {
  const dialogue = await buildDialogue(spec);
  const reference = dialogue.turns;
  const vadStart = performance.now();
  const speech = await vad.segments(dialogue.samples);
  const diarizeStart = performance.now();
  const diarization = await diarizer.diarize(dialogue.samples, speech);
  const [vadMs, diarizeMs] = [diarizeStart - vadStart, performance.now() - diarizeStart];
  const oracle = await diarizer.diarize(dialogue.samples, oracleSpeech(reference));

  const known = spec.speakers.slice(0, KNOWN_PER_DIALOGUE);
  const references = await Promise.all(known.map((voice) => referenceClip(voice, spec.seed)));
  const named = await diarizer.diarize(dialogue.samples, speech, { references });
  // a speaker two references matched keeps the first one's name
  const names = new Map<number, string>();
  for (const [i, speaker] of named.references.entries()) if (speaker !== null && !names.has(speaker)) names.set(speaker, known[i] as string);
  const byNumber = (speaker: number): string => `#${speaker}`;
  const hypothesis = labelled(diarization, byNumber);
  const namedHypothesis = labelled(named, (speaker) => names.get(speaker) ?? byNumber(speaker));
  return {
    name: spec.name,
    speakers: spec.speakers.length,
    condition: spec.condition,
    voices: spec.speakers,
    seconds: dialogue.samples.length / DIALOGUE_RATE,
    vadMs,
    diarizeMs,
    found: diarization.speakers,
    der: withoutMapping(diarizationErrorRate(reference, hypothesis)),
    derNoCollar: withoutMapping(diarizationErrorRate(reference, hypothesis, { collar: 0 })),
    oracle: withoutMapping(diarizationErrorRate(reference, labelled(oracle, byNumber))),
    known,
    referencesMatched: named.references,
    naming: speakerNaming(reference, namedHypothesis, known),
    namingShort: speakerNaming(
      reference.filter((turn) => turn.end - turn.start < SHORT_SEGMENT_S),
      namedHypothesis,
      known,
    ),
  };
}

interface Group {
  speakers: number | 'all';
  condition: string;
  dialogues: number;
  minutes: number;
  der: number;
  derNoCollar: number;
  miss: number;
  falseAlarm: number;
  confusion: number;
  oracleDer: number;
  oracleConfusion: number;
  countRight: number;
  /** How many dialogues the diarizer found each number of speakers in. */
  foundCounts: Record<number, number>;
  diarizeSecondsPerMinute: number;
  vadSecondsPerMinute: number;
  knownRight: number;
  /** knownRight for the known speakers' segments of SHORT_SEGMENT_S or more, and for the shorter ones. */
  knownRightLong: number;
  knownRightShort: number;
  othersNamed: number;
  knownSegments: number;
  knownShortSegments: number;
  otherSegments: number;
}

/** Pooled over the dialogues, as md-eval pools a set: errors summed, divided by the speech scored. */
function group(speakers: number | 'all', condition: string, figures: DialogueFigures[]): Group {
  const sum = (value: (f: DialogueFigures) => number): number => figures.reduce((total, f) => total + value(f), 0);
  const scored = sum((f) => f.der.scoredSeconds);
  const oracleScored = sum((f) => f.oracle.scoredSeconds);
  const minutes = sum((f) => f.seconds) / 60;
  const foundCounts: Record<number, number> = {};
  for (const f of figures) foundCounts[f.found] = (foundCounts[f.found] ?? 0) + 1;
  const known = sum((f) => f.naming.known);
  const knownShort = sum((f) => f.namingShort.known);
  const knownRightShort = sum((f) => f.namingShort.knownRight);
  const others = sum((f) => f.naming.others);
  return {
    speakers,
    condition,
    dialogues: figures.length,
    minutes,
    der: sum((f) => f.der.miss + f.der.falseAlarm + f.der.confusion) / scored,
    derNoCollar: sum((f) => f.derNoCollar.miss + f.derNoCollar.falseAlarm + f.derNoCollar.confusion) / sum((f) => f.derNoCollar.scoredSeconds),
    miss: sum((f) => f.der.miss) / scored,
    falseAlarm: sum((f) => f.der.falseAlarm) / scored,
    confusion: sum((f) => f.der.confusion) / scored,
    oracleDer: sum((f) => f.oracle.miss + f.oracle.falseAlarm + f.oracle.confusion) / oracleScored,
    oracleConfusion: sum((f) => f.oracle.confusion) / oracleScored,
    countRight: figures.filter((f) => f.found === f.speakers).length / figures.length,
    foundCounts,
    diarizeSecondsPerMinute: sum((f) => f.diarizeMs) / 1000 / minutes,
    vadSecondsPerMinute: sum((f) => f.vadMs) / 1000 / minutes,
    knownRight: sum((f) => f.naming.knownRight) / known,
    knownRightLong: (sum((f) => f.naming.knownRight) - knownRightShort) / (known - knownShort),
    knownRightShort: knownShort ? knownRightShort / knownShort : 1,
    othersNamed: others ? sum((f) => f.naming.othersNamed) / others : 0,
    knownSegments: known,
    knownShortSegments: knownShort,
    otherSegments: others,
  };
}

const figures: DialogueFigures[] = [];
for (const spec of specs) {
  const measured = await measure(spec);
  figures.push(measured);
  process.stderr.write(
    `[${figures.length}/${specs.length}] ${spec.name} (${spec.speakers.join(', ')}): DER ${(measured.der.der * 100).toFixed(1)} %, ` +
      `oracle ${(measured.oracle.der * 100).toFixed(1)} %, ${measured.found} speakers found\n`,
  );
}

const counts = [2, 3, 4];
const groups = counts.flatMap((speakers) => {
  const ofCount = figures.filter((f) => f.speakers === speakers);
  return [
    ...DIALOGUE_CONDITIONS.map((condition) =>
      group(
        speakers,
        condition,
        ofCount.filter((f) => f.condition === condition),
      ),
    ),
    group(speakers, 'all', ofCount),
  ];
});
const total = group('all', 'all', figures);
const byCount = (speakers: number): Group => groups.find((g) => g.speakers === speakers && g.condition === 'all') as Group;
const verdicts = [
  { what: 'DER, 2 speakers', value: byCount(2).der, target: TARGETS.der2, atMost: true },
  { what: 'DER, 4 speakers', value: byCount(4).der, target: TARGETS.der4, atMost: true },
  { what: 'speaker count right', value: total.countRight, target: TARGETS.countRight, atMost: false },
  { what: 'known speakers named right', value: total.knownRight, target: TARGETS.knownRight, atMost: false },
].map((v) => ({ ...v, met: v.atMost ? v.value <= v.target : v.value >= v.target }));

if (asJson) {
  console.log(
    JSON.stringify({
      model: diarizer.id,
      vad: SHIPPED_VAD_MODEL,
      collar: DEFAULT_COLLAR,
      seeds,
      cores: os.cpus().length,
      targets: TARGETS,
      verdicts,
      total,
      groups,
      dialogues: figures,
    }),
  );
} else {
  const percent = (value: number): string => `${(value * 100).toFixed(1)} %`;
  const columns: [string, number, (g: Group) => string][] = [
    ['speakers', 8, (g) => String(g.speakers)],
    ['condition', 12, (g) => g.condition],
    ['dialogues', 9, (g) => String(g.dialogues)],
    ['DER', 7, (g) => percent(g.der)],
    ['miss', 7, (g) => percent(g.miss)],
    ['FA', 7, (g) => percent(g.falseAlarm)],
    ['conf', 7, (g) => percent(g.confusion)],
    ['no collar', 9, (g) => percent(g.derNoCollar)],
    ['oracle DER', 10, (g) => percent(g.oracleDer)],
    ['oracle conf', 11, (g) => percent(g.oracleConfusion)],
    ['count right', 11, (g) => percent(g.countRight)],
    [
      'found (count: dialogues)',
      24,
      (g) =>
        Object.entries(g.foundCounts)
          .map(([found, dialogues]) => `${found}: ${dialogues}`)
          .join(', '),
    ],
    ['known right', 11, (g) => percent(g.knownRight)],
    ['long', 7, (g) => percent(g.knownRightLong)],
    ['short', 7, (g) => percent(g.knownRightShort)],
    ['others named', 12, (g) => percent(g.othersNamed)],
    ['diarize s/min', 13, (g) => g.diarizeSecondsPerMinute.toFixed(2)],
    ['VAD s/min', 9, (g) => g.vadSecondsPerMinute.toFixed(2)],
  ];
  const line = (cells: string[]): string => cells.map((cell, i) => cell.padStart((columns[i] as [string, number, unknown])[1])).join('  ');
  console.log(
    `Diarization of ${figures.length} dialogues (seeds ${seeds.join(',')}, ${total.minutes.toFixed(1)} min of audio), model ${diarizer.id} after the ` +
      `shipped Silero VAD, collar ${DEFAULT_COLLAR} s each side, overlap scored, ${os.cpus().length} cores:`,
  );
  console.log(line(columns.map(([title]) => title)));
  for (const g of [...groups, total]) console.log(line(columns.map(([, , cell]) => cell(g))));
  console.log(
    `DER: pooled over the dialogues (errors over speech scored); oracle: the reference turns given as the speech. Known: ${KNOWN_PER_DIALOGUE} ` +
      `speakers' reference clips a dialogue; known right: their ${total.knownSegments} segments named by them (long: ` +
      `${total.knownSegments - total.knownShortSegments} of ${SHORT_SEGMENT_S} s or more, short: ${total.knownShortSegments} shorter); others named: ` +
      `${total.otherSegments} other speakers' segments given a known name. Time per minute of audio.`,
  );
  console.log('Targets:');
  for (const v of verdicts)
    console.log(`  ${v.what.padEnd(27)} ${percent(v.value).padStart(7)} (target ${v.atMost ? '≤' : '≥'} ${percent(v.target)}): ${v.met ? 'met' : 'NOT met'}`);
}
await Promise.all([vad.dispose(), diarizer.dispose()]);
