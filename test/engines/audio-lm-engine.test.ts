/**
 * The audio language model engine against llama.cpp's llama-server on the same random-weight Qwen3-ASR and Voxtral
 * pairs and clips: greedy answers token for token, alone, in a batch of clips of mixed lengths, and beside a
 * transcription cancelled mid-way; streamed text; the files it recognises. Random weights give garbage text; every
 * number on the way to it is the models' real arithmetic.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { createAudioLmEngine } from '../../src/engines/audio-lm.js';
import { ggmlTtsEngine } from '../../src/engines/ggml-tts.js';
import { whisperEngine } from '../../src/engines/whisper.js';
import type { NativeAudioLmModel, NativeAudioLmResult } from '../../src/native/addon.js';
import { loadNative } from '../../src/native/load.js';
import { audioLmTestModel, startLlamaServer, TRANSCRIBE_INSTRUCTION, type AudioLmTestModel } from '../helpers/audio-lm.js';
import { makeTiny } from '../helpers/ggml-tts.js';
import { JFK_WAV, SHARED } from '../helpers/paths.js';
import { readWavMono } from '../helpers/wav.js';
import { whisperTestModel } from '../helpers/whisper-models.js';

const SPEECH = path.join(SHARED, 'audio', 'speech');
/** 16 kHz mono clips of 4 to 11 s, so the engine and the CLI read the same samples (no resampling on either side). */
const CLIPS = [JFK_WAV, ...['librivox-0870.wav', 'librivox-0890.wav', 'librivox-0920.wav'].map((f) => path.join(SPEECH, f))];
/** Tokens per answer: enough to meet any divergence, few enough for one-token steps on 2 cores. */
const TOKENS = 24;
/**
 * Results do not depend on the count (every ggml CPU kernel computes an output element in one thread). Two, as on CI's
 * 2 cores: with one thread on each side the oracle comparison took 285 s there, with two 16 s.
 */
const THREADS = 2;

const ARCHS = ['qwen3asr', 'voxtral'] as const;

describe('audio language model engine against llama-server', () => {
  const models: { arch: (typeof ARCHS)[number]; files: AudioLmTestModel; native: NativeAudioLmModel }[] = [];
  const clips = CLIPS.map((file) => ({ file, samples: readWavMono(file).samples }));
  const alone = new Map<string, NativeAudioLmResult>();

  before(async () => {
    for (const arch of ARCHS) {
      const files = await audioLmTestModel({ arch, size: 'tiny' });
      models.push({ arch, files, native: await loadNative().AudioLmModel.load(files.model, files.mmproj, { threads: THREADS, maxBatch: 4 }) });
    }
  });
  after(() => models.forEach((m) => m.native.release()));

  const request = { user: TRANSCRIBE_INSTRUCTION, maxTokens: TOKENS };

  it('gives llama-server’s greedy answer on every clip', async () => {
    for (const model of models) {
      const oracle = await startLlamaServer(model.files, { slots: 1, threads: THREADS });
      try {
        for (const clip of clips) {
          const what = `${model.arch} on ${path.basename(clip.file)}`;
          const result = await model.native.transcribe(clip.samples, request);
          alone.set(`${model.arch} ${clip.file}`, result);
          assert.ok(result.tokens.length > 5, `${what}: the random model answers something (${result.tokens.length} tokens)`);
          assert.equal(result.text, await oracle.transcribe(clip.file, TOKENS), what);
          if (model.arch === 'qwen3asr') {
            // Qwen3-ASR's own layout, as the engine asks it (src/engines/audio-lm.ts): an empty system message, the audio alone
            const own = await model.native.transcribe(clip.samples, { system: '', user: '', maxTokens: TOKENS });
            assert.equal(own.text, await oracle.chat('', clip.file, TOKENS), `${what}, Qwen3-ASR's layout`);
          }
        }
      } finally {
        await oracle.close();
      }
    }
  });

  it('gives each clip the same tokens in a batch of mixed lengths, and beside a cancelled one', async () => {
    for (const model of models) {
      const key = (clip: (typeof clips)[number]): string => `${model.arch} ${clip.file}`;
      for (const clip of clips) if (!alone.has(key(clip))) alone.set(key(clip), await model.native.transcribe(clip.samples, request));
      const abort = new (loadNative().AbortFlag)();
      const cancelled = model.native
        .transcribe((clips[1] as (typeof clips)[number]).samples, { ...request, maxTokens: 0 }, () => abort.abort(), abort)
        .then(
          () => 'finished',
          (e: Error & { code?: string }) => e.code,
        );
      const batch = await Promise.all(clips.map((clip) => model.native.transcribe(clip.samples, request)));
      assert.equal(await cancelled, 'aborted');
      batch.forEach((result, i) => {
        const single = alone.get(key(clips[i] as (typeof clips)[number]));
        assert.deepEqual(result.tokens, single?.tokens, `${model.arch} clip ${i}: tokens`);
        // the log-probabilities to the bit: every logit of every step, attention over the job's own cells included
        assert.deepEqual(result.logprobs, single?.logprobs, `${model.arch} clip ${i}: log-probabilities`);
      });
      assert.ok(model.native.timings().maxStepRows >= 2, `${model.arch}: steps decoded several clips at once`);
    }
  });

  it('refuses audio and prompt longer than a job’s cells with invalid_argument, and its sequence serves the next job', async () => {
    const files = (models[0] as (typeof models)[number]).files;
    // 256 cells and 2 places: jfk.wav three times over (33 s, over 400 audio positions) does not fit
    const small = await loadNative().AudioLmModel.load(files.model, files.mmproj, { threads: THREADS, maxBatch: 2, ctxPerJob: 256 });
    try {
      const jfk = (clips[0] as (typeof clips)[number]).samples;
      const long = new Float32Array(jfk.length * 3);
      for (let i = 0; i < 3; i++) long.set(jfk, i * jfk.length);
      for (let i = 0; i < 3; i++) {
        await assert.rejects(small.transcribe(long, request), (e: Error & { code?: string }) => e.code === 'invalid_argument' && /positions/.test(e.message));
      }
      const fits = await Promise.all([small.transcribe(jfk.subarray(0, 16000 * 4), request), small.transcribe(jfk.subarray(0, 16000 * 4), request)]);
      assert.deepEqual(fits[0]?.tokens, fits[1]?.tokens, 'both places still serve');
    } finally {
      small.release();
    }
  });

  it('reads the system message as plain text: special-token texts in it stay text', async () => {
    const model = models[0] as (typeof models)[number];
    const samples = (clips[0] as (typeof clips)[number]).samples;
    const plain = await model.native.transcribe(samples, { ...request, system: 'x' });
    const special = await model.native.transcribe(samples, { ...request, system: '<|im_end|>' });
    // `x` is one token; `<|im_end|>` read as text is several, read as the special token it would be one
    assert.ok(special.promptTokens > plain.promptTokens + 2, `${special.promptTokens} vs ${plain.promptTokens} positions`);
  });

  it('pads audio shorter than a second and answers nothing for no audio', async () => {
    const model = models[0] as (typeof models)[number];
    for (const length of [1, 320]) assert.ok((await model.native.transcribe(new Float32Array(length), request)).tokens.length > 0, `${length} samples`);
    assert.deepEqual((await model.native.transcribe(new Float32Array(0), request)).tokens, []);
  });

  it('streams the answer in pieces whose concatenation is the text', async () => {
    const model = models[0] as (typeof models)[number];
    const pieces: string[] = [];
    const result = await model.native.transcribe((clips[0] as (typeof clips)[number]).samples, request, (piece) => pieces.push(piece));
    assert.ok(pieces.length >= result.tokens.length / 2, `${pieces.length} pieces for ${result.tokens.length} tokens`);
    assert.equal(pieces.join(''), result.text);
  });
});

describe('audio language model files', () => {
  const engine = createAudioLmEngine();

  it('recognises a model with its audio mmproj, as a directory or as the model file', async () => {
    for (const arch of ARCHS) {
      const files = await audioLmTestModel({ arch, size: 'tiny' });
      assert.equal(await engine.detect(files.dir), true, `${arch} directory`);
      assert.equal(await engine.detect(files.model), true, `${arch} model file`);
      assert.equal(await engine.detect(files.mmproj), false, `${arch} mmproj alone`);
    }
  });

  it('leaves other engines’ files to them, and they leave its files', async () => {
    const tts = await makeTiny('qwen3tts');
    const whisper = await whisperTestModel({ size: 'tiny' });
    assert.equal(await engine.detect(tts.dir), false, 'a GGML TTS pair');
    assert.equal(await engine.detect(whisper), false, 'a Whisper file');
    const asr = await audioLmTestModel({ arch: 'qwen3asr', size: 'tiny' });
    assert.equal(await ggmlTtsEngine.detect(asr.dir), false, 'the TTS engine');
    assert.equal(await whisperEngine.detect(asr.model), false, 'the Whisper engine');
  });
});
