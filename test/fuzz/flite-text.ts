/**
 * Fuzz target `flite-text`: what the built-in flite engine does with any text, voice and speed. The engine runs in
 * a child process (FliteChild), so an input that breaks libflite is a crash found, not the fuzzer's own death.
 *
 * Findings: the child dies (crash); a synthesis does not answer in time, or runs far slower than real time
 * (hang); the engine rejects the text, or speaks more audio than its characters or its tokens could hold
 * (failure).
 */
import { FLITE_INSTALLED } from '../helpers/transcripts.js';
import { generateText, mutateBytes, mutateText } from './mutators.js';
import type { Rng } from './random.js';
import { jsonFormat, type Finding, type FuzzTarget } from './target.js';
import { WorkerChild } from './worker-child.js';

export interface FliteInput {
  text: string;
  /** slt, kal, awb or rms. */
  voice: string;
  /** 0.25..4. */
  speed: number;
}

/** What the child (flite-worker.ts) answers: how much audio, and how long the synthesis took. */
export type FliteReply = { samples: number; ms: number } | { error: string };
export type FliteReady = { sampleRate: number };

export type SpeakOutcome =
  { kind: 'audio'; seconds: number; ms: number } | { kind: 'error'; message: string } | { kind: 'died'; detail: string } | { kind: 'timeout'; ms: number };

const VOICES = ['slt', 'kal', 'awb', 'rms'];

/** The longest input generated: the server's default --max-input-chars. */
const MAX_TEXT = 4096;
/** Most inputs are at most this long (what the speech route hands the engine per sentence): fast cases. */
const SHORT_TEXT = 400;
/**
 * A synthesis that has not answered after this long, per 4096 characters at speed 1 (longer at slower speeds), is
 * stopped as a hang. Not a tight bound: 4096 characters can legitimately hold 12 minutes of speech ("19 19 19 ..."),
 * some 10 s of work; what is too slow for its audio is caught by MIN_REALTIME_FACTOR.
 */
const STOP_MS_PER_4096_CHARS = 60_000;
/** Every synthesis runs at least this many times faster than real time, GRACE_MS aside (flite: 40-75x). */
const MIN_REALTIME_FACTOR = 10;
const GRACE_MS = 5000;
/** The most audio a character gives at speed 1 (a symbol said as a word is about 0.6 s)... */
const MAX_AUDIO_SECONDS_PER_CHAR = 1;
/** ...and a token, what lies between spaces (64 characters spelled out is well under this). */
const MAX_AUDIO_SECONDS_PER_TOKEN = 60;

/** How long the synthesis of `input` may go on before it is stopped as a hang. */
export function stopMs(input: FliteInput): number {
  return (STOP_MS_PER_4096_CHARS * Math.max(1, Math.ceil(input.text.length / MAX_TEXT))) / Math.min(1, input.speed);
}

/** The flite engine in a child process (flite-worker.ts), started on first use and again after it died or hung. */
export class FliteChild {
  private readonly worker = new WorkerChild<FliteInput, FliteReply, FliteReady>(new URL('./flite-worker.js', import.meta.url), 'flite');

  /** Speaks `input`; `died` and `timeout` leave no child behind (the next call starts a fresh one). */
  async speak(input: FliteInput, timeoutMs: number): Promise<SpeakOutcome> {
    const outcome = await this.worker.call(input, timeoutMs);
    if (outcome.kind !== 'reply') return outcome;
    const { reply } = outcome;
    return 'error' in reply ? { kind: 'error', message: reply.error } : { kind: 'audio', seconds: reply.samples / this.worker.ready.sampleRate, ms: reply.ms };
  }

  stop(): Promise<void> {
    return this.worker.stop();
  }
}

/** What a finished synthesis of `input` says about the engine: null when all is well. */
export function judge(input: FliteInput, outcome: SpeakOutcome): Finding | null {
  switch (outcome.kind) {
    case 'died':
      return { kind: 'crash', detail: `the engine's process died: ${outcome.detail}` };
    case 'timeout':
      return { kind: 'hang', detail: `no result within ${outcome.ms} ms` };
    case 'error':
      return { kind: 'failure', detail: `rejected: ${outcome.message}` };
    case 'audio': {
      const { seconds, ms } = outcome;
      const tokens = input.text.match(/[^\s\p{Cc}]+/gu)?.length ?? 0; // split wherever any tokenizer might split
      const maxSeconds = (5 + Math.min(MAX_AUDIO_SECONDS_PER_CHAR * input.text.length, MAX_AUDIO_SECONDS_PER_TOKEN * tokens)) / input.speed;
      if (seconds > maxSeconds) {
        return { kind: 'failure', detail: `${seconds.toFixed(1)} s of audio from ${input.text.length} characters in ${tokens} tokens` };
      }
      if (ms > GRACE_MS + (1000 * seconds) / MIN_REALTIME_FACTOR) return { kind: 'hang', detail: `${ms.toFixed(0)} ms for ${seconds.toFixed(1)} s of audio` };
      return null;
    }
  }
}

const seedTexts = new WeakMap<readonly Uint8Array[], string[]>();

/** The seed files as text, decoded once per seed list. */
function asTexts(seeds: readonly Uint8Array[]): string[] {
  let texts = seedTexts.get(seeds);
  if (!texts) seedTexts.set(seeds, (texts = seeds.map((seed) => Buffer.from(seed).toString('utf8'))));
  return texts;
}

export function fliteTextTarget(): FuzzTarget<FliteInput> {
  const child = new FliteChild();
  return {
    name: 'flite-text',
    format: jsonFormat<FliteInput>(),
    async unavailable() {
      return FLITE_INSTALLED ? null : "Debian's libflite1 is not installed";
    },
    generate(rng: Rng, seeds: readonly Uint8Array[]): FliteInput {
      const maxLength = rng.chance(0.95) ? SHORT_TEXT : MAX_TEXT;
      const texts = asTexts(seeds);
      const mutatedSeed = (): string => {
        let text = texts.length > 0 ? rng.pick(texts) : '';
        for (let n = rng.int(1, 4); n > 0; n--) text = mutateText(rng, text, texts, maxLength);
        return text;
      };
      const mutatedBytes = (): string =>
        Buffer.from(mutateBytes(rng, seeds.length > 0 ? rng.pick(seeds) : new Uint8Array(), seeds, maxLength)).toString('utf8');
      const text = rng.weighted<() => string>([
        [9, mutatedSeed],
        [2, mutatedBytes], // invalid UTF-8 decodes to U+FFFD
        [9, () => generateText(rng, maxLength)],
      ])();
      // the text front end is what breaks, and it is the same for every voice and speed: mostly the cheapest
      // (kal, a diphone voice, and speed 4 synthesise several times faster; 0.25 four times slower), so more
      // texts fit the time
      const speed = rng.weighted<() => number>([
        [10, () => 1],
        [10, () => 4],
        [1, () => 0.25],
        [1, () => 0.25 + rng.float() * 3.75],
      ])();
      const voice = rng.chance(0.5) ? 'kal' : rng.pick(VOICES);
      return { text, voice, speed };
    },
    async run(input: FliteInput): Promise<Finding | null> {
      return judge(input, await child.speak(input, stopMs(input)));
    },
    teardown: () => child.stop(),
  };
}
