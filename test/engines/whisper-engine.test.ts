import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { whisperEngine } from '../../src/engines/whisper.js';
import type { NativeWhisperParams, NativeWhisperResult } from '../../src/native/addon.js';
import { loadNative } from '../../src/native/load.js';
import { planTranscription } from '../../src/services/stt/transcriber.js';
import type { SttModel, TranscriptionResult, TranscriptionSegment } from '../../src/engines/types.js';
import { JFK_WAV, SHARED, SILERO_V6 } from '../helpers/paths.js';
import { readWavMono } from '../helpers/wav.js';
import { whisperModelGenerator, whisperTestModel } from '../helpers/whisper-models.js';

// Random-weight models (scripts/make-whisper-test-model.mjs): the text is garbage, the plumbing is real.
const TEXT_TOKEN_LIMIT = 50257; // ids below are text tokens in both vocabularies (then <|endoftext|>, specials, timestamps)
const TENSORLESS_BASE = path.join(SHARED, 'models', 'whisper-format', 'for-tests-ggml-tiny.bin');

const { samples: jfk } = readWavMono(JFK_WAV);
const JFK_SECONDS = jfk.length / 16000;

function repeat(samples: Float32Array, times: number): Float32Array {
  const out = new Float32Array(samples.length * times);
  for (let i = 0; i < times; i++) out.set(samples, i * samples.length);
  return out;
}

function textTokens(result: TranscriptionResult): number {
  return result.segments.reduce((n, s) => n + s.tokens.filter((t) => t < TEXT_TOKEN_LIMIT).length, 0);
}

function assertSaneSegments(result: TranscriptionResult, seconds: number): void {
  assert.ok(result.segments.length > 0, 'at least one segment');
  let previousEnd = 0;
  result.segments.forEach((s, i) => {
    assert.equal(s.id, i);
    assert.ok(s.start >= previousEnd - 1e-9, `segment ${i} starts at ${s.start}, before the previous end ${previousEnd}`);
    assert.ok(s.start <= s.end, `segment ${i}: ${s.start} > ${s.end}`);
    assert.ok(s.end <= seconds + 1e-9, `segment ${i} ends at ${s.end}, past the clip (${seconds} s)`);
    assert.equal(typeof s.text, 'string');
    assert.ok(s.tokens.length > 0 && s.tokens.every((t) => Number.isInteger(t) && t >= 0));
    assert.ok(s.temperature >= 0 && s.temperature <= 1);
    assert.ok(Number.isFinite(s.avgLogprob) && s.avgLogprob <= 0);
    assert.ok(s.noSpeechProb >= 0 && s.noSpeechProb <= 1);
    assert.ok(Number.isFinite(s.compressionRatio) && s.compressionRatio >= 0);
    previousEnd = s.end;
  });
}

describe('whisper engine', () => {
  let tinyPath: string;
  let tinyEnPath: string;
  let tiny: SttModel;
  let tinyEn: SttModel;
  let tmp: string;

  before(async () => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'voxd-whisper-'));
    tinyPath = await whisperTestModel({ size: 'tiny' });
    tinyEnPath = await whisperTestModel({ size: 'tiny', en: true });
    tiny = await whisperEngine.load({ id: 'tiny', path: tinyPath, projector: null });
    tinyEn = await whisperEngine.load({ id: 'tiny.en', path: tinyEnPath, projector: null });
  });

  after(async () => {
    await tiny?.dispose();
    await tinyEn?.dispose();
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  it('generates deterministic models: the same seed gives the same bytes', async () => {
    const again = await (await whisperModelGenerator()).writeWhisperTestModel(path.join(tmp, 'again.bin'), { size: 'tiny', en: true });
    const hash = (file: string) => createHash('sha256').update(fs.readFileSync(file)).digest('hex');
    assert.equal(hash(again), hash(tinyEnPath));
    fs.rmSync(again);
  });

  it('detects whisper.cpp files from the header, not the Silero VAD file (same magic) or audio', async () => {
    assert.equal(await whisperEngine.detect(tinyPath), true);
    assert.equal(await whisperEngine.detect(tinyEnPath), true);
    assert.equal(await whisperEngine.detect(SILERO_V6), false);
    assert.equal(await whisperEngine.detect(JFK_WAV), false);
    assert.equal(await whisperEngine.detect('/nonexistent/model.bin'), false);
  });

  it('describes the model and its capabilities', () => {
    assert.equal(tiny.task, 'stt');
    assert.equal(tiny.engine, 'whisper');
    assert.equal(tiny.sampleRate, 16000);
    assert.equal(tiny.capabilities.translate, true);
    assert.equal(tiny.capabilities.wordTimestamps, true);
    assert.ok(tiny.capabilities.languages?.includes('en') && tiny.capabilities.languages.includes('de'));
    assert.equal(tiny.capabilities.languages?.length, 99);
    assert.deepEqual(tinyEn.capabilities, { translate: false, wordTimestamps: true, languages: ['en'], vadChunking: true });
  });

  it('transcribes jfk.wav into sane segments and reports the detected language', async () => {
    const result = await tiny.transcribe(jfk);
    assertSaneSegments(result, JFK_SECONDS);
    assert.match(result.language, /^[a-z]{2,3}$/);
    assert.ok(tiny.capabilities.languages?.includes(result.language));
    assert.equal(result.duration, JFK_SECONDS);
    assert.equal(
      result.text,
      result.segments
        .map((s) => s.text)
        .join('')
        .trim(),
    );
    assert.equal(result.segments[0]?.words, undefined);
  });

  it('keeps times in order across 30 s windows and streams every segment once, before the result', async () => {
    const long = repeat(jfk, 3);
    const seen: TranscriptionSegment[] = [];
    const languages = new Set<string>();
    const result = await tiny.transcribe(long, {
      onSegment: (segment, language) => {
        seen.push(segment);
        languages.add(language);
      },
    });
    const atResolve = seen.length;
    await nextTurn();
    await nextTurn();
    assertSaneSegments(result, long.length / 16000);
    assert.ok(result.segments.length >= 2, `expected segments from more than one window, got ${result.segments.length}`);
    assert.equal(atResolve, result.segments.length, 'every segment reached onSegment before the promise resolved');
    assert.equal(seen.length, atResolve, 'no segment after the promise resolved');
    assert.deepEqual(seen, result.segments);
    assert.deepEqual([...languages], [result.language]);
  });

  it('honours a given language and English-only models', async () => {
    assert.equal((await tiny.transcribe(jfk, { language: 'de' })).language, 'de');
    const en = await tinyEn.transcribe(jfk);
    assert.equal(en.language, 'en');
    assertSaneSegments(en, JFK_SECONDS);
    // the speech-to-text service refuses what the model's capabilities rule out (the one place they are checked)
    assert.throws(() => planTranscription(tinyEn, { language: 'fr' }), { code: 'invalid_request' });
    await assert.rejects(tiny.transcribe(jfk, { language: 'klingon' }), { code: 'invalid_argument' });
  });

  it('translates only with multilingual models', async () => {
    assert.throws(() => planTranscription(tinyEn, { language: 'fr', task: 'translate' }), { code: 'invalid_request' });
    assert.deepEqual(planTranscription(tinyEn, { task: 'translate' }), { language: null, translate: false }, 'English audio is transcribed');
    assert.deepEqual(planTranscription(tiny, { language: 'de', task: 'translate' }), { language: null, translate: true });
    assertSaneSegments(await tiny.transcribe(jfk, { translate: true }), JFK_SECONDS);
  });

  it('gives word timestamps within their segment when asked', async () => {
    const result = await tiny.transcribe(repeat(jfk, 3), { wordTimestamps: true, prompt: 'So, my fellow Americans.' });
    assertSaneSegments(result, (3 * jfk.length) / 16000);
    let words = 0;
    for (const segment of result.segments) {
      assert.ok(Array.isArray(segment.words));
      let previousEnd = segment.start;
      for (const word of segment.words ?? []) {
        assert.ok(word.word.length > 0 && !word.word.startsWith(' '));
        assert.ok(word.start >= previousEnd - 1e-9 && word.start <= word.end && word.end <= segment.end + 1e-9, JSON.stringify({ word, segment }));
        previousEnd = word.end;
        words++;
      }
    }
    assert.ok(words > 0);
  });

  it('limits the text tokens of the whole result with maxTokens', async () => {
    const long = repeat(jfk, 3);
    const unlimited = await tiny.transcribe(long);
    assert.ok(textTokens(unlimited) > 2, `precondition: ${textTokens(unlimited)} text tokens without a limit`);
    for (const maxTokens of [1, 2]) {
      const limited = await tiny.transcribe(long, { maxTokens });
      assert.ok(textTokens(limited) > 0 && textTokens(limited) <= maxTokens, `maxTokens ${maxTokens}: ${textTokens(limited)} text tokens`);
      assertSaneSegments(limited, long.length / 16000);
    }
  });

  it('uses the temperature it is given, with no fallback', async () => {
    const result = await tiny.transcribe(jfk, { temperature: 0.5 });
    assert.ok(result.segments.every((s) => s.temperature === 0.5));
  });

  it('gives each job the same tokens and timestamps in a batch as alone, and a job cancelled mid-batch leaves the rest alone', async () => {
    // The batcher's promise (docs/architecture.md "Batched Whisper"): every row meets the same kernels in any batch,
    // so a job's output, probabilities included, does not depend on what ran beside it. A mix of lengths (one, two
    // and three 30 s windows), languages given and detected, translation, a prompt, greedy with and without the
    // fallback (whose sampled attempts draw from the job's own seeds) and a fixed temperature.
    // several windows per encoder pass, as on a GPU (a CPU's default is one), so the batched encoder is checked too
    const native = await loadNative().WhisperModel.load(tinyPath, { maxBatch: 8, maxEncode: 4 });
    try {
      const jobs: [Float32Array, NativeWhisperParams][] = [
        [jfk, { language: 'en', temperatureInc: 0 }],
        [jfk.subarray(0, 5 * 16000), {}],
        [repeat(jfk, 3), { language: 'de', temperatureInc: 0 }],
        [repeat(jfk, 6), { language: 'en', initialPrompt: 'Ask not.', temperatureInc: 0 }],
        [jfk, { language: 'fr', translate: true, temperatureInc: 0 }],
        [jfk.subarray(16000, 9 * 16000), { temperature: 0.4, temperatureInc: 0 }],
      ];
      const alone: NativeWhisperResult[] = [];
      for (const [samples, params] of jobs) alone.push(await native.transcribe(samples, params));
      const before = native.timings();

      const cancel = new (loadNative().AbortFlag)();
      let cancelledSegments = 0;
      const cancelled = native.transcribe(
        repeat(jfk, 6),
        { language: 'en', temperatureInc: 0 },
        () => {
          cancelledSegments++;
          cancel.abort();
        },
        cancel,
      );
      const cancelledOutcome = assert.rejects(cancelled, { code: 'aborted' });
      const batched = await Promise.all(jobs.map(([samples, params]) => native.transcribe(samples, params)));
      await cancelledOutcome;
      assert.equal(cancelledSegments, 1, 'no segment reaches JS after the abort');

      batched.forEach((result, i) => assert.deepEqual(result, alone[i], `job ${i}`));
      const after = native.timings();
      const calls = after.decodeCalls - before.decodeCalls;
      const rows = after.decodeRows - before.decodeRows;
      assert.ok(rows > calls * 1.5, `the jobs were decoded together (${rows} rows in ${calls} decoder passes)`);
      assert.ok(after.encodeWindows - before.encodeWindows > after.encodeCalls - before.encodeCalls, 'windows were encoded together');
      assert.equal(batched[2]?.language, 'de');
      assert.ok(batched.every((r) => r.segments.every((s) => s.tokens.length > 0)));

      // and the model keeps serving
      assert.deepEqual(await native.transcribe(jfk, jobs[0]?.[1]), alone[0]);
    } finally {
      native.release();
    }
  });

  it('gives bit-identical results whatever the thread count without flash attention', async () => {
    const native = await loadNative().WhisperModel.load(tinyPath, { flashAttn: false });
    try {
      // whisper.cpp's own path (word timestamps), with its per-request thread count
      const first = await native.transcribe(jfk, { threads: 1, wordTimestamps: true });
      assert.deepEqual(await native.transcribe(jfk, { threads: 2, wordTimestamps: true }), first);
    } finally {
      native.release();
    }
  });

  it('stops at an abort mid-transcription, rejecting with code aborted', async () => {
    const controller = new AbortController();
    let segments = 0;
    const run = tiny.transcribe(repeat(jfk, 6), {
      signal: controller.signal,
      onSegment: () => {
        segments++;
        controller.abort();
      },
    });
    await assert.rejects(run, { code: 'aborted' });
    // a full run of these 66 s (three 30 s windows) delivers 5 segments with this model; an abort at the first
    // stops the decode there (checked without timing: a loaded machine must not fail it)
    assert.ok(segments > 0, 'the abort came mid-transcription (after the first segment)');
    assert.ok(segments <= 2, `${segments} segments were delivered after the abort; the decode did not stop`);

    await assert.rejects(tiny.transcribe(jfk, { signal: AbortSignal.abort() }), { code: 'aborted' });
    assertSaneSegments(await tiny.transcribe(jfk), JFK_SECONDS); // the model still works
  });

  it('rejects with the error an onSegment callback throws', async () => {
    const boom = new Error('client went away');
    await assert.rejects(
      tiny.transcribe(repeat(jfk, 3), {
        onSegment: () => {
          throw boom;
        },
      }),
      (error) => error === boom,
    );
  });

  it('takes a prompt of any length (its tail conditions the windows)', async () => {
    const clip = jfk.subarray(0, 3 * 16000);
    const transcribe = (prompt: string | null) => tiny.transcribe(clip, { language: 'en', prompt, fallback: false });
    const tokensOf = (result: TranscriptionResult) => result.segments.map((s) => s.tokens);
    const unprompted = tokensOf(await transcribe(null));
    // only the last n_text_ctx / 2 tokens of a prompt condition a window: 70 KB of words before a tail of 600 tokens
    // give the tail's transcript, token for token, and the tail does change it
    const tail = 'ask not '.repeat(300);
    const long = await transcribe('what your country can do for you. '.repeat(2000) + tail);
    assertSaneSegments(long, 3);
    assert.deepEqual(tokensOf(long), tokensOf(await transcribe(tail)));
    assert.notDeepEqual(tokensOf(long), unprompted, 'the prompt conditions the window');
    // one 64 KiB "word": the prompt's tokenizer must not recurse per character, and a word longer than the tail the
    // engine tokenizes is dropped whole
    const oneWord = await transcribe('a'.repeat(65536));
    assertSaneSegments(oneWord, 3);
    assert.deepEqual(tokensOf(oneWord), unprompted);
  });

  it('returns no segments for empty audio', async () => {
    const result = await tiny.transcribe(new Float32Array(0), { language: 'en' });
    assert.deepEqual(result.segments, []);
    assert.equal(result.text, '');
    assert.equal(result.language, 'en');
  });

  it('fails to load broken files with model_load_failed, and keeps running', async () => {
    const whole = fs.readFileSync(tinyPath);
    const broken: Record<string, Buffer> = {
      'half.bin': whole.subarray(0, whole.length / 2),
      'last-tensor-cut.bin': whole.subarray(0, whole.length - 100),
      'header-only.bin': whole.subarray(0, 64),
      'garbage.bin': Buffer.concat([whole.subarray(0, 4), Buffer.alloc(4096, 0x5a)]),
    };
    for (const [name, bytes] of Object.entries(broken)) {
      const file = path.join(tmp, name);
      fs.writeFileSync(file, bytes);
      await assert.rejects(whisperEngine.load({ id: name, path: file, projector: null }), { code: 'model_load_failed' }, name);
    }
    // real hparams, filters and vocabulary but no tensors: whisper.cpp itself would accept it as an empty test model
    await assert.rejects(whisperEngine.load({ id: 'tensorless', path: TENSORLESS_BASE, projector: null }), { code: 'model_load_failed' });
    await assert.rejects(whisperEngine.load({ id: 'missing', path: path.join(tmp, 'missing.bin'), projector: null }), { code: 'model_load_failed' });
    assertSaneSegments(await tiny.transcribe(jfk), JFK_SECONDS);
  });

  it('loads the base size and refuses work after dispose', async () => {
    const base = await whisperEngine.load({ id: 'base.en', path: await whisperTestModel({ size: 'base', en: true }), projector: null });
    const info = (base as SttModel & { info: { type: string; nAudioLayer: number; nAudioState: number; multilingual: boolean } }).info;
    assert.deepEqual([info.type, info.nAudioLayer, info.nAudioState, info.multilingual], ['base', 6, 512, false]);
    await base.dispose();
    await assert.rejects(base.transcribe(jfk), { code: 'closed' });
  });
});
