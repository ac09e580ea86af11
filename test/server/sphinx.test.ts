import assert from 'node:assert/strict';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it, type TestContext } from 'node:test';
import { pino } from 'pino';
import { DEFAULT_STT_MODEL, DEFAULT_VAD_MODEL, resolveConfig } from '../../src/config.js';
import { loadSphinxModel, SPHINX_ENGINE, SPHINX_MODEL_ID } from '../../src/engines/sphinx.js';
import type { SttModel, TranscriptionResult, TranscriptionSegment } from '../../src/engines/types.js';
import { ApiError } from '../../src/errors.js';
import { HubClient } from '../../src/services/hub.js';
import { Metrics } from '../../src/services/metrics.js';
import { newRegistry } from '../helpers/registry.js';
import { planTranscription } from '../../src/services/stt/transcriber.js';
import { ROOT, SHARED } from '../helpers/paths.js';
import { startTestServer } from '../helpers/server.js';
import { SPHINX_INSTALLED, wer, words } from '../helpers/transcripts.js';
import { readWavMono } from '../helpers/wav.js';

const SPEECH = path.join(SHARED, 'audio', 'speech');
const CLIPS = fs
  .readdirSync(SPEECH)
  .filter((f) => f.endsWith('.wav'))
  .sort();
const clip = (name: string): Float32Array => {
  const { sampleRate, samples } = readWavMono(path.join(SPEECH, name));
  assert.equal(sampleRate, 16000, `${name} is 16 kHz`);
  return samples;
};

interface BaselineRun {
  command: string;
  utterances: string[];
  text: string;
}
/** test/fixtures/pocketsphinx-baseline.json: what Debian's pocketsphinx_continuous prints for each clip. */
interface Baseline {
  clips: Record<string, BaselineRun & { samples?: BaselineRun & { note: string } }>;
}
const baseline = JSON.parse(fs.readFileSync(path.join(ROOT, 'test', 'fixtures', 'pocketsphinx-baseline.json'), 'utf8')) as Baseline;
const references = new Map(
  (JSON.parse(fs.readFileSync(path.join(SPEECH, 'manifest.json'), 'utf8')) as { file: string; text: string }[]).map((e) => [e.file, e.text]),
);

function assertWordTimes(result: TranscriptionResult, duration: number, label: string): void {
  let previousEnd = 0;
  for (const segment of result.segments) {
    const words = segment.words ?? [];
    assert.ok(words.length > 0, `${label}: segment "${segment.text}" has words`);
    assert.equal(words.map((w) => w.word).join(' '), segment.text, `${label}: the words spell the segment's text`);
    assert.equal(segment.start, words[0]!.start);
    assert.equal(segment.end, words[words.length - 1]!.end);
    for (const w of words) {
      assert.ok(
        w.start >= previousEnd - 1e-9 && w.start <= w.end && w.end <= duration + 1e-9,
        `${label}: "${w.word}" ${w.start}-${w.end} in order and inside the clip`,
      );
      assert.doesNotMatch(w.word, /^[<[]|\(\d+\)$/, `${label}: no fillers or pronunciation suffixes`);
      previousEnd = w.end;
    }
  }
}

const sphinxBuiltin = { task: 'stt' as const, engine: SPHINX_ENGINE, load: (id: string) => loadSphinxModel(id) };

describe('built-in pocketsphinx recognizer', { skip: SPHINX_INSTALLED ? false : 'the pocketsphinx-en-us package is not installed' }, () => {
  let model: SttModel;
  const serial = new Map<string, TranscriptionResult>();

  before(async () => {
    model = await loadSphinxModel();
  });
  after(() => model?.dispose());

  for (const name of CLIPS) {
    it(`transcribes ${name} as pocketsphinx_continuous does`, async (t) => {
      const samples = clip(name);
      const result = await model.transcribe(samples, { wordTimestamps: true });
      serial.set(name, result);
      const entry = baseline.clips[name];
      assert.ok(entry, `${name} has a baseline`);
      // where the CLI misreads the WAV header, compare with the CLI on the clip's own samples (see the fixture's note)
      const expected = entry.samples ?? entry;
      const reference = references.get(name);
      assert.ok(reference, `${name} is in the manifest`);
      const ours = wer(reference, result.text);
      const theirs = wer(reference, expected.text);
      t.diagnostic(`${name}: voxd "${result.text}"`);
      t.diagnostic(`${name}: WER voxd ${ours.toFixed(3)}, pocketsphinx_continuous ${theirs.toFixed(3)}`);
      if (entry.samples) t.diagnostic(`${name}: WER of \`${entry.command}\` (header bytes decoded as audio): ${wer(reference, entry.text).toFixed(3)}`);
      if (result.text === expected.text) {
        const lines = expected.utterances.filter((u) => u.trim() !== '');
        assert.deepEqual(
          result.segments.map((s) => s.text),
          lines,
          'one segment per utterance line',
        );
      } else {
        assert.ok(ours <= theirs, `${name}: "${result.text}" differs from "${expected.text}" and is not better`);
      }
      assert.equal(result.language, 'en');
      assert.equal(result.duration, samples.length / 16000);
      assertWordTimes(result, result.duration, name);
    });
  }

  it('runs 4 transcriptions at once, each equal to the serial one', async (t) => {
    const samples = clip('jfk.wav');
    const reference = serial.get('jfk.wav') ?? (await model.transcribe(samples, { wordTimestamps: true }));
    let started = performance.now();
    for (let i = 0; i < 4; i++) await model.transcribe(samples, { wordTimestamps: true });
    const serialMs = performance.now() - started;
    started = performance.now();
    const results = await Promise.all(Array.from({ length: 4 }, () => model.transcribe(samples, { wordTimestamps: true })));
    const concurrentMs = performance.now() - started;
    for (const result of results) assert.deepEqual(result, reference);
    t.diagnostic(
      `jfk.wav x4: serial ${(serialMs / 1000).toFixed(2)} s, concurrent ${(concurrentMs / 1000).toFixed(2)} s, ratio ${(serialMs / concurrentMs).toFixed(2)} on ${os.availableParallelism()} cores`,
    );
  });

  it('rejects with `aborted` when the request is aborted, and keeps working after', async () => {
    const samples = clip('jfk.wav');
    const controller = new AbortController();
    const pending = model.transcribe(samples, { signal: controller.signal });
    setTimeout(() => controller.abort(), 200);
    await assert.rejects(pending, { code: 'aborted' });
    await assert.rejects(model.transcribe(samples, { signal: AbortSignal.abort() }), { code: 'aborted' });
    const short = clip('librivox-0920.wav');
    assert.equal((await model.transcribe(short)).text, baseline.clips['librivox-0920.wav']?.text);
  });

  it('accepts only English, cannot translate, and ignores prompt and temperature', async () => {
    const samples = clip('librivox-0920.wav');
    const invalid = (param: string) => (error: unknown) => error instanceof ApiError && error.code === 'invalid_request' && error.param === param;
    // the speech-to-text service refuses what the model's capabilities rule out (the one place they are checked)
    assert.throws(() => planTranscription(model, { language: 'fr' }), invalid('language'));
    assert.throws(() => planTranscription(model, { language: 'fr', task: 'translate' }), invalid('language'));
    const expected = baseline.clips['librivox-0920.wav']?.text;
    assert.equal((await model.transcribe(samples, { language: 'en', prompt: 'Dashwood', temperature: 0.8 })).text, expected);
    assert.equal((await model.transcribe(samples, { language: 'English' })).text, expected);
    assert.deepEqual(model.capabilities, { translate: false, wordTimestamps: true, languages: ['en'], vadChunking: false });
  });

  it('truncates to maxTokens words and calls onSegment once per utterance', async () => {
    const samples = clip('jfk.wav');
    const seen: TranscriptionSegment[] = [];
    const full = await model.transcribe(samples, {
      onSegment: (segment, language) => {
        assert.equal(language, 'en');
        seen.push(segment);
      },
    });
    assert.equal(seen.length, 4);
    assert.deepEqual(seen, full.segments);
    assert.equal(full.segments[0]?.words, undefined, 'words only when asked for');

    const cut = await model.transcribe(samples, { maxTokens: 8, wordTimestamps: true });
    const spoken = words(full.text);
    assert.equal(cut.text, spoken.slice(0, 8).join(' '));
    assert.equal(cut.segments.flatMap((s) => s.words ?? []).length, 8);
    assert.equal(cut.segments.length, 2);
  });

  it('returns nothing for silence and for empty input', async () => {
    assert.deepEqual((await model.transcribe(new Float32Array(16000))).segments, []);
    assert.equal((await model.transcribe(new Float32Array(0))).text, '');
  });

  it('loads as the built-in `sphinx` and behind `whisper-1` by default', async (t: TestContext) => {
    const cacheDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'voxd-sphinx-hub-'));
    t.after(() => fsp.rm(cacheDir, { recursive: true, force: true }));
    const config = resolveConfig({}, {});
    assert.equal(config.sttModel, DEFAULT_STT_MODEL);
    assert.equal(DEFAULT_STT_MODEL, SPHINX_MODEL_ID);
    assert.equal(resolveConfig({}, { VOXD_STT_MODEL: 'owner/repo/model.bin' }).sttModel, 'owner/repo/model.bin');
    assert.equal(resolveConfig({ sttModel: 'local.bin' }, { VOXD_STT_MODEL: 'owner/repo/model.bin' }).sttModel, 'local.bin');

    const registry = newRegistry({
      engines: [],
      hub: new HubClient({ endpoint: 'http://127.0.0.1:9', cacheDir, offline: true }),
      logger: pino({ level: 'silent' }),
      metrics: new Metrics(),
      modelsDirs: [],
      defaults: { stt: config.sttModel, tts: null, vad: DEFAULT_VAD_MODEL },
      maxLoaded: 0,
      idleTtlMs: 0,
      builtins: { [SPHINX_MODEL_ID]: sphinxBuiltin },
    });
    t.after(() => registry.close());
    assert.ok(registry.list(true).some((m) => m.id === 'sphinx' && m.task === 'stt' && m.engine === 'pocketsphinx' && !m.loaded));
    assert.equal(registry.describe('whisper-1').target, 'sphinx');

    const samples = clip('librivox-0920.wav');
    const expected = baseline.clips['librivox-0920.wav']?.text;
    const direct = await registry.acquire<SttModel>('sphinx', 'stt');
    const alias = await registry.acquire<SttModel>('whisper-1', 'stt');
    try {
      assert.equal(alias.model, direct.model, 'one load behind both IDs');
      assert.equal(direct.model.engine, 'pocketsphinx');
      assert.equal((await alias.model.transcribe(samples)).text, expected);
    } finally {
      direct.release();
      alias.release();
    }
    assert.deepEqual(
      registry.list(false).map((m) => [m.id, m.loaded, m.engine]),
      [['sphinx', true, 'pocketsphinx']],
    );
  });

  it('answers /v1/audio/transcriptions for whisper-1 with a default server', async (t: TestContext) => {
    const { base } = await startTestServer(t);
    const wav = fs.readFileSync(path.join(SPEECH, 'librivox-0920.wav'));
    const post = (fields: Record<string, string | string[]>) => {
      const form = new FormData();
      form.append('file', new Blob([new Uint8Array(wav)]), 'librivox-0920.wav');
      for (const [key, value] of Object.entries(fields)) for (const v of [value].flat()) form.append(key, v);
      return fetch(`${base}/v1/audio/transcriptions`, { method: 'POST', body: form });
    };
    const verbose = await post({ model: 'whisper-1', response_format: 'verbose_json', 'timestamp_granularities[]': ['word', 'segment'] });
    assert.equal(verbose.status, 200, await verbose.clone().text());
    const body = (await verbose.json()) as { text: string; language: string; words: { word: string }[]; segments: unknown[] };
    assert.equal(body.text, baseline.clips['librivox-0920.wav']?.text);
    assert.equal(body.words.length, words(body.text).length);
    assert.equal(body.segments.length, 1);
    const french = await post({ model: 'sphinx', language: 'fr' });
    assert.equal(french.status, 400);
    const { error } = (await french.json()) as { error: { code: string; param: string } };
    assert.deepEqual([error.code, error.param], ['invalid_request', 'language']);
  });

  it('fails cleanly on missing or malformed model files, and after release', async (t: TestContext) => {
    await assert.rejects(loadSphinxModel('custom', { dict: '/nonexistent/voxd.dict' }), (error: unknown) => {
      assert.ok(error instanceof ApiError && error.code === 'invalid_model', String(error));
      assert.match(error.message, /not found: \/nonexistent\/voxd\.dict/);
      return true;
    });
    // pocketsphinx exit()s on a malformed acoustic model; the addon turns that into an error
    const hmm = await fsp.mkdtemp(path.join(os.tmpdir(), 'voxd-sphinx-bad-'));
    t.after(() => fsp.rm(hmm, { recursive: true, force: true }));
    for (const file of ['mdef', 'means', 'variances', 'transition_matrices', 'sendump']) await fsp.writeFile(path.join(hmm, file), 'not a model\n');
    await assert.rejects(loadSphinxModel('custom', { hmm }), (error: unknown) => {
      assert.ok(error instanceof ApiError && error.code === 'invalid_model', String(error));
      assert.match(error.message, /pocketsphinx cannot load the model/);
      return true;
    });

    const released = await loadSphinxModel('released', { maxIdleDecoders: 0 });
    await released.dispose();
    await assert.rejects(released.transcribe(clip('librivox-0920.wav')), { code: 'closed' });
  });
});
