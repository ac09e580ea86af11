import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { loadSphinxModel } from '../../src/engines/sphinx.js';
import type { SttModel, SttStreamingSession } from '../../src/engines/types.js';
import { ApiError } from '../../src/errors.js';
import { planTranscription } from '../../src/services/stt/transcriber.js';
import { SHARED } from '../helpers/paths.js';
import { SPHINX_INSTALLED, wer, words } from '../helpers/transcripts.js';
import { readWavMono } from '../helpers/wav.js';

const SPEECH = path.join(SHARED, 'audio', 'speech');
const CLIPS = fs
  .readdirSync(SPEECH)
  .filter((f) => f.startsWith('librivox-') && f.endsWith('.wav'))
  .sort();
/** Four utterances: text arrives as each ends (the LibriVox clips are one utterance each). */
const MULTI = 'jfk.wav';
const clip = (name: string): Float32Array => {
  const { sampleRate, samples } = readWavMono(path.join(SPEECH, name));
  assert.equal(sampleRate, 16000, `${name} is 16 kHz`);
  return samples;
};
const spokenText = (name: string): string =>
  (JSON.parse(fs.readFileSync(path.join(SPEECH, 'manifest.json'), 'utf8')) as { file: string; text: string }[]).find((e) => e.file === name)?.text ?? '';
/** 100 ms at 16 kHz, as a live client sends it. */
const CHUNK = 1600;

interface Turn {
  /** The non-empty deltas `feed` returned, in order. */
  feedDeltas: string[];
  finishDelta: string;
  transcript: string;
}

async function streamTurn(session: SttStreamingSession, samples: Float32Array): Promise<Turn> {
  const feedDeltas: string[] = [];
  for (let at = 0; at < samples.length; at += CHUNK) {
    const delta = await session.feed(samples.subarray(at, at + CHUNK));
    if (delta) feedDeltas.push(delta);
  }
  const { delta, transcript } = await session.finish();
  return { feedDeltas, finishDelta: delta, transcript };
}

async function streamClip(model: SttModel, samples: Float32Array): Promise<Turn> {
  const session = await model.createStreamingSession!();
  try {
    return await streamTurn(session, samples);
  } finally {
    await session.close();
  }
}

describe('pocketsphinx live transcription', { skip: SPHINX_INSTALLED ? false : 'the pocketsphinx-en-us package is not installed' }, () => {
  let model: SttModel;
  const fileText = new Map<string, string>();
  const fileUtterances = new Map<string, number>();
  const streamed = new Map<string, string>();

  before(async () => {
    model = await loadSphinxModel();
    for (const name of [...CLIPS, MULTI]) {
      const result = await model.transcribe(clip(name));
      fileText.set(name, result.text);
      fileUtterances.set(name, result.segments.length);
    }
  });
  after(() => model?.dispose());

  for (const name of [...CLIPS, MULTI]) {
    it(`streams ${name} in 100 ms chunks close to the file transcript`, async (t) => {
      const turn = await streamClip(model, clip(name));
      const file = fileText.get(name)!;
      streamed.set(name, turn.transcript);
      assert.equal(turn.feedDeltas.join('') + turn.finishDelta, turn.transcript, 'the deltas spell the transcript');
      assert.doesNotMatch(turn.transcript, /^ | {2}| $/, 'one space between words, none around');
      const rate = wer(file, turn.transcript);
      t.diagnostic(`${name}: file   "${file}"`);
      t.diagnostic(`${name}: stream "${turn.transcript}"`);
      t.diagnostic(
        `${name}: WER stream vs file ${rate.toFixed(3)}; ${turn.feedDeltas.length} deltas before finish (${words(turn.feedDeltas.join('')).length} of ${words(turn.transcript).length} words), finish delta "${turn.finishDelta}"`,
      );
      if (name !== MULTI) assert.ok(rate <= 0.1, `${name}: WER ${rate.toFixed(3)} vs the file transcript`);
      else {
        // live streams search with tighter limits (to keep up with real time); on this noisy clip, where
        // pocketsphinx gets most words wrong either way, they may err differently but not more
        const spoken = spokenText(name);
        const [liveErrors, fileErrors] = [wer(spoken, turn.transcript), wer(spoken, file)];
        t.diagnostic(`${name}: WER against the spoken text, stream ${liveErrors.toFixed(3)}, file ${fileErrors.toFixed(3)}`);
        assert.ok(liveErrors <= fileErrors + 0.05, `${name}: stream WER ${liveErrors.toFixed(3)} vs file ${fileErrors.toFixed(3)}`);
      }
      if (fileUtterances.get(name)! > 1) assert.ok(turn.feedDeltas.length > 0, `${name}: text arrives before finish`);
    });
  }

  for (const name of CLIPS) {
    it(`with delayMs, streams words of the open utterance of ${name}`, async (t) => {
      const session = await model.createStreamingSession!({ delayMs: 1536 });
      const turn = await streamTurn(session, clip(name));
      await session.close();
      assert.equal(turn.feedDeltas.join('') + turn.finishDelta, turn.transcript, 'the deltas spell the transcript');
      assert.doesNotMatch(turn.transcript, /^ | {2}| $/, 'one space between words, none around');
      assert.ok(turn.feedDeltas.length > 0, `${name}: text arrives before finish`);
      const early = words(turn.feedDeltas.join('')).length;
      t.diagnostic(`${name}: stream "${turn.transcript}"`);
      // partial hypotheses are the first pass's; the passes at the utterance's end revise some of the words sent
      t.diagnostic(
        `${name}: WER stream vs file ${wer(fileText.get(name)!, turn.transcript).toFixed(3)}; ${early} of ${words(turn.transcript).length} words before finish`,
      );
    });
  }

  it('drops the open turn on reset', async () => {
    const [first, second] = [CLIPS[0]!, CLIPS[CLIPS.length - 1]!];
    const session = await model.createStreamingSession!();
    try {
      const a = clip(first);
      for (let at = 0; at < a.length / 2; at += CHUNK) await session.feed(a.subarray(at, at + CHUNK));
      await session.reset();
      const turn = await streamTurn(session, clip(second));
      assert.equal(turn.transcript, streamed.get(second) ?? (await streamClip(model, clip(second))).transcript);
      await session.reset(); // nothing open: no-op
      assert.deepEqual(await session.finish(), { delta: '', transcript: '' }, 'an empty turn');
    } finally {
      await session.close();
    }
  });

  it('runs turn after turn on one session, each as on a fresh one', async () => {
    const session = await model.createStreamingSession!();
    try {
      for (const name of [...CLIPS, CLIPS[0]!]) {
        const turn = await streamTurn(session, clip(name));
        assert.equal(turn.feedDeltas.join('') + turn.finishDelta, turn.transcript);
        assert.equal(turn.transcript, streamed.get(name) ?? (await streamClip(model, clip(name))).transcript, name);
      }
    } finally {
      await session.close();
    }
  });

  it('runs 4 sessions at once, each as one at a time', async () => {
    const names = Array.from({ length: 4 }, (_, i) => CLIPS[i % CLIPS.length]!);
    const serial = new Map<string, string>();
    for (const name of new Set(names)) serial.set(name, streamed.get(name) ?? (await streamClip(model, clip(name))).transcript);
    const turns = await Promise.all(names.map((name) => streamClip(model, clip(name))));
    turns.forEach((turn, i) => {
      assert.equal(turn.feedDeltas.join('') + turn.finishDelta, turn.transcript);
      assert.equal(turn.transcript, serial.get(names[i]!), names[i]);
    });
  });

  it('rejects an aborted feed or finish with `aborted`, drops the turn and keeps working', async () => {
    const name = CLIPS[0]!;
    const samples = clip(name);
    const session = await model.createStreamingSession!();
    try {
      await assert.rejects(session.feed(samples.subarray(0, CHUNK), AbortSignal.abort()), { code: 'aborted' });
      const controller = new AbortController();
      const pending = session.feed(samples, controller.signal); // the whole clip at once: seconds of work
      setTimeout(() => controller.abort(), 20);
      await assert.rejects(pending, { code: 'aborted' });
      await session.feed(samples.subarray(0, 10 * CHUNK));
      await assert.rejects(session.finish(AbortSignal.abort()), { code: 'aborted' });
      const turn = await streamTurn(session, samples);
      assert.equal(turn.transcript, streamed.get(name) ?? (await streamClip(model, samples)).transcript);
    } finally {
      await session.close();
    }
  });

  it('returns the decoder on close: 20 sessions one after another reuse it', async (t) => {
    const samples = clip(CLIPS[0]!).subarray(0, 16000);
    const rss = () => process.memoryUsage().rss / 2 ** 20;
    // warm-up: the pool already holds an idle decoder after load
    await streamClip(model, samples);
    const before = rss();
    const started = performance.now();
    for (let i = 0; i < 20; i++) {
      const session = await model.createStreamingSession!();
      await session.feed(samples);
      await session.close();
      await session.close(); // twice is fine
      await assert.rejects(session.feed(samples), { code: 'closed' });
    }
    const grown = rss() - before;
    t.diagnostic(`20 sessions: ${(performance.now() - started).toFixed(0)} ms, RSS ${grown >= 0 ? '+' : ''}${grown.toFixed(1)} MiB`);
    // a decoder holds about 35 MB: 20 that were never returned would add hundreds
    assert.ok(grown < 100, `RSS grew ${grown.toFixed(1)} MiB`);
  });

  it('accepts only English', async () => {
    // live sessions get their model through the speech-to-text service, which refuses what it does not declare
    assert.throws(
      () => planTranscription(model, { language: 'fr' }),
      (error: unknown) => error instanceof ApiError && error.code === 'invalid_request' && error.param === 'language',
    );
    const session = await model.createStreamingSession!({ language: 'en', prompt: 'ignored' });
    const turn = await streamTurn(session, clip(CLIPS[0]!));
    await session.close();
    assert.equal(turn.transcript, streamed.get(CLIPS[0]!) ?? fileText.get(CLIPS[0]!));
  });
});
