/**
 * Fuzz target `flite-text`: what the built-in flite engine does with any text, voice and speed. The engine runs in
 * a child process (FliteChild), so an input that breaks libflite is a crash found, not the fuzzer's own death.
 *
 * Findings: the child dies (crash); a synthesis does not answer in time, or runs far slower than real time
 * (hang); the engine rejects the text, or speaks more audio than its characters or its tokens could hold
 * (failure).
 */
import { fork, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import { FLITE_INSTALLED } from '../helpers/transcripts.js';
import { generateText, mutateBytes, mutateText } from './mutators.js';
import type { Rng } from './random.js';
import { jsonFormat, type Finding, type FuzzTarget } from './target.js';

export interface FliteInput {
  text: string;
  /** slt, kal, awb or rms. */
  voice: string;
  /** 0.25..4. */
  speed: number;
}

export type FliteChildRequest = FliteInput & { id: number };
export type FliteChildReply = { ready: true; sampleRate: number } | { id: number; samples: number; ms: number } | { id: number; error: string };

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
const WORKER = new URL('./flite-worker.js', import.meta.url);
const READY_MS = 60_000;

/** How long the synthesis of `input` may go on before it is stopped as a hang. */
export function stopMs(input: FliteInput): number {
  return (STOP_MS_PER_4096_CHARS * Math.max(1, Math.ceil(input.text.length / MAX_TEXT))) / Math.min(1, input.speed);
}

/**
 * glibc's checking allocator, where it is installed: a heap overflow then aborts when the block is freed, in the
 * synthesis that made it, instead of corrupting the heap for a later input to trip over.
 */
function heapCheckEnv(): NodeJS.ProcessEnv {
  const debugMalloc = ['/usr/lib/x86_64-linux-gnu/libc_malloc_debug.so.0', '/usr/lib/aarch64-linux-gnu/libc_malloc_debug.so.0'].find((f) => fs.existsSync(f));
  return debugMalloc ? { LD_PRELOAD: debugMalloc, GLIBC_TUNABLES: 'glibc.malloc.check=3' } : {};
}

/** The last lines of a child's stderr, for a finding's detail. */
function tail(text: string): string {
  return text.trim().split('\n').slice(-3).join(' | ').slice(-400);
}

/**
 * The flite engine in a child process, started on first use and again after it died or hung. One synthesis at
 * a time.
 */
export class FliteChild {
  private child: ChildProcess | null = null;
  private sampleRate = 0;
  private stderr = '';
  private nextId = 1;

  /** Speaks `input`; `died` and `timeout` leave no child behind (the next call starts a fresh one). */
  async speak(input: FliteInput, timeoutMs: number): Promise<SpeakOutcome> {
    const child = await this.started();
    const id = this.nextId++;
    const outcome = await new Promise<SpeakOutcome>((resolve) => {
      const onMessage = (reply: FliteChildReply): void => {
        if (!('id' in reply) || reply.id !== id) return;
        settle('error' in reply ? { kind: 'error', message: reply.error } : { kind: 'audio', seconds: reply.samples / this.sampleRate, ms: reply.ms });
      };
      const onExit = (code: number | null, signal: NodeJS.Signals | null): void => {
        settle({ kind: 'died', detail: `${signal ?? `exit code ${code}`}${this.stderr ? `: ${tail(this.stderr)}` : ''}` });
      };
      const timer = setTimeout(() => settle({ kind: 'timeout', ms: timeoutMs }), timeoutMs);
      const settle = (result: SpeakOutcome): void => {
        clearTimeout(timer);
        child.off('message', onMessage);
        child.off('exit', onExit);
        resolve(result);
      };
      child.on('message', onMessage);
      child.on('exit', onExit);
      child.send(
        { id, ...input } satisfies FliteChildRequest,
        (error) => error && settle({ kind: 'died', detail: `could not be sent the input: ${error.message}` }),
      );
    });
    if (outcome.kind === 'died' || outcome.kind === 'timeout') await this.stop();
    return outcome;
  }

  /** Kills the child, if any, and waits for it to go. */
  async stop(): Promise<void> {
    const child = this.child;
    this.child = null;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill('SIGKILL');
    await exited;
  }

  private async started(): Promise<ChildProcess> {
    if (this.child && this.child.exitCode === null && this.child.signalCode === null) return this.child;
    this.stderr = '';
    const child = fork(WORKER, [], { serialization: 'advanced', stdio: ['ignore', 'ignore', 'pipe', 'ipc'], env: { ...process.env, ...heapCheckEnv() } });
    child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (this.stderr = (this.stderr + chunk).slice(-4096)));
    this.sampleRate = await new Promise<number>((resolve, reject) => {
      const timer = setTimeout(() => fail(`did not load flite within ${READY_MS} ms`), READY_MS);
      const onMessage = (reply: FliteChildReply): void => {
        if ('ready' in reply) done(() => resolve(reply.sampleRate));
      };
      const onExit = (code: number | null, signal: NodeJS.Signals | null): void => fail(`exited (${signal ?? code}) before it was ready: ${tail(this.stderr)}`);
      const fail = (why: string): void => done(() => reject(new Error(`the flite child ${why}`)));
      const done = (then: () => void): void => {
        clearTimeout(timer);
        child.off('message', onMessage);
        child.off('exit', onExit);
        then();
      };
      child.on('message', onMessage);
      child.on('exit', onExit);
    }).catch(async (error: unknown) => {
      child.kill('SIGKILL');
      throw error;
    });
    this.child = child;
    return child;
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
