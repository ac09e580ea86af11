/**
 * No text takes down the flite engine (issue 14): the text normalisation in front of libflite, that it leaves
 * what a listener hears alone, every recorded fuzz crasher and the issue's inputs replayed against the engine in a
 * child process, and the issue's request against a real server.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { loadFliteModel, MAX_FLITE_TOKEN, normaliseFliteText } from '../../src/engines/flite.js';
import type { NativeFliteModel } from '../../src/native/addon.js';
import { loadNative } from '../../src/native/load.js';
import { FliteChild, stopMs, judge, type FliteInput } from '../fuzz/flite-text.js';
import { jsonFormat, readCrashers } from '../fuzz/target.js';
import { startTestServer } from '../helpers/server.js';
import { FLITE_INSTALLED } from '../helpers/transcripts.js';

const skip = FLITE_INSTALLED ? false : 'Debian libflite1 is not installed';

/** Every mark flite strips from the end of a token (the voices' text_postpunctuation). */
const CLOSING_MARKS = [...'"\'`.,:;!?(){}[]'];

/** Texts that aborted the process or ran for many seconds before the normalisation. */
const ISSUE_INPUTS: [string, string][] = [
  ['400 "!" (the issue\'s curl)', '!'.repeat(400)],
  ['"Hello world" and 400 "!"', `Hello world${'!'.repeat(400)}`],
  ['320 dots', '.'.repeat(320)],
  ['"?!" 200 times', '?!'.repeat(200)],
  ['4096 "x"', 'x'.repeat(4096)],
  ['4096 "1"', '1'.repeat(4096)],
  ['a word, 4096 "x" and a sentence end', `Say ${'x'.repeat(4096)}!!!`],
  ['1000 groups of digits', `${'1,000'.repeat(1000)}`],
  ['4000 "%"', '%'.repeat(4000)],
  ...CLOSING_MARKS.map((mark): [string, string] => [`a word and 400 "${mark}"`, `word${mark.repeat(400)} next`]),
  ['400 "!" after each of many words', Array.from({ length: 8 }, (_, i) => `w${i}${'!'.repeat(400)}`).join(' ')],
];

describe('flite text normalisation', () => {
  it('leaves ordinary text as it is', () => {
    for (const text of [
      'The birch canoe slid on the smooth planks.',
      '"Stop!" she shouted. "Why?" he asked... (nothing) [at all] {really}; fine: done.',
      'Wow!!! Really?! It costs $1,234.56, about 12% more, at 10:30am on 12/31/1999 -- see https://example.com/a?b=1&c=2.',
      'Tabs\tand\r\nnewlines\n\n\nand   spaces.',
      'Café naïve — “quoted” … 中文 😀',
      'x'.repeat(MAX_FLITE_TOKEN),
      '',
    ]) {
      assert.equal(normaliseFliteText(text), text);
    }
  });

  it('keeps each mark of a run of four or more once, in the order they first appear', () => {
    assert.equal(normaliseFliteText(`Hello world${'!'.repeat(400)}`), 'Hello world!');
    assert.equal(normaliseFliteText('.'.repeat(320)), '.');
    assert.equal(normaliseFliteText('Really?!?!?! Wait.... "No!!!!"'), 'Really?! Wait. "No!"');
    assert.equal(normaliseFliteText('a %%%% b ---- c ==== d'), 'a % b - c = d');
    assert.equal(normaliseFliteText('end.")]}\'` next'), 'end.")]}\'` next');
  });

  it(`cuts a token to ${MAX_FLITE_TOKEN} code points and keeps its closing marks`, () => {
    const cut = 'x'.repeat(MAX_FLITE_TOKEN);
    assert.equal(normaliseFliteText('x'.repeat(4096)), cut);
    assert.equal(normaliseFliteText(`Say ${'x'.repeat(4096)}!!!! Then stop.`), `Say ${cut}! Then stop.`);
    assert.equal(normaliseFliteText(`(${'1'.repeat(100)}).`), `(${'1'.repeat(MAX_FLITE_TOKEN - 1)}).`);
    assert.equal(normaliseFliteText('😀'.repeat(100)), '😀'.repeat(MAX_FLITE_TOKEN), 'code points: no pair is split');
    const long = 'https://example.com/' + 'a/'.repeat(100);
    assert.equal([...normaliseFliteText(long)].length, MAX_FLITE_TOKEN);
  });

  it('turns control characters and the spaces flite does not split at into spaces', () => {
    assert.equal(normaliseFliteText('a\u0000b\u0001c\u001bd\u007fe\u0085f'), 'a b c d e f');
    assert.equal(normaliseFliteText('10\u00a0km\u000bx\u000cy\u2028z\u3000w\ufeffv'), '10 km x y z w v');
    assert.equal(normaliseFliteText('keep\ttab\nline\rreturn'), 'keep\ttab\nline\rreturn');
  });
});

describe('flite survives any text', { skip }, () => {
  let native: NativeFliteModel;
  const child = new FliteChild();
  before(async () => {
    native = await loadNative().FliteModel.load();
  });
  after(async () => {
    native?.release();
    await child.stop();
  });

  it('sounds the same after the normalisation: collapsed runs give the samples the raw text gives', async () => {
    const model = await loadFliteModel();
    try {
      // below the run length that breaks libflite, so the raw text is safe to speak in this process
      for (const [text, voice] of [
        ['Hello!!!! World.', 'slt'],
        ['Wait.... what? Really?!?!?! Yes;;;; fine,,,,, done::::', 'slt'],
        ['He said "Stop!!!!" and left.)))) Then [x]]]]].', 'awb'],
        ['Oh :-)))) well... "quoted"""" text', 'kal'],
        [`End of it${'.'.repeat(200)} And the next.`, 'rms'],
      ] as const) {
        assert.notEqual(normaliseFliteText(text), text);
        const raw = await native.synthesize(text, { voice });
        assert.deepEqual(await model.synthesize({ text, voice, speed: 1 }), raw, `${voice}: ${text}`);
      }
    } finally {
      await model.dispose();
    }
  });

  /** Speaks `input` in the child and asserts it survived, in time, with audio of a sane length. */
  async function speaks(input: FliteInput, what: string): Promise<number> {
    const outcome = await child.speak(input, stopMs(input));
    assert.equal(judge(input, outcome), null, `${what}: ${JSON.stringify(outcome)}`);
    assert.equal(outcome.kind, 'audio');
    return outcome.kind === 'audio' ? outcome.seconds : 0;
  }

  it("speaks the issue's inputs with every voice, in bounded time and length", async (t) => {
    for (const [what, text] of ISSUE_INPUTS) {
      for (const voice of ['slt', 'kal', 'awb', 'rms']) {
        const seconds = await speaks({ text, voice, speed: 1 }, `${what} (${voice})`);
        if (voice === 'slt') t.diagnostic(`${what}: ${seconds.toFixed(1)} s of audio`);
        assert.ok(seconds < 60, `${what} (${voice}): ${seconds} s of audio`);
      }
    }
    assert.ok((await speaks({ text: 'Hello world.', voice: 'slt', speed: 1 }, 'after them')) > 0.5);
  });

  it('replays every recorded crasher of the flite-text fuzz target', async (t) => {
    const crashers = readCrashers('flite-text', jsonFormat<FliteInput>());
    t.diagnostic(`${crashers.length} crashers`);
    for (const { file, input } of crashers) await speaks(input, file);
  });

  it('answers the issue\'s request (input: 400 "!") with audio and keeps serving', async (t) => {
    const { base } = await startTestServer(t);
    for (const extra of [{}, { response_format: 'wav' }, { response_format: 'pcm', stream: true }]) {
      const response = await fetch(`${base}/v1/audio/speech`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'tts-1', input: '!'.repeat(400), ...extra }),
      });
      assert.equal(response.status, 200, `${JSON.stringify(extra)}: ${await response.clone().text()}`);
      assert.ok((await response.arrayBuffer()).byteLength > 0, `${JSON.stringify(extra)}: audio`);
    }
    const health = await fetch(`${base}/healthz`);
    assert.equal(health.status, 200);
  });
});
