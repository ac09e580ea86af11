/**
 * The built-in diarizer `mfcc-bic`: signal processing and statistics in the native addon, nothing to download
 * (docs/models.md, "Speaker diarization"). MFCC statistics of 1.5 s windows of speech are clustered, the clusters
 * merged by the Bayesian information criterion (which chooses the number of speakers), every 10 ms frame
 * relabelled by a Viterbi pass, and short stretches where another voice joins a turn given to that voice; on a worker
 * thread.
 */
import { availableParallelism } from 'node:os';
import { abortFlagFor } from '../native/abort.js';
import { loadNative } from '../native/load.js';
import type { DiarizeOptions, Diarization, DiarizerModel, SpeakerTurn, SpeechSegment } from './types.js';

/** The reserved model ID of the built-in diarizer. */
export const DIARIZER_MODEL_ID = 'mfcc-bic';
export const DIARIZER_ENGINE = 'voxd-dsp';
/** The most speakers it tells apart (`max_speakers`). */
export const MAX_DIARIZED_SPEAKERS = 16;

class BuiltinDiarizer implements DiarizerModel {
  readonly task = 'diarization' as const;
  readonly engine = DIARIZER_ENGINE;
  readonly sampleRate = 16000 as const;
  /** One job runs on one thread: as many jobs as cores. */
  readonly concurrency = Math.max(1, availableParallelism());

  constructor(readonly id: string) {}

  async diarize(samples: Float32Array, speech: SpeechSegment[], options: DiarizeOptions = {}): Promise<Diarization> {
    const { minSpeakers, maxSpeakers, references = [], signal } = options;
    const spans = Float64Array.from(speech.flatMap((s) => [s.start, s.end]));
    const native = await loadNative().diarize(samples, spans, references, { minSpeakers, maxSpeakers }, abortFlagFor(signal));
    const turns: SpeakerTurn[] = [];
    for (let i = 0; i < native.turns.length; i += 3) {
      turns.push({ start: native.turns[i] as number, end: native.turns[i + 1] as number, speaker: native.turns[i + 2] as number });
    }
    return { turns, speakers: native.speakers, references: Array.from(native.references, (r) => (r < 0 ? null : r)) };
  }

  async dispose(): Promise<void> {
    // nothing native is held between calls
  }
}

/** The built-in diarizer under `id` (normally DIARIZER_MODEL_ID). */
export async function loadDiarizerModel(id: string = DIARIZER_MODEL_ID): Promise<DiarizerModel> {
  return new BuiltinDiarizer(id);
}
