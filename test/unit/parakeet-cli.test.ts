import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { mostTokensInOneFrame, parakeetTestModel, parseParakeetCliOutput, runParakeetCli, type ParakeetCliResult } from '../helpers/parakeet.js';
import { JFK_WAV } from '../helpers/paths.js';

// whisper.cpp's parakeet-cli is the Parakeet engine's oracle (test/helpers/parakeet.ts): these tests hold the parser
// to what it prints with -np -ps, and run it once on a random-weight model.

const PREAMBLE = ["read_audio_data: reading audio data from '/clips/jfk.wav' ...", 'read_audio_data: trying to decode with miniaudio', ''];
// captured from a run, then a quote piece and a piece with a space and quotes of its own, as printed (raw)
const CAPTURED = [
  ...PREAMBLE,
  'Segments (1):',
  'Segment 0: [0 -> 1101] "ekl hea, "it\'s "so" big"',
  'Tokens [5]:',
  '  [ 0] id= 4482 frame=  0 dur_idx= 3 dur_val= 3 p=0.0041 plog=-5.4922 t0=   0 t1=  24 word_start=true "▁ekl"',
  '  [ 1] id= 6340 frame=  3 dur_idx= 3 dur_val= 3 p=0.0031 plog=-5.7910 t0=  24 t1=  48 word_start=true "▁hea"',
  '  [ 2] id=   67 frame=  9 dur_idx= 0 dur_val= 0 p=0.0035 plog=-5.6467 t0=  48 t1=  48 word_start=false ","',
  '  [ 3] id=   75 frame=  9 dur_idx= 1 dur_val= 1 p=0.0040 plog=-5.5218 t0=  48 t1=  48 word_start=false """',
  '  [10] id= 8191 frame=134 dur_idx= 4 dur_val= 4 p=1.0000 plog=12.0000 t0=1072 t1=1104 word_start=true "▁it\'s "so" big"',
  '',
].join('\n');

describe("parakeet-cli's output (test/helpers/parakeet.ts)", () => {
  it('parses the -ps block: every token field, pieces with quotes and spaces, times in 10 ms units', () => {
    const result = parseParakeetCliOutput('ekl hea, "it\'s "so" big\n', CAPTURED);
    assert.equal(result.text, 'ekl hea, "it\'s "so" big');
    assert.deepEqual(result.segments, [{ t0: 0, t1: 1101, text: 'ekl hea, "it\'s "so" big' }]);
    assert.deepEqual(result.tokens[0], {
      index: 0,
      id: 4482,
      frame: 0,
      durationIndex: 3,
      duration: 3,
      p: 0.0041,
      plog: -5.4922,
      t0: 0,
      t1: 24,
      wordStart: true,
      piece: '▁ekl',
    });
    assert.deepEqual(
      result.tokens.map((t) => [t.index, t.id, t.frame, t.duration, t.t0, t.t1, t.wordStart, t.piece]),
      [
        [0, 4482, 0, 3, 0, 24, true, '▁ekl'],
        [1, 6340, 3, 3, 24, 48, true, '▁hea'],
        [2, 67, 9, 0, 48, 48, false, ','],
        [3, 75, 9, 1, 48, 48, false, '"'],
        [10, 8191, 134, 4, 1072, 1104, true, '▁it\'s "so" big'],
      ],
    );
    assert.deepEqual([result.tokens[4]!.p, result.tokens[4]!.plog], [1, 12]);
  });

  it("parses several segments in order, C's non-finite floats, and a clip that decoded to nothing", () => {
    const token = (i: number, p: string, plog: string, piece: string) =>
      `  [${String(i).padStart(2)}] id=   12 frame=  ${i} dur_idx= 1 dur_val= 1 p=${p} plog=${plog} t0=  ${8 * i} t1=  ${8 * i + 8} word_start=true "${piece}"`;
    const stderr = [
      'Segments (3):',
      'Segment 0: [0 -> 500] "a b"',
      'Tokens [2]:',
      token(0, 'nan', '-inf', '▁a'),
      token(1, '-nan', 'inf', '▁b'),
      'Segment 1: [500 -> 900] ""',
      'Tokens [0]:',
      'Segment 2: [900 -> 950] "c"',
      'Tokens [1]:',
      token(0, '0.5000', '1.2500', '▁c'),
    ].join('\n');
    const result = parseParakeetCliOutput('a b c\n', stderr);
    assert.deepEqual(result.segments, [
      { t0: 0, t1: 500, text: 'a b' },
      { t0: 500, t1: 900, text: '' },
      { t0: 900, t1: 950, text: 'c' },
    ]);
    assert.deepEqual(
      result.tokens.map((t) => [t.index, t.piece, t.p, t.plog]),
      [
        [0, '▁a', NaN, -Infinity],
        [1, '▁b', NaN, Infinity],
        [0, '▁c', 0.5, 1.25],
      ],
    );
    assert.deepEqual(parseParakeetCliOutput('\n', [...PREAMBLE, 'Segments (0):', ''].join('\n')), { text: '', segments: [], tokens: [] });
  });

  it('refuses output without the block, cut short or in another format, naming what it found', () => {
    // parakeet-cli exits with 0 when it cannot read a file: only the missing block tells
    const unreadable = [...PREAMBLE, 'read_audio_data: failed to read audio data', "error: failed to read audio file '/clips/x.wav'", ''].join('\n');
    assert.throws(() => parseParakeetCliOutput('', unreadable), /printed no segments[\s\S]*failed to read audio file '\/clips\/x.wav'/);
    const lines = CAPTURED.split('\n');
    const tokenLine = lines.findIndex((line) => line.includes('"▁hea"'));
    assert.throws(() => parseParakeetCliOutput('', lines.slice(0, tokenLine + 1).join('\n')), /expected token 2 of segment 0 at stderr line 9, got ""/);
    const changed = lines.map((line, i) => (i === tokenLine ? line.replace('dur_val=', 'duration=') : line));
    assert.throws(() => parseParakeetCliOutput('', changed.join('\n')), /expected token 1 of segment 0 at stderr line 8, got ".*duration= 3/);
    assert.throws(() => parseParakeetCliOutput('', CAPTURED.replace('Segment 0:', 'Segment 1:')), /segment 1 where 0 was due/);
    assert.throws(() => parseParakeetCliOutput('', CAPTURED.replace('p=0.0041', 'p=high')), /not a number: high/);
  });
});

describe('parakeet-cli on a random-weight model (tiny, seed 2) and jfk.wav', () => {
  const decodes: Promise<ParakeetCliResult>[] = [];
  const decode = (threads: number) =>
    (decodes[threads] ??= parakeetTestModel({ size: 'tiny', seed: 2 }).then((model) => runParakeetCli(model, JFK_WAV, { threads })));

  it('decodes tokens with frames in order and each token ending at or after its start', async (t) => {
    const { text, segments, tokens } = await decode(1);
    assert.ok(tokens.length > 0 && text.length > 0, 'some tokens');
    assert.deepEqual(segments, [{ t0: 0, t1: 1101, text }], 'one segment over the whole clip: 176000 samples, 1101 mel frames');
    assert.deepEqual(
      tokens.map((t) => t.index),
      tokens.map((_, i) => i),
    );
    for (const [i, token] of tokens.entries()) {
      assert.ok(i === 0 || token.frame >= tokens[i - 1]!.frame, `token ${i}: frame ${token.frame} after ${tokens[i - 1]?.frame}`);
      assert.ok(token.t1 >= token.t0, `token ${i}: t1 ${token.t1} < t0 ${token.t0}`);
    }
    // Seed 2 stays on one encoder frame until the limit of 10 symbols forces it on (scripts/make-parakeet-test-model.mjs)
    // with this machine's kernels; random weights sit near ties, so another CPU's summation order may not get there.
    const most = mostTokensInOneFrame(tokens);
    assert.ok(most <= 10, `${most} tokens in one frame, past the limit of 10`);
    t.diagnostic(most === 10 ? 'the forced advance after 10 symbols was taken' : `at most ${most} tokens in one frame: no forced advance here`);
  });

  it('decodes the same tokens on 1 and 2 threads', async () => {
    const [one, two] = await Promise.all([decode(1), decode(2)]);
    assert.deepEqual(two, one);
  });

  it('fails with the end of its stderr when the clip cannot be read', async () => {
    const notAudio = path.join(os.tmpdir(), `voxd-parakeet-cli-${process.pid}.wav`);
    fs.writeFileSync(notAudio, 'not audio');
    try {
      await assert.rejects(
        runParakeetCli(await parakeetTestModel({ size: 'tiny', seed: 2 }), notAudio, { threads: 1 }),
        /printed no segments[\s\S]*failed to read audio file/,
      );
      await assert.rejects(runParakeetCli(notAudio, JFK_WAV, { threads: 1 }), /exit code 1[\s\S]*failed to load Parakeet model/);
    } finally {
      fs.rmSync(notAudio, { force: true });
    }
  });
});
