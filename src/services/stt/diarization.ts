/**
 * Who spoke when, for file transcriptions (docs/api.md, "Diarized transcripts"): the known speakers a request names
 * (decoded and checked before any work), the labels speakers get (a known speaker's name, else A, B, ... in the
 * order they first speak, as the vendor labels them), and the transcript's segments given to the speakers whose
 * turns they fall in: split between words where the engine times words, whole segments where it does not.
 */
import type { Diarization, SpeakerTurn, TranscriptionSegment } from '../../engines/types.js';
import { ApiError } from '../../errors.js';
import { dataUrlBytes } from '../audio/data-url.js';
import { decodeAudio } from '../audio/decode.js';
import type { Span } from './speech-chunks.js';

/** The most speakers `min_speakers` and `max_speakers` may ask for. */
export { MAX_DIARIZED_SPEAKERS } from '../../engines/diarizer.js';

/** The vendor's limits on known speakers: at most 4, each named by a clip of 2 to 10 s. */
export const MAX_KNOWN_SPEAKERS = 4;
export const MIN_REFERENCE_SECONDS = 2;
export const MAX_REFERENCE_SECONDS = 10;
/** Largest `known_speaker_references[]` field: a 10 s clip of 48 kHz stereo 16-bit WAV is 2.6 MB as a data URL. */
export const MAX_REFERENCE_FIELD_BYTES = 8 * 1024 * 1024;

/** What a request asks of diarization, as the client sent it. */
export interface SpeakerRequest {
  minSpeakers?: number;
  maxSpeakers?: number;
  /** Known speakers: names with their clips as data URLs. */
  known: { name: string; reference: string }[];
}

export interface KnownSpeaker {
  name: string;
  /** 16 kHz mono. */
  samples: Float32Array;
}

/** The known speakers' clips decoded to 16 kHz mono; a clip that is not audio or not 2-10 s long is a 400. */
export async function decodeKnownSpeakers(known: SpeakerRequest['known'], signal: AbortSignal): Promise<KnownSpeaker[]> {
  const param = 'known_speaker_references';
  return Promise.all(
    known.map(async ({ name, reference }) => {
      const bytes = dataUrlBytes(reference);
      if (!bytes || bytes.length === 0) {
        throw new ApiError('invalid_request', `the reference of known speaker '${name}' is not a base64 data URL of audio (data:audio/wav;base64,...)`, {
          param,
        });
      }
      const audio = await decodeAudio(bytes, { sampleRate: 16000, maxSeconds: MAX_REFERENCE_SECONDS + 1, signal }).catch((error: unknown) => {
        if (error instanceof ApiError && error.code === 'invalid_audio') {
          throw new ApiError('invalid_audio', `the reference of known speaker '${name}': ${error.message}`, { param });
        }
        throw error;
      });
      if (audio.duration < MIN_REFERENCE_SECONDS || audio.duration > MAX_REFERENCE_SECONDS) {
        throw new ApiError(
          'invalid_audio',
          `the reference of known speaker '${name}' lasts ${audio.duration.toFixed(2)} s; it must last ${MIN_REFERENCE_SECONDS} to ${MAX_REFERENCE_SECONDS} s`,
          { param },
        );
      }
      return { name, samples: audio.samples };
    }),
  );
}

/** Each speaker's label: the name of the known speaker whose clip matched it, else A, B, ... in order of first speech. */
export function speakerLabels(diarization: Diarization, names: string[]): string[] {
  const labels: (string | null)[] = new Array<string | null>(diarization.speakers).fill(null);
  diarization.references.forEach((speaker, i) => {
    if (speaker !== null) labels[speaker] = names[i] as string;
  });
  let next = 0;
  return labels.map((label) => label ?? letters(next++));
}

/** A, B, ..., Z, AA, AB, ... */
function letters(index: number): string {
  const letter = String.fromCharCode(65 + (index % 26));
  return index < 26 ? letter : letters(Math.floor(index / 26) - 1) + letter;
}

/** The speaker of a stretch of time: the one whose turns overlap it most, else the one whose turn is nearest. */
function speakerAt(turns: SpeakerTurn[], start: number, end: number): number {
  let best = -1;
  let bestOverlap = 0;
  let nearest = 0;
  let nearestDistance = Infinity;
  const overlap = new Map<number, number>();
  for (const turn of turns) {
    const shared = Math.min(end, turn.end) - Math.max(start, turn.start);
    if (shared > 0) {
      const total = (overlap.get(turn.speaker) ?? 0) + shared;
      overlap.set(turn.speaker, total);
      if (total > bestOverlap) [best, bestOverlap] = [turn.speaker, total];
    }
    const distance = Math.max(turn.start - end, start - turn.end, 0);
    if (distance < nearestDistance) [nearest, nearestDistance] = [turn.speaker, distance];
  }
  return best >= 0 ? best : nearest;
}

/**
 * A segment with its speaker's label; one with timed words is split where the speaker changes between them (the
 * pieces' text is their words), so a segment never speaks for two people.
 */
export function labelSegment(segment: TranscriptionSegment, turns: SpeakerTurn[], labels: string[]): TranscriptionSegment[] {
  const words = segment.words ?? [];
  const whole = (): TranscriptionSegment[] => [{ ...segment, speaker: labels[speakerAt(turns, segment.start, segment.end)] as string }];
  if (turns.length === 0 || words.length === 0) return turns.length === 0 ? [segment] : whole();
  const speakers = words.map((w) => speakerAt(turns, w.start, w.end));
  if (speakers.every((s) => s === speakers[0])) return [{ ...segment, speaker: labels[speakers[0] as number] as string }];
  const pieces: TranscriptionSegment[] = [];
  let from = 0;
  for (let i = 1; i <= words.length; i++) {
    if (i < words.length && speakers[i] === speakers[from]) continue;
    const run = words.slice(from, i);
    pieces.push({
      ...segment,
      start: from === 0 ? segment.start : (run[0]?.start as number),
      end: i === words.length ? segment.end : (run.at(-1)?.end as number),
      text: ' ' + run.map((w) => w.word).join(' '),
      // the segment's tokens cannot be told apart by time
      tokens: [],
      words: run,
      speaker: labels[speakers[from] as number] as string,
    });
    from = i;
  }
  return pieces;
}

/**
 * What to transcribe one at a time on an engine that times no words: consecutive turns of one speaker, grouped
 * while they last at most `maxSeconds` and pause less than a second, padded by up to 0.2 s into the silence around
 * them (never into another speaker's turn).
 */
export function speakerSpans(turns: SpeakerTurn[], maxSeconds: number, duration: number): (Span & { speaker: number })[] {
  const spans: (Span & { speaker: number })[] = [];
  for (const turn of turns) {
    const last = spans.at(-1);
    if (last && last.speaker === turn.speaker && turn.start - last.end < 1 && turn.end - last.start <= maxSeconds) last.end = turn.end;
    else spans.push({ ...turn });
  }
  const padding = 0.2;
  return spans.map((span, i) => ({
    ...span,
    start: Math.max(0, span.start - padding, i > 0 ? ((spans[i - 1] as Span).end + span.start) / 2 : 0),
    end: Math.min(duration, span.end + padding, i + 1 < spans.length ? (span.end + (spans[i + 1] as Span).start) / 2 : duration),
  }));
}
