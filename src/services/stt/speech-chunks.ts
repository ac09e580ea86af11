/**
 * Long audio for fixed-window engines (Whisper decodes 30 s windows): the Silero VAD finds the speech, which is
 * cut at pauses into chunks of at most `maxChunkSeconds`; each chunk is transcribed on its own and the segments
 * are shifted back onto the clip's timeline. Silence is never decoded, so it cannot be hallucinated over. An engine
 * that batches an upload's chunks (`batchedChunks`) gets up to its batch size of them at once.
 */
import type { SpeechSegment, SttModel, TranscribeOptions, TranscriptionResult, TranscriptionSegment, VadModel, VadParams } from '../../engines/types.js';

/** Inputs longer than this go through the VAD. */
export const LONG_AUDIO_SECONDS = 30;
const CHUNK_PADDING_SECONDS = 0.2;

export interface Span {
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

/** Long audio cut at the VAD's pauses (with `params`, its defaults unless the request's chunking_strategy sets them). */
export async function transcribeSpeechChunks(
  model: SttModel,
  vad: VadModel,
  samples: Float32Array,
  options: TranscribeOptions,
  maxChunkSeconds = LONG_AUDIO_SECONDS,
  params: VadParams = {},
): Promise<TranscriptionResult> {
  // speech that runs on past a chunk's length is split by the VAD itself, at its last short pause (or at the limit)
  const maxSpeechDurationS = Math.min(params.maxSpeechDurationS ?? Infinity, maxChunkSeconds);
  const speech = await vad.segments(samples, { ...params, maxSpeechDurationS }, options.signal);
  return transcribeSpans(model, samples, groupSpeech(speech, maxChunkSeconds, samples.length / model.sampleRate), options);
}

/**
 * Each span of `samples` transcribed on its own (up to the model's batch size of them at once where it batches an
 * upload's chunks), the segments shifted back onto the clip's timeline and numbered in order.
 */
export async function transcribeSpans(model: SttModel, samples: Float32Array, spans: Span[], options: TranscribeOptions): Promise<TranscriptionResult> {
  const rate = model.sampleRate;
  const duration = samples.length / rate;
  const results: TranscriptionResult[] = [];
  let language = options.language ?? null;
  if (model.capabilities.batchedChunks) {
    // as many chunks at once as the model decodes together (a chunk more would wait in its queue ahead of other
    // requests), each next one as one ends; their text and segments are reported in the clip's order
    const inOrder = new OrderedChunks(spans.length, options);
    const failed = new AbortController();
    const signal = options.signal ? AbortSignal.any([options.signal, failed.signal]) : failed.signal;
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < spans.length) {
        const i = next++;
        const span = spans[i] as Span;
        const chunk = chunkOf(samples, span, rate);
        results[i] = await inOrder.track(i, model.transcribe(chunk, { ...options, ...inOrder.callbacks(i, span.start), signal }));
      }
    };
    const workers = Array.from({ length: Math.min(spans.length, model.batchSize ?? 1) }, () =>
      worker().catch((error: unknown) => {
        failed.abort(error); // the other chunks stop too: the transcription has failed
        throw error;
      }),
    );
    const settled = await Promise.allSettled(workers);
    const failure = settled.find((outcome) => outcome.status === 'rejected');
    if (failure) throw failure.reason;
  } else {
    for (const span of spans) {
      const result = await model.transcribe(chunkOf(samples, span, rate), {
        ...options,
        // the first chunk's language (given or detected) holds for the whole clip
        language,
        onSegment: options.onSegment ? (s, lang) => options.onSegment?.(shiftSegment(s, span.start, 0), lang) : undefined,
      });
      language ??= result.language;
      results.push(result);
    }
  }
  const segments: TranscriptionSegment[] = [];
  results.forEach((result, i) => {
    const firstId = segments.length;
    for (const s of result.segments) segments.push(shiftSegment(s, (spans[i] as Span).start, firstId));
  });
  return {
    text: segments
      .map((s) => s.text.trim())
      .filter(Boolean)
      .join(' '),
    language: language ?? results[0]?.language ?? options.language ?? 'en',
    duration,
    segments,
  };
}

function chunkOf(samples: Float32Array, span: Span, rate: number): Float32Array {
  return samples.subarray(Math.floor(span.start * rate), Math.ceil(span.end * rate));
}

/** A chunk's segment on the clip's timeline: shifted by the chunk's start, numbered after the segments before it. */
function shiftSegment(s: TranscriptionSegment, start: number, firstId: number): TranscriptionSegment {
  return {
    ...s,
    id: firstId + s.id,
    start: s.start + start,
    end: s.end + start,
    words: s.words?.map((w) => ({ ...w, start: w.start + start, end: w.end + start })),
  };
}

/**
 * Callbacks of chunks decoded at once, passed on in the clip's order: the first unfinished chunk's text and segments
 * go out as they come; a later chunk's wait until every chunk before it has finished.
 */
class OrderedChunks {
  private readonly waiting: (() => void)[][];
  private readonly finished: boolean[];
  private current = 0;
  private nextId = 0;

  constructor(
    count: number,
    private readonly options: TranscribeOptions,
  ) {
    this.waiting = Array.from({ length: count }, () => []);
    this.finished = new Array<boolean>(count).fill(false);
  }

  /** Chunk `i`'s callbacks; its segments are shifted by `start` and numbered after those of the chunks before it. */
  callbacks(i: number, start: number): Pick<TranscribeOptions, 'onText' | 'onSegment'> {
    const { onText, onSegment } = this.options;
    return {
      onText: onText ? (delta) => this.emit(i, () => onText(delta)) : undefined,
      onSegment: onSegment
        ? (segment, language) => this.emit(i, () => onSegment(shiftSegment(segment, start, this.nextId++ - segment.id), language))
        : undefined,
    };
  }

  /** Chunk `i`'s transcription: once it settles, the output of the chunks after it that was waiting goes out. */
  track<T>(i: number, transcription: Promise<T>): Promise<T> {
    return transcription.finally(() => {
      this.finished[i] = true;
      while (this.current < this.finished.length && this.finished[this.current]) {
        this.current++;
        for (const call of this.waiting[this.current] ?? []) call();
        if (this.current < this.waiting.length) this.waiting[this.current] = [];
      }
    });
  }

  private emit(i: number, call: () => void): void {
    if (i === this.current) call();
    else (this.waiting[i] as (() => void)[]).push(call);
  }
}
