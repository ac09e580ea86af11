/**
 * Long audio for fixed-window engines (Whisper decodes 30 s windows): the Silero VAD finds the speech, which is
 * cut at pauses into chunks of at most `maxChunkSeconds`; each chunk is transcribed on its own and the segments
 * are shifted back onto the clip's timeline. Silence is never decoded, so it cannot be hallucinated over.
 */
import type { SpeechSegment, SttModel, TranscribeOptions, TranscriptionResult, TranscriptionSegment, VadModel } from '../../engines/types.js';

/** Inputs longer than this go through the VAD. */
export const LONG_AUDIO_SECONDS = 30;
const CHUNK_PADDING_SECONDS = 0.2;

interface Span {
  start: number;
  end: number;
}

/** Consecutive speech segments grouped while the group stays within `maxSeconds` (a longer segment stays whole). */
export function groupSpeech(speech: SpeechSegment[], maxSeconds: number, duration: number): Span[] {
  const spans: Span[] = [];
  for (const segment of speech) {
    const last = spans.at(-1);
    if (last && segment.end - last.start <= maxSeconds) last.end = segment.end;
    else spans.push({ start: segment.start, end: segment.end });
  }
  return spans.map((s) => ({ start: Math.max(0, s.start - CHUNK_PADDING_SECONDS), end: Math.min(duration, s.end + CHUNK_PADDING_SECONDS) }));
}

export async function transcribeSpeechChunks(
  model: SttModel,
  vad: VadModel,
  samples: Float32Array,
  options: TranscribeOptions,
  maxChunkSeconds = LONG_AUDIO_SECONDS,
): Promise<TranscriptionResult> {
  const rate = model.sampleRate;
  const duration = samples.length / rate;
  // speech that runs on past a chunk's length is split by the VAD itself, at its last short pause (or at the limit)
  const spans = groupSpeech(await vad.segments(samples, { maxSpeechDurationS: maxChunkSeconds }, options.signal), maxChunkSeconds, duration);
  const segments: TranscriptionSegment[] = [];
  let language = options.language ?? null;
  for (const span of spans) {
    const firstId = segments.length;
    const shift = (s: TranscriptionSegment): TranscriptionSegment => ({
      ...s,
      id: firstId + s.id,
      start: s.start + span.start,
      end: s.end + span.start,
      words: s.words?.map((w) => ({ ...w, start: w.start + span.start, end: w.end + span.start })),
    });
    const chunk = samples.subarray(Math.floor(span.start * rate), Math.ceil(span.end * rate));
    const result = await model.transcribe(chunk, {
      ...options,
      // the first chunk's language (given or detected) holds for the whole clip
      language,
      onSegment: options.onSegment ? (s, lang) => options.onSegment?.(shift(s), lang) : undefined,
    });
    language ??= result.language;
    for (const s of result.segments) segments.push(shift(s));
  }
  return {
    text: segments
      .map((s) => s.text.trim())
      .filter(Boolean)
      .join(' '),
    language: language ?? options.language ?? 'en',
    duration,
    segments,
  };
}
