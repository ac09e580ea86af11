/**
 * Scoring a diarization against reference turns: the diarization error rate as NIST's md-eval and pyannote.metrics
 * define it, and how many reference segments a known speaker's name lands on.
 *
 * DER, on 10 ms frames (a speaker is active in a frame when one of its segments holds the frame's centre): with
 * N_ref and N_hyp speakers active in a frame, missed speech is max(0, N_ref - N_hyp), false alarm max(0, N_hyp -
 * N_ref) and confusion min(N_ref, N_hyp) minus the frame's speakers the mapping gets right, where the mapping pairs
 * hypothesis speakers one-to-one with reference speakers so as to maximise the time they are active together. The
 * sum over the scored frames, divided by the reference speech in them (each active reference speaker counted), is
 * the DER. Frames within the collar of a reference segment's start or end are not scored (md-eval's `-c 0.25` is a
 * collar of 0.25 s on each side); overlapped speech is scored.
 */

export interface LabelledSegment {
  speaker: string;
  start: number;
  end: number;
}

export interface DerOptions {
  /** Seconds not scored on each side of every reference boundary; default 0.25. */
  collar?: number;
  /** Frame length, seconds; default 0.01. */
  frame?: number;
}

export interface DerResult {
  /** (miss + falseAlarm + confusion) / scoredSeconds; 0 when nothing is scored and nothing is wrong. */
  der: number;
  /** Seconds of each error, summed over speakers (two missed speakers in a frame count twice). */
  miss: number;
  falseAlarm: number;
  confusion: number;
  /** Reference speech scored, seconds, summed over speakers. */
  scoredSeconds: number;
  /** Hypothesis speaker to the reference speaker it is mapped to (pairs active together at some scored frame). */
  mapping: Record<string, string>;
}

export const DEFAULT_COLLAR = 0.25;
const FRAME = 0.01;
/** Slack for frame arithmetic on times such as 0.29 / 0.01. */
const EPSILON = 1e-9;

/** First frame whose centre is at or after `time`. */
const frameFrom = (time: number, frame: number): number => Math.max(0, Math.ceil(time / frame - 0.5 - EPSILON));

/** Each speaker's segments, overlapping and touching ones joined, in order. */
function bySpeaker(segments: readonly LabelledSegment[]): Map<string, [number, number][]> {
  const speakers = new Map<string, [number, number][]>();
  for (const { speaker, start, end } of [...segments].sort((a, b) => a.start - b.start)) {
    if (!(end > start)) continue;
    const spans = speakers.get(speaker) ?? [];
    const last = spans.at(-1);
    if (last && start <= last[1]) last[1] = Math.max(last[1], end);
    else spans.push([start, end]);
    speakers.set(speaker, spans);
  }
  return speakers;
}

/** One activity row per speaker over `frames` frames. */
function activity(speakers: Map<string, [number, number][]>, frames: number, frame: number): Uint8Array[] {
  return [...speakers.values()].map((spans) => {
    const active = new Uint8Array(frames);
    for (const [start, end] of spans) active.fill(1, frameFrom(start, frame), Math.min(frames, frameFrom(end, frame)));
    return active;
  });
}

/**
 * The one-to-one pairing of rows with columns of `weights` (rows x columns, any shape) with the largest total:
 * `pairs[row]` is its column or -1. Exact, by dynamic programming over the subsets of the smaller side (speaker
 * counts are small, so this is cheaper to get right than the Hungarian algorithm and as exact).
 */
export function bestAssignment(weights: readonly (readonly number[])[]): { total: number; pairs: number[] } {
  const rows = weights.length;
  const columns = rows ? (weights[0] as readonly number[]).length : 0;
  const transposed = columns < rows;
  const [small, large] = transposed ? [columns, rows] : [rows, columns];
  if (small > 16) throw new Error(`too many speakers to pair exactly (${small} on each side)`);
  const weight = (item: number, member: number): number =>
    transposed ? ((weights[item] as readonly number[])[member] as number) : ((weights[member] as readonly number[])[item] as number);
  const subsets = 1 << small;
  // best[mask]: the largest total pairing the first `item` items of the large side with exactly the members in mask
  let best = new Float64Array(subsets).fill(-Infinity);
  best[0] = 0;
  const chosen: Int8Array[] = [];
  for (let item = 0; item < large; item++) {
    const next = Float64Array.from(best);
    const choice = new Int8Array(subsets).fill(-1);
    for (let mask = 0; mask < subsets; mask++) {
      const base = best[mask] as number;
      if (base === -Infinity) continue;
      for (let member = 0; member < small; member++) {
        const bit = 1 << member;
        if (mask & bit) continue;
        const total = base + weight(item, member);
        if (total > (next[mask | bit] as number)) {
          next[mask | bit] = total;
          choice[mask | bit] = member;
        }
      }
    }
    chosen.push(choice);
    best = next;
  }
  let mask = 0;
  for (let m = 1; m < subsets; m++) if ((best[m] as number) > (best[mask] as number)) mask = m;
  const total = best[mask] as number;
  const pairs = new Array<number>(rows).fill(-1);
  for (let item = large - 1; item >= 0; item--) {
    const member = (chosen[item] as Int8Array)[mask] as number;
    if (member < 0) continue;
    if (transposed) pairs[item] = member;
    else pairs[member] = item;
    mask &= ~(1 << member);
  }
  return { total, pairs };
}

export function diarizationErrorRate(reference: readonly LabelledSegment[], hypothesis: readonly LabelledSegment[], options: DerOptions = {}): DerResult {
  const { collar = DEFAULT_COLLAR, frame = FRAME } = options;
  const refSpeakers = bySpeaker(reference);
  const hypSpeakers = bySpeaker(hypothesis);
  const lastEnd = Math.max(0, ...[...refSpeakers.values(), ...hypSpeakers.values()].map((spans) => (spans.at(-1) as [number, number])[1]));
  const frames = frameFrom(lastEnd, frame) + 1;
  const ref = activity(refSpeakers, frames, frame);
  const hyp = activity(hypSpeakers, frames, frame);

  const scored = new Uint8Array(frames).fill(1);
  if (collar > 0) {
    for (const spans of refSpeakers.values()) {
      for (const boundary of spans.flat()) scored.fill(0, frameFrom(boundary - collar + EPSILON, frame), frameFrom(boundary + collar, frame));
    }
  }

  const together = ref.map(() => new Array<number>(hyp.length).fill(0));
  let refTotal = 0;
  let miss = 0;
  let falseAlarm = 0;
  let matchable = 0;
  for (let f = 0; f < frames; f++) {
    if (!scored[f]) continue;
    let nRef = 0;
    let nHyp = 0;
    for (const row of ref) nRef += row[f] as number;
    for (const row of hyp) nHyp += row[f] as number;
    refTotal += nRef;
    miss += Math.max(0, nRef - nHyp);
    falseAlarm += Math.max(0, nHyp - nRef);
    matchable += Math.min(nRef, nHyp);
    if (!nRef || !nHyp) continue;
    ref.forEach((r, i) => {
      if (!r[f]) return;
      const row = together[i] as number[];
      hyp.forEach((h, j) => (row[j] = (row[j] as number) + (h[f] as number)));
    });
  }
  const { total: correct, pairs } = bestAssignment(together);
  const refNames = [...refSpeakers.keys()];
  const hypNames = [...hypSpeakers.keys()];
  const mapping: Record<string, string> = {};
  pairs.forEach((j, i) => {
    if (j >= 0 && ((together[i] as number[])[j] as number) > 0) mapping[hypNames[j] as string] = refNames[i] as string;
  });
  const confusion = matchable - correct;
  const errors = miss + falseAlarm + confusion;
  return {
    der: refTotal ? errors / refTotal : errors ? Infinity : 0,
    miss: miss * frame,
    falseAlarm: falseAlarm * frame,
    confusion: confusion * frame,
    scoredSeconds: refTotal * frame,
    mapping,
  };
}

/** For each reference segment, the hypothesis speaker that overlaps it longest, or null where none does. */
export function majoritySpeakers(reference: readonly LabelledSegment[], hypothesis: readonly LabelledSegment[]): (string | null)[] {
  return reference.map((segment) => {
    const overlap = new Map<string, number>();
    for (const turn of hypothesis) {
      const shared = Math.min(segment.end, turn.end) - Math.max(segment.start, turn.start);
      if (shared > 0) overlap.set(turn.speaker, (overlap.get(turn.speaker) ?? 0) + shared);
    }
    let best: string | null = null;
    for (const [speaker, seconds] of overlap) if (best === null || seconds > (overlap.get(best) as number)) best = speaker;
    return best;
  });
}

export interface NamingScore {
  /** Reference segments of the known speakers, and how many of them carry their speaker's name. */
  known: number;
  knownRight: number;
  /** Reference segments of the other speakers, and how many of them carry one of the known names. */
  others: number;
  othersNamed: number;
}

/**
 * How well known speakers are named: `reference` is labelled with the speakers' names, `hypothesis` with the name
 * the diarizer gave each turn (a known name, or anything else for an unnamed speaker); a reference segment's name is
 * that of the hypothesis speaker that overlaps it longest.
 */
export function speakerNaming(reference: readonly LabelledSegment[], hypothesis: readonly LabelledSegment[], knownNames: readonly string[]): NamingScore {
  const names = majoritySpeakers(reference, hypothesis);
  const score: NamingScore = { known: 0, knownRight: 0, others: 0, othersNamed: 0 };
  reference.forEach(({ speaker }, i) => {
    const name = names[i] ?? null;
    if (knownNames.includes(speaker)) {
      score.known++;
      if (name === speaker) score.knownRight++;
    } else {
      score.others++;
      if (name !== null && knownNames.includes(name)) score.othersNamed++;
    }
  });
  return score;
}
