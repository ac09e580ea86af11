/**
 * The built-in `flite` voices: the four voices at 16 kHz, speed, streaming, cancellation, concurrency and
 * determinism, what the engine refuses or ignores, the registry defaults, and the round trip through the built-in
 * recognizer.
 */
import assert from 'node:assert/strict';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it, type TestContext } from 'node:test';
import { pino } from 'pino';
import { DEFAULT_TTS_MODEL, DEFAULT_VAD_MODEL, resolveConfig } from '../../src/config.js';
import { FLITE_ENGINE, FLITE_LANGUAGES, FLITE_MODEL_ID, loadFliteModel, VENDOR_VOICES } from '../../src/engines/flite.js';
import { loadSphinxModel } from '../../src/engines/sphinx.js';
import type { SynthesisRequest, TtsModel } from '../../src/engines/types.js';
import { ApiError } from '../../src/errors.js';
import { HubClient } from '../../src/services/hub.js';
import { Metrics } from '../../src/services/metrics.js';
import { newRegistry } from '../helpers/registry.js';
import { planSynthesis, speechRequest } from '../../src/services/tts/speech.js';
import { startTestServer } from '../helpers/server.js';
import { FLITE_INSTALLED, SPHINX_INSTALLED, wer } from '../helpers/transcripts.js';
import { rms } from '../helpers/signal.js';

const RATE = 16000;
const VOICES = ['slt', 'kal', 'awb', 'rms'];
/** Eight sentences, about 20 s of speech. */
const PARAGRAPH =
  'The birch canoe slid on the smooth planks. Glue the sheet to the dark blue background. ' +
  'It is easy to tell the depth of a well. These days a chicken leg is a rare dish. ' +
  'Rice is often served in round bowls. The juice of lemons makes fine punch. ' +
  'The box was thrown beside the parked truck. The hogs were fed chopped corn and garbage.';

const request = (text: string, extra: Partial<SynthesisRequest> = {}): SynthesisRequest => ({ text, voice: 'slt', speed: 1, ...extra });

/** Median pitch (Hz) of the voiced 40 ms frames, by normalised autocorrelation over 70..400 Hz. */
function medianPitch(x: Float32Array): number {
  const frame = 640;
  const minLag = Math.floor(RATE / 400);
  const maxLag = Math.ceil(RATE / 70);
  const pitches: number[] = [];
  for (let start = 0; start + frame + maxLag <= x.length; start += 160) {
    let energy = 0;
    for (let i = 0; i < frame; i++) energy += x[start + i]! ** 2;
    if (energy / frame < 1e-4) continue;
    let best = 0;
    let bestLag = 0;
    for (let lag = minLag; lag <= maxLag; lag++) {
      let dot = 0;
      let lagged = 0;
      for (let i = 0; i < frame; i++) {
        dot += x[start + i]! * x[start + i + lag]!;
        lagged += x[start + i + lag]! ** 2;
      }
      const r = dot / Math.sqrt(energy * lagged + 1e-12);
      if (r > best) [best, bestLag] = [r, lag];
    }
    if (best > 0.7) pitches.push(RATE / bestLag);
  }
  pitches.sort((a, b) => a - b);
  return pitches[Math.floor(pitches.length / 2)] ?? 0;
}

const invalid = (param: string) => (error: unknown) => error instanceof ApiError && error.code === 'invalid_request' && error.param === param;

describe('built-in flite voices', { skip: FLITE_INSTALLED ? false : 'Debian libflite1 is not installed' }, () => {
  let model: TtsModel;
  before(async () => {
    model = await loadFliteModel();
  });
  after(() => model?.dispose());

  it('loads with four 16 kHz voices, slt by default, and maps the vendor voice names', () => {
    assert.equal(model.id, FLITE_MODEL_ID);
    assert.equal(model.task, 'tts');
    assert.equal(model.engine, FLITE_ENGINE);
    assert.equal(model.sampleRate, RATE);
    assert.deepEqual(
      model.voices.map((v) => v.id),
      VOICES,
    );
    assert.equal(model.defaultVoice, 'slt');
    assert.deepEqual(model.capabilities, { cloning: false, instructions: false, sampling: false, languages: ['a', 'b', 'en', 'en-us', 'en-gb'] });
    const vendor = ['alloy', 'ash', 'ballad', 'cedar', 'coral', 'echo', 'fable', 'marin', 'nova', 'onyx', 'sage', 'shimmer', 'verse'];
    assert.deepEqual(Object.keys(model.voiceAliases ?? {}).sort(), vendor);
    for (const [name, voice] of Object.entries(VENDOR_VOICES)) assert.ok(VOICES.includes(voice), `${name} -> ${voice}`);
    assert.ok((model.concurrency ?? 0) >= 1);
  });

  it('speaks "Hello world." with every voice, at 16 kHz and a plausible length', async (t) => {
    for (const voice of VOICES) {
      const samples = await model.synthesize(request('Hello world.', { voice }));
      const seconds = samples.length / RATE;
      t.diagnostic(`${voice}: ${seconds.toFixed(3)} s, RMS ${rms(samples).toFixed(3)}`);
      assert.ok(seconds > 0.5 && seconds < 2.5, `${voice}: ${seconds} s`);
      assert.ok(rms(samples) > 0.01, `${voice}: audible`);
      assert.ok(
        samples.every((x) => x >= -1 && x < 1),
        `${voice}: samples in [-1, 1)`,
      );
    }
  });

  it('honours speed with its own duration stretch: 2 is half as long, 0.5 twice, the pitch is kept', async (t) => {
    const text = 'A sentence to speak at several speeds, slowly and quickly.';
    for (const voice of VOICES) {
      const normal = await model.synthesize(request(text, { voice }));
      const fast = await model.synthesize(request(text, { voice, speed: 2 }));
      const slow = await model.synthesize(request(text, { voice, speed: 0.5 }));
      const [pNormal, pFast, pSlow] = [normal, fast, slow].map(medianPitch) as [number, number, number];
      t.diagnostic(
        `${voice}: ${(normal.length / RATE).toFixed(2)} s at 1, x${(fast.length / normal.length).toFixed(3)} at 2, x${(slow.length / normal.length).toFixed(3)} at 0.5; ` +
          `median pitch ${pNormal.toFixed(0)} / ${pFast.toFixed(0)} / ${pSlow.toFixed(0)} Hz`,
      );
      assert.ok(Math.abs(fast.length / normal.length - 0.5) <= 0.5 * 0.15, `${voice} at 2`);
      assert.ok(Math.abs(slow.length / normal.length - 2) <= 2 * 0.15, `${voice} at 0.5`);
      for (const pitch of [pFast, pSlow]) assert.ok(Math.abs(pitch / pNormal - 1) <= 0.1, `${voice}: pitch ${pitch} vs ${pNormal} Hz`);
    }
  });

  it('gives no audio for empty or blank text, and a short silence for punctuation alone', async () => {
    assert.equal((await model.synthesize(request(''))).length, 0);
    assert.equal((await model.synthesize(request('  \n\t '))).length, 0);
    const streamed: Float32Array[] = [];
    await model.synthesize(request(''), { onAudio: (chunk) => streamed.push(chunk) });
    assert.equal(streamed.length, 0, 'no onAudio call without audio');
    const punctuation = await model.synthesize(request('...!?'));
    assert.ok(punctuation.length / RATE < 0.5 && rms(punctuation) < 0.01, `${punctuation.length} samples, RMS ${rms(punctuation)}`);
  });

  it('streams audio through onAudio as it is synthesised: the chunks, in order, are the result', async (t) => {
    for (const voice of VOICES) {
      const chunks: Float32Array[] = [];
      const started = performance.now();
      let firstMs = -1;
      const result = await model.synthesize(request(PARAGRAPH, { voice }), {
        onAudio: (chunk) => {
          if (firstMs < 0) firstMs = performance.now() - started;
          chunks.push(chunk);
        },
      });
      const totalMs = performance.now() - started;
      t.diagnostic(
        `${voice}: ${chunks.length} chunks, first after ${firstMs.toFixed(1)} ms of ${totalMs.toFixed(1)} ms (${(result.length / RATE).toFixed(1)} s of audio)`,
      );
      assert.ok(chunks.length >= 8, `${voice}: at least one chunk per sentence`);
      const joined = new Float32Array(chunks.reduce((n, c) => n + c.length, 0));
      let at = 0;
      for (const chunk of chunks) {
        joined.set(chunk, at);
        at += chunk.length;
      }
      assert.deepEqual(joined, result);
      if (voice !== 'kal') assert.ok(firstMs < totalMs / 4, `${voice}: the first sentence arrives long before the last`); // kal takes a few ms in all
    }
  });

  it('stops a long synthesis soon after an abort, and keeps working', async (t) => {
    const long = PARAGRAPH.repeat(6); // about two minutes of speech, 1-2 s of work
    const controller = new AbortController();
    let abortedAt = 0;
    let samplesAfterAbort = 0;
    const pending = model.synthesize(request(long), {
      signal: controller.signal,
      onAudio: (chunk) => {
        if (abortedAt) samplesAfterAbort += chunk.length;
        else {
          abortedAt = performance.now();
          controller.abort();
        }
      },
    });
    await assert.rejects(pending, { code: 'aborted' });
    const ms = performance.now() - abortedAt;
    t.diagnostic(`rejected ${ms.toFixed(1)} ms after the abort; ${samplesAfterAbort} samples arrived after it`);
    assert.ok(ms < 250, `${ms} ms`);
    await assert.rejects(model.synthesize(request('Never spoken.'), { signal: AbortSignal.abort() }), { code: 'aborted' });
    assert.ok((await model.synthesize(request('Still here.'))).length > 0);
  });

  it('rejects with the error of an onAudio that throws, and stops', async () => {
    const failure = new Error('client gone');
    let calls = 0;
    await assert.rejects(
      model.synthesize(request(PARAGRAPH.repeat(3)), {
        onAudio: () => {
          calls += 1;
          throw failure;
        },
      }),
      (error) => error === failure,
    );
    assert.equal(calls, 1);
  });

  it('runs syntheses in parallel, each equal to the same one run alone', async (t) => {
    const native = model as TtsModel & { deterministic?: boolean };
    assert.equal(native.deterministic, os.arch() === 'x64' || os.arch() === 'arm64', 'flite noise redirected per synthesis');
    const texts = ['The quick brown fox jumps over the lazy dog.', PARAGRAPH];
    const jobs = VOICES.flatMap((voice) => texts.map((text) => request(text, { voice })));
    const started = performance.now();
    const serial: Float32Array[] = [];
    for (const job of jobs) serial.push(await model.synthesize(job));
    const serialMs = performance.now() - started;
    // every job twice at once: the same voices in several threads, all voices together
    const concurrentStart = performance.now();
    const parallel = await Promise.all([...jobs, ...jobs].map((job) => model.synthesize(job)));
    const concurrentMs = performance.now() - concurrentStart;
    t.diagnostic(
      `${jobs.length} syntheses in series ${serialMs.toFixed(0)} ms; twice as many at once ${concurrentMs.toFixed(0)} ms (${((2 * serialMs) / concurrentMs).toFixed(2)}x on ${os.availableParallelism()} cores)`,
    );
    parallel.forEach((samples, i) => assert.deepEqual(samples, serial[i % jobs.length], `job ${i % jobs.length} (${jobs[i % jobs.length]!.voice})`));
  });

  it('is refused a reference voice and other languages, and speaks without instructions, by what it declares; refuses unknown voices; ignores sampling fields', async () => {
    const text = 'Fields the engine cannot honour.';
    // the speech service decides these from the model's capabilities (the one place they are checked)
    const plan = (fields: Partial<Parameters<typeof planSynthesis>[1]>) => planSynthesis(model, speechRequest(FLITE_MODEL_ID, text, fields));
    assert.deepEqual(plan({ instructions: { text: 'Speak cheerfully.', field: 'instructions' } }).ignored, ['instructions']);
    assert.throws(() => plan({ referenceAudio: 'data:audio/wav;base64,AAAA' }), invalid('ref_audio'));
    assert.throws(() => plan({ language: 'fr' }), invalid('lang_code'));
    assert.throws(() => plan({ language: 'j' }), invalid('lang_code'));
    await assert.rejects(model.synthesize(request(text, { voice: 'bob' })), invalid('voice'));
    await assert.rejects(model.synthesize(request(text, { speed: 5 })), invalid('speed'));
    await assert.rejects(model.synthesize(request(text, { speed: Number.NaN })), invalid('speed'));

    const reference = await model.synthesize(request(text));
    for (const language of [...FLITE_LANGUAGES, 'EN-US']) assert.deepEqual(await model.synthesize(request(text, { language })), reference, language);
    assert.deepEqual(await model.synthesize(request(text, { temperature: 1.5, maxTokens: 3 })), reference, 'temperature and maxTokens are ignored');
    assert.deepEqual(await model.synthesize(request(text, { voice: 'Alloy' })), reference, 'alloy speaks with slt');
    assert.deepEqual(await model.synthesize(request(text, { voice: 'onyx' })), await model.synthesize(request(text, { voice: 'rms' })));
  });

  it(
    'round trip: the built-in voice speaks three sentences that the built-in recognizer transcribes',
    { skip: SPHINX_INSTALLED ? false : 'pocketsphinx-en-us is not installed' },
    async (t) => {
      const sentences = [
        'And so, my fellow Americans, ask not what your country can do for you, ask what you can do for your country.', // jfk.wav's text
        'The quick brown fox jumps over the lazy dog.',
        'The weather is nice today, so we will walk to the park.',
      ];
      const sphinx = await loadSphinxModel();
      t.after(() => sphinx.dispose());
      const failures: string[] = [];
      for (const voice of VOICES) {
        for (const text of sentences) {
          const audio = await model.synthesize(request(text, { voice }));
          const heard = (await sphinx.transcribe(audio)).text;
          const rate = wer(text, heard);
          const line = `${voice}${voice === model.defaultVoice ? ' (default)' : ''}: WER ${rate.toFixed(3)} "${heard}"`;
          t.diagnostic(`round trip ${line}`);
          if (voice === model.defaultVoice && rate > 0.3) failures.push(line);
        }
      }
      assert.deepEqual(failures, [], 'the default voice: WER <= 0.30 for each sentence');
    },
  );

  it('is the built-in `flite`, behind `tts-1`, `tts-1-hd` and `gpt-4o-mini-tts` by default', async (t: TestContext) => {
    const config = resolveConfig({}, {});
    assert.equal(config.ttsModel, DEFAULT_TTS_MODEL);
    assert.equal(DEFAULT_TTS_MODEL, FLITE_MODEL_ID);
    assert.equal(resolveConfig({}, { VOXD_TTS_MODEL: 'owner/repo' }).ttsModel, 'owner/repo');
    assert.equal(resolveConfig({ ttsModel: 'local.gguf' }, { VOXD_TTS_MODEL: 'owner/repo' }).ttsModel, 'local.gguf');

    const cacheDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'voxd-flite-hub-'));
    t.after(() => fsp.rm(cacheDir, { recursive: true, force: true }));
    const registry = newRegistry({
      engines: [],
      hub: new HubClient({ endpoint: 'http://127.0.0.1:9', cacheDir, offline: true }),
      logger: pino({ level: 'silent' }),
      metrics: new Metrics(),
      modelsDirs: [],
      defaults: { stt: null, tts: config.ttsModel, vad: DEFAULT_VAD_MODEL },
      maxLoaded: 0,
      idleTtlMs: 0,
      builtins: { [FLITE_MODEL_ID]: { task: 'tts', engine: FLITE_ENGINE, load: (id) => loadFliteModel(id) } },
    });
    t.after(() => registry.close());
    assert.ok(registry.list(true).some((m) => m.id === 'flite' && m.task === 'tts' && m.engine === 'flite' && !m.loaded));
    for (const alias of ['tts-1', 'tts-1-hd', 'gpt-4o-mini-tts']) assert.equal(registry.describe(alias).target, 'flite');
    const direct = await registry.acquire<TtsModel>('flite', 'tts');
    const alias = await registry.acquire<TtsModel>('tts-1', 'tts');
    try {
      assert.equal(alias.model, direct.model, 'one load behind both IDs');
      assert.ok((await alias.model.synthesize(request('Hello.'))).length > 0);
    } finally {
      direct.release();
      alias.release();
    }
    assert.deepEqual(
      registry.list(false).map((m) => [m.id, m.loaded, m.engine]),
      [['flite', true, 'flite']],
    );
  });

  it('is listed by a default server, and another model replaces it behind the aliases', async (t: TestContext) => {
    const { base } = await startTestServer(t);
    const available = (await (await fetch(`${base}/v1/models?available=true`)).json()) as { data: { id: string; task?: string; target?: string }[] };
    assert.ok(available.data.some((m) => m.id === 'flite' && m.task === 'tts'));
    assert.ok(available.data.some((m) => m.id === 'tts-1' && m.target === 'flite'));
    const info = (await (await fetch(`${base}/v1/models/tts-1`)).json()) as { target: string };
    assert.equal(info.target, 'flite');

    const other = await startTestServer(t, { ttsModel: 'owner/other-tts' });
    const replaced = (await (await fetch(`${other.base}/v1/models/gpt-4o-mini-tts`)).json()) as { target: string };
    assert.equal(replaced.target, 'owner/other-tts');
  });

  it('rejects with `closed` after it was disposed', async () => {
    const released = await loadFliteModel('released');
    await released.dispose();
    await assert.rejects(released.synthesize(request('Gone.')), { code: 'closed' });
  });
});
