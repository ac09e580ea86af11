/**
 * The built-in speech-to-text model `sphinx`: CMU pocketsphinx 5prealpha with its US English model, offline and with
 * nothing to download. A platform package links pocketsphinx in and ships the model beside the addon; a source build
 * opens Debian's libpocketsphinx3 at run time and reads pocketsphinx-en-us, so without those packages only this
 * model fails to load, with a message naming them.
 *
 * Transcripts match `pocketsphinx_continuous -infile`: the audio is cut into utterances on silence by the
 * decoder's own voice activity detection, one segment per utterance, lower-case words without punctuation.
 * `prompt` and `temperature` are ignored (pocketsphinx has neither prompt conditioning nor sampling); it hears
 * English only (its `capabilities`, which the speech-to-text service checks); `maxTokens` keeps that many words.
 */
import path from 'node:path';
import { unavailableModelError, unloadedModelError } from '../errors.js';
import type { NativeSphinxLoadOptions, NativeSphinxModel, NativeSphinxPoolStats, NativeSphinxSegment } from '../native/addon.js';
import { loadNative, nativeOrigin } from '../native/load.js';
import { abortFlagFor } from '../native/abort.js';
import type { StreamingOptions, SttModel, SttStreamingSession, TranscribeOptions, TranscriptionResult, TranscriptionSegment } from './types.js';
import { compressionRatio } from './whisper.js';

/** The reserved model ID of the built-in recognizer. */
export const SPHINX_MODEL_ID = 'sphinx';
export const SPHINX_ENGINE = 'pocketsphinx';
const SAMPLE_RATE = 16000;
/** A floor for log posteriors: pocketsphinx reports some word posteriors as exactly 0. */
const MIN_PROBABILITY = 1e-10;
/** Samples pocketsphinx reads at a time, and so the step of its partial hypotheses (128 ms). */
const BLOCK_MS = (2048 / SAMPLE_RATE) * 1000;

/** Keeps the first `maxWords` words (all when 0), cutting the segment they end in and dropping the rest. */
function truncateWords(segments: NativeSphinxSegment[], maxWords: number): NativeSphinxSegment[] {
  if (maxWords <= 0) return segments;
  const out: NativeSphinxSegment[] = [];
  let left = maxWords;
  for (const segment of segments) {
    if (left <= 0) break;
    if (segment.words.length <= left) {
      out.push(segment);
      left -= segment.words.length;
      continue;
    }
    const words = segment.words.slice(0, left);
    const last = words[words.length - 1];
    out.push({ ...segment, words, text: words.map((w) => w.word).join(' '), end: last ? last.end : segment.start });
    left = 0;
  }
  return out;
}

function toSegment(segment: NativeSphinxSegment, id: number, wordTimestamps: boolean): TranscriptionSegment {
  const logprobs = segment.words.map((w) => Math.log(Math.max(w.probability, MIN_PROBABILITY)));
  const out: TranscriptionSegment = {
    id,
    start: segment.start,
    end: segment.end,
    text: segment.text,
    tokens: [],
    temperature: 0,
    // the mean natural log of the words' posterior probabilities (pocketsphinx has no token probabilities)
    avgLogprob: logprobs.length ? logprobs.reduce((a, b) => a + b, 0) / logprobs.length : 0,
    compressionRatio: compressionRatio(segment.text),
    noSpeechProb: 0,
  };
  if (wordTimestamps) out.words = segment.words.map(({ word, start, end }) => ({ word, start, end }));
  return out;
}

class SphinxSttModel implements SttModel {
  readonly task = 'stt' as const;
  readonly engine = SPHINX_ENGINE;
  readonly sampleRate = SAMPLE_RATE;
  readonly capabilities = { translate: false, wordTimestamps: true, languages: ['en'] as const, vadChunking: false }; // segments on silence itself

  constructor(
    readonly id: string,
    private native: NativeSphinxModel | null,
  ) {}

  /** `delayMs` opts into words of the open utterance: how long one must stay in the partial hypothesis. */
  readonly declaresDelay = true;

  async transcribe(samples: Float32Array, options: TranscribeOptions = {}): Promise<TranscriptionResult> {
    const native = this.native;
    if (!native) throw unloadedModelError(this.id);
    const result = await native.transcribe(samples, abortFlagFor(options.signal));
    const maxWords = options.maxTokens && options.maxTokens > 0 ? Math.floor(options.maxTokens) : 0;
    const segments = truncateWords(result.segments, maxWords).map((segment, i) => toSegment(segment, i, options.wordTimestamps ?? false));
    // the native call returns every utterance at once; each goes to onSegment before the result resolves
    for (const segment of segments) options.onSegment?.(segment, 'en');
    return {
      text: segments.map((s) => s.text).join(' '),
      language: 'en',
      duration: samples.length / SAMPLE_RATE,
      segments,
    };
  }

  /**
   * Live transcription on a decoder of its own, which replays `transcribe` block by block as the audio arrives. By
   * default each utterance's words are sent when the decoder's VAD ends it, so a turn's transcript is the file's.
   * With `delayMs`, words of the open utterance are sent too once the partial hypotheses of the last `delayMs`
   * (in 128 ms blocks) agree on them and they are not the newest one's last word: sooner, but pocketsphinx's
   * end-of-utterance passes often revise them and sent words stay. `prompt` is ignored.
   */
  async createStreamingSession(options: StreamingOptions = {}): Promise<SttStreamingSession> {
    const native = this.native;
    if (!native) throw unloadedModelError(this.id);
    const stableBlocks = options.delayMs !== undefined ? Math.min(1000, Math.max(1, Math.round(options.delayMs / BLOCK_MS))) : 0;
    const stream = await native.openStream({ stableBlocks });
    // async: the native methods throw `closed` synchronously, callers expect a rejection
    return {
      feed: async (samples, signal) => stream.feed(samples, abortFlagFor(signal)),
      finish: async (signal) => stream.finish(abortFlagFor(signal)),
      reset: async () => stream.reset(),
      close: async () => stream.close(),
    };
  }

  /** The decoders alive in the model's pools (null once unloaded). */
  decoderStats(): { transcribe: NativeSphinxPoolStats; live: NativeSphinxPoolStats } | null {
    return this.native?.stats() ?? null;
  }

  async dispose(): Promise<void> {
    // idle decoders are freed now, those in use when their transcription ends
    this.native?.release();
    this.native = null;
  }
}

/**
 * The decoders alive in a `sphinx` model's pools, for tests and diagnostics: `transcribe` serves whole clips,
 * `live` streaming sessions (one decoder each while open). Null for any other model or once unloaded.
 */
export function sphinxDecoderStats(model: SttModel): { transcribe: NativeSphinxPoolStats; live: NativeSphinxPoolStats } | null {
  return model instanceof SphinxSttModel ? model.decoderStats() : null;
}

/** The US English model a platform package ships beside its addon (docs/install.md); none for a source build. */
function bundledModelFiles(): NativeSphinxLoadOptions {
  const dir = nativeOrigin().sphinxModelDir;
  return dir ? { hmm: path.join(dir, 'en-us'), lm: path.join(dir, 'en-us.lm.bin'), dict: path.join(dir, 'cmudict-en-us.dict') } : {};
}

/**
 * Loads pocketsphinx with the platform package's or Debian's US English model (or the given files). A missing library or model becomes a
 * 400 `invalid_model` whose message names the packages to install.
 */
export async function loadSphinxModel(id: string = SPHINX_MODEL_ID, options: NativeSphinxLoadOptions = {}): Promise<SttModel> {
  try {
    return new SphinxSttModel(id, await loadNative().SphinxModel.load({ ...bundledModelFiles(), ...options }));
  } catch (error) {
    throw unavailableModelError(id, error);
  }
}
