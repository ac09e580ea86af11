/**
 * Speech-to-text on NVIDIA's Parakeet TDT models in whisper.cpp's ggml format (`ggml-org/parakeet-GGUF`'s
 * `ggml-parakeet-tdt-0.6b-v3-*.bin`, or v2 converted by whisper.cpp's script), run by the native batcher, which
 * reproduces whisper.cpp's libparakeet (docs/models.md "Parakeet models"). Each clip is decoded whole, greedily;
 * concurrent clips share the encoder's and decoder's passes, and each gets the tokens it gets alone. Segments are the transcript cut after each
 * sentence's final punctuation; words run from a word's first piece to its last, with the TDT durations' end times.
 */
import type { NativeParakeetInfo, NativeParakeetModel, NativeParakeetToken } from '../native/addon.js';
import { loadNative } from '../native/load.js';
import { apiErrorFromNative, unloadedModelError } from '../errors.js';
import { abortFlagFor, loadUnlessAborted } from '../native/abort.js';
import { GGML_FILE_MAGIC, readFileHead } from './file-head.js';
import { RedecodingStreamingSession } from './redecoding-streaming.js';
import type {
  Engine,
  ResolvedModel,
  StreamingOptions,
  SttModel,
  SttStreamingSession,
  TranscribeOptions,
  TranscriptionResult,
  TranscriptionSegment,
  TranscriptionWord,
} from './types.js';
import { compressionRatio } from './whisper.js';

const SAMPLE_RATE = 16000;

/** The 25 European languages of parakeet-tdt-0.6b-v3 (its model card); v2 is English only. */
export const PARAKEET_V3_LANGUAGES = [
  'bg', 'hr', 'cs', 'da', 'nl', 'en', 'et', 'fi', 'fr', 'de', 'el', 'hu', 'it', 'lv', 'lt', 'mt', 'pl', 'pt', 'ro', 'ru', 'sk', 'sl', 'es', 'sv', 'uk',
] as const; // prettier-ignore

/** What a multilingual model reports as the language when the request named none: it does not identify languages. */
export const UNIDENTIFIED_LANGUAGE = 'unknown';

/** The most `maxTokens` the native batcher takes. */
const MAX_TOKENS = 2 ** 30;

/** Live: the window past which finished sentences are committed; a re-decode costs in proportion to what it holds. */
const LIVE_WINDOW_SECONDS = 12;

/**
 * True when the file is a libparakeet model: the ggml magic, fifteen int32 hparams (the subsampling factor 8 at the
 * ninth) and the mel filter bank's own shape (n_mel, n_fft / 2 + 1) right after them. A Whisper file has 201 (its
 * n_fft / 2 + 1) where Parakeet has its subsampling factor; a Silero VAD file has a length-prefixed name there.
 */
export async function isParakeetFile(path: string): Promise<boolean> {
  const size = 4 + 17 * 4;
  const head = await readFileHead(path, size);
  if (!head || head.length < size || head.readUInt32LE(0) !== GGML_FILE_MAGIC) return false;
  const field = (i: number): number => head.readInt32LE(4 + 4 * i);
  const [nVocab, nMels, nFft, subsampling, nPredLayers, nDurations, nMaxSymbols, nMel, nFb] = [0, 5, 7, 8, 12, 13, 14, 15, 16].map(field) as [
    number, number, number, number, number, number, number, number, number,
  ]; // prettier-ignore
  return (
    nVocab > 0 &&
    nVocab < 51864 && // Whisper's tokenizer starts there
    subsampling === 8 &&
    nMels > 0 &&
    nMels % 8 === 0 &&
    nMel === nMels &&
    nFft >= 2 &&
    nFb === nFft / 2 + 1 &&
    nPredLayers > 0 &&
    nDurations > 0 &&
    nDurations <= 64 &&
    nMaxSymbols > 0
  );
}

/** A sentence ends at a token that ends in one of these (the pieces carry their punctuation). */
const SENTENCE_END = /[.?!…。？！]$/u;
/** A segment without a sentence end is cut at the next word past this: subtitles stay readable, live windows cut. */
const MAX_SEGMENT_SECONDS = 10;

/** Tokens grouped into words: a word starts at a piece that starts one (or at the first piece) and ends before the next. */
function wordsOf(tokens: NativeParakeetToken[]): TranscriptionWord[] {
  const words: TranscriptionWord[] = [];
  for (const token of tokens) {
    const last = words.at(-1);
    if (token.text === '') continue; // control pieces
    if (!last || token.wordStart) words.push({ word: token.text.trim(), start: token.start, end: token.end });
    else {
      last.word += token.text;
      last.end = Math.max(last.end, token.end);
    }
  }
  return words.filter((w) => w.word !== '');
}

/** The transcript cut into sentences (and sentences longer than 10 s at a word), with the vendor's segment fields. */
export function parakeetSegments(tokens: NativeParakeetToken[], wordTimestamps: boolean): TranscriptionSegment[] {
  // a sentence's last word keeps any pieces after its punctuation: the next segment starts with the next word
  const groups: NativeParakeetToken[][] = [[]];
  let sentenceEnded = false;
  for (const token of tokens) {
    const current = groups.at(-1) as NativeParakeetToken[];
    const tooLong = current.length > 0 && token.start - (current[0] as NativeParakeetToken).start >= MAX_SEGMENT_SECONDS;
    if ((sentenceEnded || tooLong) && token.wordStart) {
      groups.push([]);
      sentenceEnded = false;
    }
    (groups.at(-1) as NativeParakeetToken[]).push(token);
    if (SENTENCE_END.test(token.text)) sentenceEnded = true;
  }
  const segments: TranscriptionSegment[] = [];
  for (const group of groups) {
    const text = group.map((t) => t.text).join('');
    if (text.trim() === '') continue;
    const spoken = group.filter((t) => t.text !== '');
    const segment: TranscriptionSegment = {
      id: segments.length,
      start: (spoken[0] as NativeParakeetToken).start,
      end: Math.max(...spoken.map((t) => t.end)),
      // the first word of the transcript has no space before it; a segment's text starts with one, as Whisper's do
      text: text.startsWith(' ') ? text : ` ${text}`,
      tokens: group.map((t) => t.id),
      temperature: 0,
      // log p: the token among the tokens and the blank (`logprob` also shares its mass with the durations)
      avgLogprob: group.reduce((sum, t) => sum + Math.log(t.p), 0) / group.length,
      compressionRatio: compressionRatio(text),
      noSpeechProb: 0,
    };
    if (wordTimestamps) segment.words = wordsOf(group);
    segments.push(segment);
  }
  return segments;
}

class ParakeetSttModel implements SttModel {
  readonly task = 'stt' as const;
  readonly engine = 'parakeet';
  readonly sampleRate = SAMPLE_RATE;
  readonly capabilities: SttModel['capabilities'];
  /** Decodes the turn every `delayMs` (--realtime-transcription-delay-ms) of new audio: the model declares it. */
  readonly declaresDelay = true;
  readonly batchSize?: number;

  constructor(
    readonly id: string,
    private native: NativeParakeetModel | null,
    readonly info: NativeParakeetInfo,
    maxBatch: number,
  ) {
    // On a GPU the jobs admitted at once all join the native batch. On a CPU the batcher encodes one clip at a time
    // anyway, and jobs left waiting in the scheduler (up to --model-concurrency run) let a live session skip the
    // passes it no longer needs, which a clip queued natively cannot (docs/performance.md "Parakeet").
    if (info.gpu) this.batchSize = maxBatch;
    this.capabilities = {
      translate: false,
      wordTimestamps: true,
      languages: info.multilingual ? PARAKEET_V3_LANGUAGES : ['en'],
      vadChunking: true,
      // libparakeet's short path (50 s in every converted file): longer uploads are cut at pauses into chunks this long
      chunkSeconds: Math.min(Math.max(info.nAudioCtx / 100, 10), 60),
    };
  }

  private get loaded(): NativeParakeetModel {
    if (!this.native) throw unloadedModelError(this.id);
    return this.native;
  }

  /** `prompt` and `temperature` do not apply: the decoder is greedy and takes no context. */
  async transcribe(samples: Float32Array, options: TranscribeOptions = {}): Promise<TranscriptionResult> {
    const native = this.loaded;
    // more tokens than a clip can have (one per encoder frame and symbol) is the same as no limit
    const maxTokens = options.maxTokens && options.maxTokens > 0 ? Math.min(Math.floor(options.maxTokens), MAX_TOKENS) : 0;
    // concurrent clips (requests, live sessions) join the model's batcher and share its passes
    const tokens = await Promise.resolve()
      .then(() => native.transcribe(samples, { maxTokens }, abortFlagFor(options.signal)))
      .catch((error: unknown) => {
        // a clip over 655 s in one piece (the server cuts uploads into chunks; a caller of the engine may not)
        throw apiErrorFromNative(error, { codes: ['invalid_argument'] });
      });
    const segments = parakeetSegments(tokens, options.wordTimestamps ?? false);
    // the language was checked against `capabilities` by the speech-to-text service; the model names none itself
    const language = options.language ?? (this.info.multilingual ? UNIDENTIFIED_LANGUAGE : 'en');
    for (const segment of segments) options.onSegment?.(segment, language);
    return {
      text: segments
        .map((s) => s.text)
        .join('')
        .trim(),
      language,
      duration: samples.length / SAMPLE_RATE,
      segments,
    };
  }

  async createStreamingSession(options: StreamingOptions = {}): Promise<SttStreamingSession> {
    return new RedecodingStreamingSession(this, options, LIVE_WINDOW_SECONDS);
  }

  async dispose(): Promise<void> {
    // the weights are freed now, or by the last transcription still running
    this.native?.release();
    this.native = null;
  }
}

export interface ParakeetEngineOptions {
  /** Clips decoded together (--stt-max-batch-size); default 8. */
  maxBatchSize?: number;
}

export function createParakeetEngine(options: ParakeetEngineOptions = {}): Engine<SttModel> {
  const maxBatch = options.maxBatchSize ?? 8;
  return {
    name: 'parakeet',
    task: 'stt',
    detect: isParakeetFile,
    async load(model: ResolvedModel, signal?: AbortSignal): Promise<SttModel> {
      if (!model.path) throw new Error('the parakeet engine needs a model file');
      const path = model.path;
      const native = await loadUnlessAborted(signal, () => loadNative().ParakeetModel.load(path, { maxBatch }));
      return new ParakeetSttModel(model.id, native, native.info(), maxBatch);
    },
  };
}

export const parakeetEngine: Engine<SttModel> = createParakeetEngine();
