/**
 * Synthetic dialogues with known speakers and turn times, the test set of the diarizer (issue 32; the bench
 * `bench/diarization.ts` and the server tests share it). Six voices: the four flite voices speaking everyday
 * sentences through voxd's own flite engine, the LibriVox reader and JFK as excerpts of their recordings, decoded by
 * voxd's decoder. Everything follows from a seed: the same options give the same samples and turns.
 *
 * Reference turns are where a voice is heard, not where its clip starts and ends: each utterance is trimmed of its
 * leading and trailing silence by energy and split at its own pauses of 0.3 s or more (the usual convention for
 * reference speaker segments). Every utterance is scaled to one speech level, so loudness tells no speaker apart.
 */
import fs from 'node:fs';
import path from 'node:path';
import { loadFliteModel } from '../../src/engines/flite.js';
import { concatSamples } from '../../src/engines/samples.js';
import type { TtsModel } from '../../src/engines/types.js';
import { decodeAudio } from '../../src/services/audio/decode.js';
import { JFK_WAV, SHARED } from './paths.js';
import { mulberry32 } from './mulberry32.js';

export const DIALOGUE_RATE = 16000;
/** flite's four voices, the LibriVox reader and JFK. */
export const DIALOGUE_VOICES = ['slt', 'kal', 'awb', 'rms', 'reader', 'jfk'] as const;
export type DialogueVoice = (typeof DIALOGUE_VOICES)[number];
export const DIALOGUE_CONDITIONS = ['clean', 'overlap', 'backchannels', 'both'] as const;
export type DialogueCondition = (typeof DIALOGUE_CONDITIONS)[number];

/** One stretch of speech by one speaker, seconds. */
export interface ReferenceTurn {
  speaker: string;
  start: number;
  end: number;
}

export interface DialogueOptions {
  /** Distinct voices, at least two. */
  speakers: readonly DialogueVoice[];
  seed: number;
  /** About 30 % of the turns start 0.3-0.8 s before the previous one ends. */
  overlap?: boolean;
  /** About 30 % of the turns get a 0.3-0.7 s "yeah" (or the like) from another speaker inside them. */
  backchannels?: boolean;
  /** Default 6. */
  turnsPerSpeaker?: number;
}

export interface Dialogue {
  /** Mono, DIALOGUE_RATE. */
  samples: Float32Array;
  /** Sorted by start; turns of different speakers overlap where the options ask for it. */
  turns: ReferenceTurn[];
  speakers: DialogueVoice[];
}

/** One dialogue of the standard set (`diarizationSet`), built with `buildDialogue(spec)`. */
export interface DialogueSpec extends DialogueOptions {
  /** e.g. `3spk-overlap-s2b`: speaker count, condition, set seed, which of the two. */
  name: string;
  condition: DialogueCondition;
  speakers: DialogueVoice[];
}

const SENTENCES = [
  'Could you pass me the salt, please?',
  'I think the train leaves at half past nine.',
  'We should get some groceries on the way home.',
  'Did you remember to water the plants this morning?',
  'The meeting has been moved to Thursday afternoon.',
  "Let's take the dog for a walk before it rains.",
  'I left my keys on the kitchen table again.',
  'My sister is coming to visit us next weekend.',
  'That restaurant on the corner makes excellent soup.',
  'Can you call me back when you get a chance?',
  'The traffic was terrible on the bridge today.',
  'I want to paint the fence a lighter shade of green.',
  'Have you seen the new library downtown?',
  'We ran out of coffee, so I bought a bigger bag.',
  'The children finished their homework before dinner.',
];
/** Spoken only in reference clips, so a known speaker is recognised by voice, not by a sentence heard before. */
const REFERENCE_SENTENCES = [
  'Every morning I read the news while my tea gets cold.',
  'The garden looks lovely after a week of sunshine.',
  'Please remember to lock the back door tonight.',
  'Our neighbours are building a small wooden shed.',
  'I usually take the bus when it snows.',
  'This old radio still works surprisingly well.',
];
const BACKCHANNELS = ['yeah', 'right', 'uh huh', 'okay'];

const SPEECH = path.join(SHARED, 'audio', 'speech');
/** The reader's dialogue turns come from these; librivox-0920 is kept for the reader's reference clips. */
const READER_DIALOGUE_FILES = ['librivox-0870.wav', 'librivox-0890.wav'];
const READER_REFERENCE_FILE = 'librivox-0920.wav';

const FRAME = DIALOGUE_RATE / 100;
/** Pauses shorter than this stay inside a turn. */
const MIN_PAUSE_FRAMES = 30;
/** Energy blips shorter than this (clicks) are not speech. */
const MIN_SPEECH_FRAMES = 10;
/** A piece of speech an excerpt's window cuts shorter than this (a word's edge) is left out of the excerpt. */
const MIN_PIECE_S = 0.3;
/** Root mean square every utterance is scaled to over its speech (about -26 dBFS). */
const SPEECH_RMS = 0.05;
const LEAD_IN_S = 0.5;
const TAIL_S = 0.5;
const SHARE = 0.3;
/** Room kept at a turn's start and end for the neighbouring turns' overlaps (at most 0.8 s) before a backchannel. */
const OVERLAP_ROOM_S = 0.9;
const REFERENCE_MIN_S = 3;
const REFERENCE_MAX_S = 8;

/** Speech spans [start, end) in samples. */
type Span = [number, number];

/** Audio trimmed to its speech: `samples` starts at the first span's start and ends at the last one's end. */
interface Utterance {
  samples: Float32Array;
  spans: Span[];
}

/** A recording turns are cut from, with where it has speech. */
interface Recording {
  samples: Float32Array;
  spans: Span[];
}

type Random = () => number;

/** FNV-1a of `text`: seeds derived from names, so adding a dialogue to the set changes no other. */
function hashSeed(text: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) hash = Math.imul(hash ^ text.charCodeAt(i), 0x01000193);
  return hash >>> 0;
}

const uniform = (random: Random, low: number, high: number): number => low + (high - low) * random();
const pick = <T>(random: Random, items: readonly T[]): T => items[Math.floor(random() * items.length)] as T;

function shuffled<T>(random: Random, items: readonly T[]): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [out[i], out[j]] = [out[j] as T, out[i] as T];
  }
  return out;
}

/** `count` of `indices`, at random (all of them when there are fewer). */
function chooseSome(random: Random, indices: number[], count: number): Set<number> {
  return new Set(shuffled(random, indices).slice(0, count));
}

/**
 * Where `samples` has speech, by frame energy (10 ms frames): above both 30 dB under the loud end (99th percentile)
 * and 10 dB over the noise floor (5th percentile), the latter for recordings whose quiet frames are hiss, not zero.
 * Pauses under 0.3 s are bridged and blips under 0.1 s dropped.
 */
function speechSpans(samples: Float32Array): Span[] {
  const frames = Math.floor(samples.length / FRAME);
  const energy = new Float64Array(frames);
  for (let f = 0; f < frames; f++) {
    let sum = 0;
    for (let i = f * FRAME; i < (f + 1) * FRAME; i++) sum += (samples[i] as number) ** 2;
    energy[f] = 10 * Math.log10(sum / FRAME + 1e-12);
  }
  const sorted = Float64Array.from(energy).sort();
  const at = (q: number): number => sorted[Math.min(frames - 1, Math.floor(q * frames))] as number;
  const threshold = Math.max(at(0.99) - 30, at(0.05) + 10);
  const spans: Span[] = [];
  for (let f = 0; f < frames; f++) {
    if ((energy[f] as number) <= threshold) continue;
    const last = spans.at(-1);
    if (last && f - last[1] < MIN_PAUSE_FRAMES) last[1] = f + 1;
    else spans.push([f, f + 1]);
  }
  return spans.filter(([start, end]) => end - start >= MIN_SPEECH_FRAMES).map(([start, end]) => [start * FRAME, end * FRAME]);
}

/** The part of `samples` from its first to its last span, at the common speech level. */
function utterance(samples: Float32Array, spans: Span[]): Utterance {
  const first = spans[0];
  const last = spans.at(-1);
  if (!first || !last) throw new Error('an utterance without speech');
  const origin = first[0];
  let sum = 0;
  let count = 0;
  for (const [start, end] of spans) {
    for (let i = start; i < end; i++) sum += (samples[i] as number) ** 2;
    count += end - start;
  }
  const gain = SPEECH_RMS / Math.sqrt(sum / count);
  return {
    samples: samples.slice(origin, last[1]).map((x) => x * gain),
    spans: spans.map(([start, end]) => [start - origin, end - origin]),
  };
}

/** The speech of `recording` between samples `from` and `to`, or null when there is none. */
function excerptBetween(recording: Recording, from: number, to: number): Utterance | null {
  const spans: Span[] = recording.spans
    .map(([start, end]): Span => [Math.max(start, from), Math.min(end, to)])
    .filter(([start, end]) => end - start >= MIN_PIECE_S * DIALOGUE_RATE);
  return spans.length ? utterance(recording.samples, spans) : null;
}

/** A window of `minS`-`maxS` seconds of `recording` at random, trimmed to speech, at least `keepS` of it. */
function excerpt(recording: Recording, random: Random, minS: number, maxS: number, keepS: number): Utterance {
  for (let attempt = 0; attempt < 100; attempt++) {
    const length = Math.round(uniform(random, minS, maxS) * DIALOGUE_RATE);
    const from = Math.floor(random() * Math.max(1, recording.samples.length - length));
    const found = excerptBetween(recording, from, from + length);
    if (found && found.samples.length >= keepS * DIALOGUE_RATE) return found;
  }
  throw new Error(`no ${minS}-${maxS} s window of the recording has ${keepS} s of speech`);
}

/** A backchannel-sized (0.4-0.7 s) piece from inside one of `recording`'s spans, so all of it is speech. */
function shortExcerpt(recording: Recording, random: Random): Utterance {
  const length = Math.round(uniform(random, 0.4, 0.7) * DIALOGUE_RATE);
  const [start, end] = pick(
    random,
    recording.spans.filter(([s, e]) => e - s >= length),
  );
  const from = start + Math.floor(random() * (end - start - length));
  return utterance(recording.samples, [[from, from + length]]);
}

let flite: Promise<TtsModel> | null = null;
const spoken = new Map<string, Promise<Utterance>>();
const recordings = new Map<string, Promise<Recording>>();

/** `text` in flite's `voice`, synthesized once per process (one model load for every dialogue). */
function speak(voice: string, text: string): Promise<Utterance> {
  const key = `${voice}\n${text}`;
  let found = spoken.get(key);
  if (!found) {
    flite ??= loadFliteModel();
    found = flite.then(async (model) => {
      const samples = await model.synthesize({ text, voice, speed: 1 });
      return utterance(samples, speechSpans(samples));
    });
    spoken.set(key, found);
  }
  return found;
}

/** The clips of `../shared/audio/speech` named, decoded by voxd at 16 kHz and joined, once per process. */
function recording(files: string[]): Promise<Recording> {
  const key = files.join('+');
  let found = recordings.get(key);
  if (!found) {
    found = Promise.all(files.map(async (file) => (await decodeAudio(fs.readFileSync(file), { sampleRate: DIALOGUE_RATE })).samples)).then((clips) => {
      const samples = concatSamples(clips);
      return { samples, spans: speechSpans(samples) };
    });
    recordings.set(key, found);
  }
  return found;
}

const dialogueRecording = (voice: 'reader' | 'jfk'): Promise<Recording> =>
  recording(voice === 'jfk' ? [JFK_WAV] : READER_DIALOGUE_FILES.map((file) => path.join(SPEECH, file)));
const isFlite = (voice: DialogueVoice): voice is 'slt' | 'kal' | 'awb' | 'rms' => voice !== 'reader' && voice !== 'jfk';

/** Who speaks each turn: every speaker `turnsPerSpeaker` times, never twice in a row. */
function speakingOrder(random: Random, speakers: readonly DialogueVoice[], turnsPerSpeaker: number): DialogueVoice[] {
  for (;;) {
    const left = new Map(speakers.map((speaker) => [speaker, turnsPerSpeaker]));
    const order: DialogueVoice[] = [];
    for (;;) {
      const allowed = speakers.filter((speaker) => (left.get(speaker) as number) > 0 && speaker !== order.at(-1));
      if (!allowed.length) break;
      // weighted by turns left, so no speaker is left over with only its own turns to follow each other
      let draw = random() * allowed.reduce((total, speaker) => total + (left.get(speaker) as number), 0);
      const next = allowed.find((speaker) => (draw -= left.get(speaker) as number) < 0) ?? (allowed.at(-1) as DialogueVoice);
      left.set(next, (left.get(next) as number) - 1);
      order.push(next);
    }
    if (order.length === speakers.length * turnsPerSpeaker) return order;
  }
}

interface Placed {
  speaker: DialogueVoice;
  at: number;
  utterance: Utterance;
}

export async function buildDialogue(options: DialogueOptions): Promise<Dialogue> {
  const { speakers, seed, overlap = false, backchannels = false, turnsPerSpeaker = 6 } = options;
  if (speakers.length < 2 || new Set(speakers).size !== speakers.length) throw new Error('a dialogue needs two or more distinct speakers');
  if (turnsPerSpeaker < 1 || turnsPerSpeaker > SENTENCES.length) throw new Error(`turnsPerSpeaker must be from 1 to ${SENTENCES.length}`);
  const random = mulberry32(seed);
  const order = speakingOrder(random, speakers, turnsPerSpeaker);
  // each flite voice goes through the sentences in its own order, so no voice says one sentence twice
  const decks = new Map(speakers.map((speaker) => [speaker, shuffled(random, SENTENCES)]));
  const turns: Utterance[] = [];
  for (const speaker of order) {
    const deck = decks.get(speaker) as string[];
    turns.push(isFlite(speaker) ? await speak(speaker, deck.shift() as string) : excerpt(await dialogueRecording(speaker), random, 1.5, 4, 1));
  }
  const seconds = (u: Utterance): number => u.samples.length / DIALOGUE_RATE;

  // an overlap goes at most 0.9 s short of either turn's whole length, so no three turns ever overlap
  const overlaps = turns.map((turn, i) => (i === 0 ? 0 : Math.min(uniform(random, 0.3, 0.8), seconds(turns[i - 1] as Utterance) - 0.9, seconds(turn) - 0.9)));
  const eligible = overlaps.flatMap((length, i) => (i > 0 && length >= 0.3 ? [i] : []));
  const overlapping = overlap ? chooseSome(random, eligible, Math.round(SHARE * (turns.length - 1))) : new Set<number>();

  const placed: Placed[] = [];
  let end = LEAD_IN_S;
  for (const [i, turn] of turns.entries()) {
    const at = i === 0 ? end : overlapping.has(i) ? end - (overlaps[i] as number) : end + uniform(random, 0.15, 0.8);
    placed.push({ speaker: order[i] as DialogueVoice, at, utterance: turn });
    end = at + seconds(turn);
  }

  if (backchannels) {
    const shorts = await Promise.all(
      order.map(async (speaker) => {
        const other = pick(
          random,
          speakers.filter((s) => s !== speaker),
        );
        return {
          speaker: other,
          utterance: isFlite(other) ? await speak(other, pick(random, BACKCHANNELS)) : shortExcerpt(await dialogueRecording(other), random),
        };
      }),
    );
    // inside the turn, clear of the room the neighbouring turns' overlaps may take
    const fits = shorts.flatMap((short, i) => (seconds(turns[i] as Utterance) >= 2 * OVERLAP_ROOM_S + seconds(short.utterance) ? [i] : []));
    for (const i of chooseSome(random, fits, Math.round(SHARE * turns.length))) {
      const host = placed[i] as Placed;
      const short = shorts[i] as { speaker: DialogueVoice; utterance: Utterance };
      const room = seconds(host.utterance) - 2 * OVERLAP_ROOM_S - seconds(short.utterance);
      placed.push({ ...short, at: host.at + OVERLAP_ROOM_S + random() * room });
    }
  }

  const samples = new Float32Array(Math.ceil((end + TAIL_S) * DIALOGUE_RATE));
  const referenceTurns: ReferenceTurn[] = [];
  for (const { speaker, at, utterance } of placed) {
    const offset = Math.round(at * DIALOGUE_RATE);
    utterance.samples.forEach((x, i) => (samples[offset + i] = (samples[offset + i] as number) + x));
    for (const [start, stop] of utterance.spans) {
      referenceTurns.push({ speaker, start: (offset + start) / DIALOGUE_RATE, end: (offset + stop) / DIALOGUE_RATE });
    }
  }
  referenceTurns.sort((a, b) => a.start - b.start || a.end - b.end);
  return { samples, turns: referenceTurns, speakers: [...speakers] };
}

/**
 * A 3-8 s clip of `voice` to name it by (known speakers): flite voices say sentences the dialogues never use, the
 * reader reads a passage they never use; JFK has only one 11 s recording, so his clip is a window of the one his
 * turns come from.
 */
export async function referenceClip(voice: DialogueVoice, seed: number): Promise<Float32Array> {
  const random = mulberry32(hashSeed(`reference/${voice}/${seed}`));
  if (voice === 'jfk') return excerpt(await dialogueRecording(voice), random, 4, REFERENCE_MAX_S, REFERENCE_MIN_S).samples;
  if (voice === 'reader') return excerpt(await recording([path.join(SPEECH, READER_REFERENCE_FILE)]), random, 4, 6, REFERENCE_MIN_S).samples;
  const gap = new Float32Array(Math.round(0.3 * DIALOGUE_RATE));
  const parts: Float32Array[] = [];
  let length = 0;
  for (const text of shuffled(random, REFERENCE_SENTENCES)) {
    const said = (await speak(voice, text)).samples;
    const added = (parts.length ? gap.length : 0) + said.length;
    if (length + added > REFERENCE_MAX_S * DIALOGUE_RATE) continue;
    if (parts.length) parts.push(gap);
    parts.push(said);
    length += added;
    if (length >= REFERENCE_MIN_S * DIALOGUE_RATE) break;
  }
  return concatSamples(parts);
}

/**
 * The standard set: for each seed, 2, 3 and 4 speakers (drawn from the six voices) in each condition, two
 * dialogues each (24 per seed).
 */
export function diarizationSet(seeds: readonly number[]): DialogueSpec[] {
  return seeds.flatMap((setSeed) =>
    [2, 3, 4].flatMap((count) =>
      DIALOGUE_CONDITIONS.flatMap((condition) =>
        ['a', 'b'].map((which) => {
          const name = `${count}spk-${condition}-s${setSeed}${which}`;
          const seed = hashSeed(name);
          return {
            name,
            condition,
            seed,
            speakers: shuffled(mulberry32(hashSeed(`${name}/speakers`)), DIALOGUE_VOICES).slice(0, count),
            overlap: condition === 'overlap' || condition === 'both',
            backchannels: condition === 'backchannels' || condition === 'both',
          };
        }),
      ),
    ),
  );
}
