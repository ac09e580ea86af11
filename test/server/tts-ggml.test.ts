/**
 * The GGML TTS engine (llama.cpp's libmtmd audio generation) with a random-weight Pocket TTS model (Qwen3-TTS:
 * tts-ggml-qwen3.test.ts)
 * (scripts/make-tts-test-model.mjs, tiny): the native surface directly, then POST /v1/audio/speech on a real server
 * with the model directory as `model` (every format, the SDK, streaming, cloning, seeds, max_tokens, a client that
 * leaves, bad input), with a server-wide --voices-dir, and through a local hub double. The audio is noise; the
 * plumbing is what is tested.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type OpenAI from 'openai';
import { ConfigError, resolveConfig } from '../../src/config.js';
import { ggmlTtsEngine } from '../../src/engines/ggml-tts.js';
import { readGgufArchitecture } from '../../src/engines/gguf-files.js';
import type { NativeTtsGgmlRequest } from '../../src/native/addon.js';
import { loadNative } from '../../src/native/load.js';
import { decodeAudio } from '../../src/services/audio/decode.js';
import { HubDouble } from '../helpers/hub-double.js';
import { nativeRejection } from '../helpers/native.js';
import { JFK_WAV } from '../helpers/paths.js';
import { cancelledJobs, expectEnvelope, waitForCancelledJob, sdk, startTestServer, type TestServer } from '../helpers/server.js';
import { readWavMono, wavBytes } from '../helpers/wav.js';
import { durationOf, FRAME, makeTiny, pcmOf, post, RATE, type TtsModelPaths } from '../helpers/ggml-tts.js';

/**
 * Whether a batch step decodes its rows together (one backbone call per run of consecutive sequence ids): on x86
 * only; elsewhere each row is decoded alone, since arm64's fast kernels start at several rows (docs/architecture.md).
 */
const SHARED_DECODES = process.arch === 'x64' || process.arch === 'ia32';

/** A GGUF v3 file holding only `general.architecture` (no tensors). */
function ggufWithArchitecture(arch: string): Buffer {
  const str = (s: string): Buffer => {
    const bytes = Buffer.from(s, 'utf8');
    const len = Buffer.alloc(8);
    len.writeBigUInt64LE(BigInt(bytes.length));
    return Buffer.concat([len, bytes]);
  };
  const head = Buffer.alloc(24);
  head.write('GGUF', 0, 'ascii');
  head.writeUInt32LE(3, 4);
  head.writeBigUInt64LE(0n, 8); // tensors
  head.writeBigUInt64LE(1n, 16); // key-value pairs
  const type = Buffer.alloc(4);
  type.writeUInt32LE(8, 0); // string
  return Buffer.concat([head, str('general.architecture'), type, str(arch)]);
}

describe('GGML TTS engine (random-weight Pocket TTS)', () => {
  let tiny: TtsModelPaths;
  let scratch: string;
  /** The tiny pair plus voices/jfk.wav. */
  let modelDir: string;
  const cleanups: (() => Promise<void>)[] = [];
  after(async () => {
    await Promise.all(cleanups.map((cleanup) => cleanup()));
    if (scratch) await fsp.rm(scratch, { recursive: true, force: true });
  });
  before(async () => {
    tiny = await makeTiny();
    scratch = await fsp.mkdtemp(path.join(os.tmpdir(), 'voxd-tts-ggml-'));
    modelDir = path.join(scratch, 'pocket');
    await fsp.mkdir(path.join(modelDir, 'voices'), { recursive: true });
    for (const file of [tiny.model, tiny.mmproj]) await fsp.copyFile(file, path.join(modelDir, path.basename(file)));
    await fsp.copyFile(JFK_WAV, path.join(modelDir, 'voices', 'jfk.wav'));
    await fsp.writeFile(path.join(modelDir, 'voices', 'README.txt'), 'not audio: skipped');
  });

  describe('native surface and detection', () => {
    it('reads the architecture from the GGUF header and detects the directory, the backbone, not the mmproj', async () => {
      assert.equal(await readGgufArchitecture(tiny.model), 'pockettts');
      assert.equal(await readGgufArchitecture(tiny.mmproj), 'clip');
      assert.equal(await readGgufArchitecture(JFK_WAV), null);
      assert.equal(await ggmlTtsEngine.detect(modelDir), true);
      assert.equal(await ggmlTtsEngine.detect(tiny.model), true);
      assert.equal(await ggmlTtsEngine.detect(tiny.mmproj), false);
      assert.equal(await ggmlTtsEngine.detect(JFK_WAV), false);
    });

    it('loads, reports its info, synthesises, streams every sample once and is reproducible per seed', async () => {
      const model = await loadNative().TtsGgmlModel.load({ model: tiny.model, mmproj: tiny.mmproj, threads: 2 });
      try {
        assert.deepEqual(model.info(), { arch: 'pockettts', sampleRate: RATE, variant: 'english', sequences: 1 });
        const streamed: Float32Array[] = [];
        const a = await model.synthesize({ text: 'Hello world, this is a test.', seed: 7 }, (chunk) => streamed.push(chunk));
        assert.ok(a.length > 0 && a.length % FRAME === 0, `${a.length} samples`);
        assert.ok(streamed.length > 1, `${streamed.length} chunks`);
        assert.deepEqual(Float32Array.from(streamed.flatMap((c) => [...c])), a);
        const b = await model.synthesize({ text: 'Hello world, this is a test.', seed: 7 });
        assert.deepEqual(b, a, 'the same seed twice in a row gives the same samples');
        const c = await model.synthesize({ text: 'Hello world, this is a test.', seed: 8 });
        assert.notDeepEqual(c, a);
        const short = await model.synthesize({ text: 'Hello world, this is a test.', seed: 7, maxFrames: 3 });
        assert.equal(short.length, 3 * FRAME);
        const flag = new (loadNative().AbortFlag)();
        flag.abort();
        assert.equal((await nativeRejection(model.synthesize({ text: 'Hello.' }, null, flag))).code, 'aborted');
        assert.throws(() => model.synthesize({ text: 'Hello.', reference: new Float32Array(0) }), { code: 'invalid_argument' });
      } finally {
        model.release();
      }
    });

    it('encodes a named reference once: the same samples, no encoder pass the second time', async () => {
      const model = await loadNative().TtsGgmlModel.load({ model: tiny.model, mmproj: tiny.mmproj, threads: 2 });
      try {
        const reference = readWavMono(JFK_WAV).samples.subarray(0, 4 * 16000);
        const request = { text: 'A voice kept by name.', seed: 3, reference };
        const fresh = await model.synthesize(request);
        const encoderMs = (): number => model.timings().encoderMs;
        const before = encoderMs();
        const first = await model.synthesize({ ...request, voiceKey: 'voice_a' });
        const encoded = encoderMs();
        assert.ok(encoded > before, 'the first use encodes the clip');
        const again = await model.synthesize({ ...request, voiceKey: 'voice_a' });
        assert.equal(encoderMs(), encoded, 'the second use does not');
        assert.deepEqual(first, fresh);
        assert.deepEqual(again, fresh);
        assert.throws(() => model.synthesize({ ...request, voiceKey: 7 as unknown as string }), { code: 'invalid_argument' });
      } finally {
        model.release();
      }
    });

    it('batches: every request gets the samples it gets alone, joining late or beside one that leaves', async () => {
      const model = await loadNative().TtsGgmlModel.load({ model: tiny.model, mmproj: tiny.mmproj, threads: 2, sequences: 4 });
      try {
        const jfk = (await decodeAudio(await fsp.readFile(JFK_WAV), { sampleRate: RATE })).samples;
        const hello: NativeTtsGgmlRequest = { text: 'Hello world, this is a test.', seed: 1 };
        // over 50 tokens: two chunks, the second restarting from the voice
        const cloned: NativeTtsGgmlRequest = {
          text: 'The quick brown fox jumps over the lazy dog. Then it runs far away, into the woods, and it is gone.',
          seed: 2,
          reference: jfk,
        };
        const greedy: NativeTtsGgmlRequest = { text: 'Short.', seed: 3, temperature: 0 };
        const bounded: NativeTtsGgmlRequest = { text: 'Bounded by a frame limit.', seed: 4, maxFrames: 13 };
        const requests = [hello, cloned, greedy, bounded];
        const alone: Float32Array[] = [];
        for (const request of requests) alone.push(await model.synthesize(request));

        const before = model.timings();
        const batch = model.createBatch();
        const results = new Map<number, Float32Array>();
        const step = async (): Promise<void> => {
          for (const result of await batch.step()) {
            assert.ok('samples' in result, `slot ${result.slot}: ${'error' in result ? result.error.message : ''}`);
            results.set(result.slot, result.samples);
          }
        };
        const slots = [batch.add(hello), batch.add(cloned), batch.add(greedy)];
        const leaving = batch.add({ text: 'This one leaves the batch early.', seed: 5 });
        assert.equal(batch.active, 4);
        assert.throws(() => model.synthesize({ text: 'No sequence left for me.' }), { code: 'batch_full' });
        await step();
        const pending = batch.step();
        assert.throws(() => batch.step(), { code: 'busy' });
        await pending;
        batch.cancel(leaving);
        slots.push(batch.add(bounded)); // joins a running batch
        let steps = 2;
        while (batch.active > 0) {
          await step();
          steps++;
        }
        assert.ok(!results.has(leaving), 'a cancelled request is never handed back');
        const after = model.timings();
        const decodes = after.backboneCalls - before.backboneCalls;
        if (SHARED_DECODES) {
          // the members leave from the highest id down, so their ids stay one run: one decode per step
          assert.ok(decodes <= steps, `at most one backbone decode per step: ${decodes} decodes in ${steps} steps`);
          assert.ok(after.backboneRows - before.backboneRows > decodes, 'decodes served several requests');
        } else {
          assert.equal(after.backboneRows - before.backboneRows, decodes, 'one row per decode');
        }
        assert.ok(after.frames - before.frames >= alone.reduce((sum, a) => sum + a.length / FRAME, 0), 'every frame counted');
        assert.ok(after.decoderMs > before.decoderMs && after.generatorMs > before.generatorMs);
        // the flow net and the audio decoder run one graph for the whole step, on every architecture
        const flows = after.generatorCalls - before.generatorCalls;
        assert.ok(after.generatorRows - before.generatorRows > flows, `flow graphs of several frames: ${flows} graphs`);
        const windows = after.decoderWindows - before.decoderWindows;
        assert.ok(windows > after.decoderCalls - before.decoderCalls, `decoder graphs of several windows: ${windows} windows`);
        slots.forEach((slot, i) => assert.deepEqual(results.get(slot), alone[i], `request ${i}: batch = alone, sample for sample`));
        assert.equal(alone[3]?.length, 13 * FRAME);
        assert.ok(steps > (alone[1]?.length ?? 0) / FRAME, `${steps} steps: one frame per step`);
        assert.throws(() => batch.add({ text: '   ' }), { code: 'invalid_argument' });
        batch.close();
        assert.throws(() => batch.add(hello), { code: 'closed' });
        // greedy: with the least noise the seed makes no difference
        assert.deepEqual(await model.synthesize({ ...greedy, seed: 9 }), alone[2]);
      } finally {
        model.release();
      }
    });

    it("computes what libmtmd's one-request generator and decoder compute, within rounding", async () => {
      // voxd's own flow net and mimi graphs against libmtmd's calls on the same frames and noise (the same seeds):
      // they differ only in rounding (activations meet the weights in f16 in other orders). At the default noise
      // scale that stays below 1e-2 over whole requests; with almost no noise the random model's feedback through
      // the backbone amplifies it, so greedy requests are not compared.
      const load = (generator: 'batched' | 'libmtmd') => loadNative().TtsGgmlModel.load({ model: tiny.model, mmproj: tiny.mmproj, threads: 2, generator });
      const [own, reference] = await Promise.all([load('batched'), load('libmtmd')]);
      try {
        const jfk = (await decodeAudio(await fsp.readFile(JFK_WAV), { sampleRate: RATE })).samples;
        const requests: NativeTtsGgmlRequest[] = [
          { text: 'Hello world, this is a test.', seed: 1, maxFrames: 20 },
          // two chunks: the decoder restarts between them
          { text: 'The quick brown fox jumps over the lazy dog. Then it runs far away, into the woods, and it is gone.', seed: 2, reference: jfk },
        ];
        for (const request of requests) {
          const ours = await own.synthesize(request);
          const theirs = await reference.synthesize(request);
          assert.equal(ours.length, theirs.length, 'the same frames, end of speech included');
          let worst = 0;
          for (let i = 0; i < ours.length; i++) worst = Math.max(worst, Math.abs((ours[i] as number) - (theirs[i] as number)));
          assert.ok(worst < 1e-2, `largest difference ${worst}`);
          assert.notDeepEqual(ours, new Float32Array(ours.length), 'not silence');
        }
        const t = reference.timings();
        assert.equal(t.generatorRows, t.generatorCalls, 'libmtmd: one frame per generator call');
        assert.throws(() => load('other' as 'batched'), { code: 'invalid_argument' });
      } finally {
        own.release();
        reference.release();
      }
    });

    it('batches with holes in the sequence ids: each run of ids is decoded apart and still gives the samples alone', async () => {
      const model = await loadNative().TtsGgmlModel.load({ model: tiny.model, mmproj: tiny.mmproj, threads: 2, sequences: 4 });
      try {
        // the second and fourth end first, leaving ids 0 and 2 as runs of one beside each other
        const requests: NativeTtsGgmlRequest[] = [60, 4, 60, 20].map((maxFrames, i) => ({ text: 'Hello world, this is a test.', seed: 11 + i, maxFrames }));
        const alone: Float32Array[] = [];
        for (const request of requests) alone.push(await model.synthesize(request));
        const before = model.timings();
        const batch = model.createBatch();
        const slots = requests.map((request) => batch.add(request));
        const results = new Map<number, Float32Array>();
        let steps = 0;
        while (batch.active > 0) {
          for (const result of await batch.step()) if ('samples' in result) results.set(result.slot, result.samples);
          steps++;
        }
        batch.close();
        const decodes = model.timings().backboneCalls - before.backboneCalls;
        slots.forEach((slot, i) => assert.deepEqual(results.get(slot), alone[i], `request ${i}: batch = alone, sample for sample`));
        if (SHARED_DECODES) assert.ok(decodes > steps, `${decodes} decodes in ${steps} steps: the runs of ids were decoded apart`);
      } finally {
        model.release();
      }
    });

    it('refuses a missing mmproj, a backbone as mmproj and an unsupported architecture with model_load_failed', async () => {
      const { TtsGgmlModel } = loadNative();
      const noMmproj = await nativeRejection(TtsGgmlModel.load({ model: tiny.model, mmproj: '' }));
      assert.equal(noMmproj.code, 'model_load_failed');
      assert.match(noMmproj.message, /mmproj/);
      const wrongMmproj = await nativeRejection(TtsGgmlModel.load({ model: tiny.model, mmproj: tiny.model }));
      assert.equal(wrongMmproj.code, 'model_load_failed');
      assert.match(wrongMmproj.message, /not an mmproj/);
      const llama = path.join(scratch, 'llama.gguf');
      await fsp.writeFile(llama, ggufWithArchitecture('llama'));
      const unsupported = await nativeRejection(TtsGgmlModel.load({ model: llama, mmproj: tiny.mmproj }));
      assert.equal(unsupported.code, 'model_load_failed');
      assert.match(unsupported.message, /architecture 'llama'.*does not support/);
      const notGguf = await nativeRejection(TtsGgmlModel.load({ model: JFK_WAV, mmproj: tiny.mmproj }));
      assert.match(notGguf.message, /not a readable GGUF/);
    });
  });

  describe('POST /v1/audio/speech', () => {
    let server: TestServer;
    before(async () => {
      server = await startTestServer({ after: (cleanup) => cleanups.push(cleanup) });
    });

    it('answers every format with audio at 24 kHz, and lists the voices', async () => {
      for (const format of ['mp3', 'wav', 'flac', 'ogg', 'opus', 'aac', 'pcm'] as const) {
        const response = await post(server.base, { model: modelDir, input: 'Hello world.', response_format: format, seed: 1 });
        assert.equal(response.status, 200, await response.clone().text());
        const seconds = await durationOf(Buffer.from(await response.arrayBuffer()), format);
        assert.ok(seconds > 0.1, `${format}: ${seconds} s`);
      }
      const voices = (await (await fetch(`${server.base}/v1/audio/voices?model=${encodeURIComponent(modelDir)}`)).json()) as {
        capabilities: { cloning: boolean };
        data: { id: string }[];
      };
      assert.equal(voices.capabilities.cloning, true, 'a GGML model clones');
      assert.deepEqual(
        voices.data.map((v) => v.id),
        ['default', 'jfk'],
      );
      const models = (await (await fetch(`${server.base}/v1/models`)).json()) as { data: { id: string; engine: string; task: string }[] };
      assert.deepEqual(
        models.data.filter((m) => m.id === modelDir).map((m) => [m.engine, m.task]),
        [['ggml-tts', 'tts']],
      );
    });

    it('works with the openai SDK', async () => {
      const response = await sdk(server.base).audio.speech.create({
        model: modelDir,
        voice: 'alloy',
        input: 'Hello from a GGML voice.',
        response_format: 'wav' as OpenAI.Audio.SpeechCreateParams['response_format'],
      });
      assert.ok((await durationOf(Buffer.from(await response.arrayBuffer()), 'wav')) > 0.1);
    });

    it('streams one container in several chunks', async () => {
      const response = await post(server.base, {
        model: modelDir,
        input: 'The first sentence is here. And a second one follows it.',
        response_format: 'wav',
        stream: true,
        streaming_interval: 0.1,
        seed: 3,
      });
      assert.equal(response.status, 200);
      const chunks: Buffer[] = [];
      const reader = (response.body as ReadableStream<Uint8Array>).getReader();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        chunks.push(Buffer.from(value));
      }
      assert.ok(chunks.length > 1, `${chunks.length} chunks`);
      const body = Buffer.concat(chunks);
      assert.equal(body.toString('ascii', 0, 4), 'RIFF');
      assert.equal(body.indexOf('RIFF', 4), -1, 'one container');
      assert.equal(body.readUInt32LE(4), 0xffffffff, 'streamed WAV: unknown size');
      assert.ok((await decodeAudio(body, { sampleRate: RATE })).duration > 0.5);
    });

    it('is reproducible with a seed, and max_tokens bounds the frames', async () => {
      const input = 'Seeds make sampling reproducible.';
      const a = await pcmOf(server.base, { model: modelDir, input, seed: 42 });
      const b = await pcmOf(server.base, { model: modelDir, input, seed: 42 });
      assert.ok(a.length > 0);
      assert.ok(a.equals(b), 'same seed, same PCM');
      const c = await pcmOf(server.base, { model: modelDir, input, seed: 43 });
      assert.ok(!a.equals(c), 'another seed, other PCM');
      const bounded = await pcmOf(server.base, { model: modelDir, input, seed: 42, max_tokens: 4 });
      assert.equal(bounded.length, 4 * FRAME * 2);
      assert.ok(a.length > bounded.length);
    });

    it('clones from ref_audio (a data URL or a server path) and from a preset voice clip', async () => {
      const input = 'Cloning a voice from a clip.';
      const plain = await pcmOf(server.base, { model: modelDir, input, seed: 5 });
      const dataUrl = `data:audio/wav;base64,${fs.readFileSync(JFK_WAV).toString('base64')}`;
      const cloned = await pcmOf(server.base, { model: modelDir, input, seed: 5, ref_audio: dataUrl });
      assert.ok(!plain.equals(cloned), 'the reference changes the audio');
      const byPath = await pcmOf(server.base, { model: modelDir, input, seed: 5, ref_audio: JFK_WAV, ref_text: 'ignored' });
      assert.ok(byPath.equals(cloned), 'a path and a data URL of the same clip clone the same');
      const preset = await pcmOf(server.base, { model: modelDir, input, seed: 5, voice: 'jfk' });
      assert.ok(preset.equals(cloned), 'voices/jfk.wav is the same voice');
    });

    it('refuses what Pocket TTS cannot honour before any audio', async () => {
      const base = { model: modelDir, input: 'Hello.' };
      const styled = await post(server.base, { ...base, instructions: 'whisper it' });
      assert.equal(styled.status, 200, 'style instructions are a wish: the model speaks without them');
      assert.equal(styled.headers.get('x-voxd-ignored'), 'instructions');
      await expectEnvelope(await post(server.base, { ...base, lang_code: 'e' }), 400, 'invalid_request', 'lang_code');
      await expectEnvelope(await post(server.base, { ...base, speed: 1.5 }), 400, 'invalid_request', 'speed');
      await expectEnvelope(await post(server.base, { ...base, voice: 'nobody' }), 400, 'invalid_request', 'voice');
      await expectEnvelope(await post(server.base, { ...base, seed: -1 }), 400, 'invalid_request');
      const empty = `data:audio/wav;base64,${wavBytes(new Float32Array(0), RATE).toString('base64')}`;
      const refusal = async (refAudio: string): Promise<[string, string]> => {
        const response = await post(server.base, { ...base, ref_audio: refAudio });
        assert.equal(response.status, 400);
        const { error } = (await response.json()) as { error: { param: string; message: string } };
        return [error.param, error.message];
      };
      // the speech service, which knows the request, names its field; the engine names the clip in its own words
      // and the param names the field (docs/architecture.md "Errors")
      assert.deepEqual(await refusal(empty), ['ref_audio', 'ref_audio: no audio samples could be decoded']);
      // a clip of a few dozen milliseconds would abort libmtmd's encoders: refused before
      const blip = `data:audio/wav;base64,${wavBytes(new Float32Array(RATE / 20).fill(0.1), RATE).toString('base64')}`;
      assert.deepEqual(await refusal(blip), ['ref_audio', 'the reference clip is 0.05 s long; a voice needs at least 0.5 s']);
      // temperature is the generator's noise scale
      const noisy = await pcmOf(server.base, { ...base, seed: 3, temperature: 1.2 });
      assert.ok(!noisy.equals(await pcmOf(server.base, { ...base, seed: 3, temperature: 0.1 })));
    });

    it('refuses a directory without mmproj and a GGUF of an unsupported architecture with 400 invalid_model', async () => {
      const noMmproj = path.join(scratch, 'no-mmproj');
      await fsp.mkdir(noMmproj);
      await fsp.copyFile(tiny.model, path.join(noMmproj, path.basename(tiny.model)));
      const response = await post(server.base, { model: noMmproj, input: 'Hello.' });
      assert.equal(response.status, 400);
      const { error } = (await response.json()) as { error: { code: string; message: string } };
      assert.equal(error.code, 'invalid_model');
      assert.match(error.message, /mmproj/);

      const otherArch = path.join(scratch, 'other-arch');
      await fsp.mkdir(otherArch);
      await fsp.writeFile(path.join(otherArch, 'model.gguf'), ggufWithArchitecture('llama'));
      await fsp.copyFile(tiny.mmproj, path.join(otherArch, 'mmproj-model.gguf'));
      await expectEnvelope(await post(server.base, { model: otherArch, input: 'Hello.' }), 400, 'invalid_model', 'model');
      await expectEnvelope(await post(server.base, { model: path.join(otherArch, 'model.gguf'), input: 'Hello.' }), 400, 'invalid_model', 'model');
    });

    it('batches concurrent requests: each answers what it answers alone, also beside a client that leaves', async () => {
      const bodies = [1, 2, 3, 4].map((seed) => ({ model: modelDir, input: `Request number ${seed} speaks now.`, seed }));
      // streaming requests take the serial path: one sequence, alone
      const alone: Buffer[] = [];
      for (const body of bodies) alone.push(await pcmOf(server.base, { ...body, stream: true }));
      const cancelledBefore = await cancelledJobs(server.base);
      const steps = async (): Promise<{ sum: number; count: number }> => {
        const metrics = await (await fetch(`${server.base}/metrics`)).text();
        const value = (name: string): number =>
          Number(metrics.match(new RegExp(`^voxd_tts_batch_size_${name}\\{[^}]*path="continuous"[^}]*\\} (\\d+)`, 'm'))?.[1] ?? 0);
        return { sum: value('sum'), count: value('count') };
      };
      const stepsBefore = await steps();

      const leaving = new AbortController();
      const leaver = post(server.base, { model: modelDir, input: 'This client leaves long before the end of its speech.', seed: 9 }, leaving.signal).catch(
        (error: unknown) => error,
      );
      setTimeout(() => leaving.abort(), 300);
      const together = await Promise.all(bodies.map((body) => pcmOf(server.base, body)));
      together.forEach((pcm, i) => assert.ok(pcm.equals(alone[i] as Buffer), `request ${i}: batched PCM = alone`));
      assert.ok((await leaver) instanceof Error);
      const stepsAfter = await steps();
      const meanBatch = (stepsAfter.sum - stepsBefore.sum) / (stepsAfter.count - stepsBefore.count);
      assert.ok(meanBatch > 2, `mean continuous batch ${meanBatch.toFixed(2)}`);
      assert.equal(await cancelledJobs(server.base), cancelledBefore + 1);
    });

    it('lets a streaming request speak beside a running batch instead of waiting for it to drain', async () => {
      const finished: string[] = [];
      const track = (name: string, body: Record<string, unknown>): Promise<void> =>
        pcmOf(server.base, { model: modelDir, input: 'A long request that keeps the batch busy for a while.', ...body }).then(() => {
          finished.push(name);
        });
      const batch = [track('batch 1', { seed: 1, max_tokens: 150 }), track('batch 2', { seed: 2, max_tokens: 150 })];
      await sleep(200);
      await track('stream', { seed: 3, max_tokens: 10, stream: true });
      await Promise.all(batch);
      assert.equal(finished[0], 'stream', finished.join(', '));
    });

    it('stops synthesis when a streaming client leaves', { timeout: 120_000 }, async () => {
      const before = await cancelledJobs(server.base);
      const controller = new AbortController();
      const response = await post(
        server.base,
        {
          model: modelDir,
          input: 'A sentence that keeps the model busy for a while, on and on. '.repeat(20),
          stream: true,
          response_format: 'wav',
          streaming_interval: 0.1,
        },
        controller.signal,
      );
      const reader = (response.body as ReadableStream<Uint8Array>).getReader();
      await reader.read(); // audio started
      controller.abort();
      await waitForCancelledJob(server.base, before, Infinity); // the test's own timeout bounds it
      assert.equal((await post(server.base, { model: modelDir, input: 'Still here.', response_format: 'pcm' })).status, 200);
    });
  });

  describe('--job-timeout-s', () => {
    let server: TestServer;
    before(async () => {
      server = await startTestServer({ after: (cleanup) => cleanups.push(cleanup) }, { jobTimeoutS: 0.05 });
    });

    it('stops a sentence that runs past the limit with 504 job_timeout, which the SDK is told not to retry', async () => {
      // one sentence of a few hundred frames: far more than 50 ms of work
      const input = `${'a long sentence that goes on and on '.repeat(8)}without an end`;
      const response = await post(server.base, { model: modelDir, input, response_format: 'wav' });
      assert.equal(response.headers.get('x-should-retry'), 'false');
      await expectEnvelope(response, 504, 'job_timeout');
      assert.equal((await fetch(`${server.base}/healthz`)).status, 200);
    });
  });

  describe('--voices-dir', () => {
    let server: TestServer;
    /** kennedy.wav (the JFK clip) and jfk.wav (a tone: clashes with the model's own voices/jfk.wav). */
    let sharedDir: string;
    /** The tiny pair alone, without a voices/ folder. */
    let bareDir: string;
    const tone = new Float32Array(RATE * 2).map((_, i) => 0.3 * Math.sin((2 * Math.PI * 220 * i) / RATE) * Math.sin((Math.PI * i) / (RATE * 2)));
    const toneUrl = `data:audio/wav;base64,${wavBytes(tone, RATE).toString('base64')}`;
    const jfkUrl = (): string => `data:audio/wav;base64,${fs.readFileSync(JFK_WAV).toString('base64')}`;
    const voicesOf = async (model: string): Promise<{ id: string; name: string }[]> => {
      const response = await fetch(`${server.base}/v1/audio/voices?model=${encodeURIComponent(model)}`);
      assert.equal(response.status, 200, await response.clone().text());
      return ((await response.json()) as { data: { id: string; name: string }[] }).data;
    };
    before(async () => {
      sharedDir = path.join(scratch, 'shared-voices');
      await fsp.mkdir(sharedDir);
      await fsp.copyFile(JFK_WAV, path.join(sharedDir, 'kennedy.wav'));
      await fsp.writeFile(path.join(sharedDir, 'jfk.wav'), wavBytes(tone, RATE));
      await fsp.writeFile(path.join(sharedDir, 'notes.txt'), 'not audio: skipped');
      bareDir = path.join(scratch, 'bare');
      await fsp.mkdir(bareDir);
      for (const file of [tiny.model, tiny.mmproj]) await fsp.copyFile(file, path.join(bareDir, path.basename(file)));
      server = await startTestServer({ after: (cleanup) => cleanups.push(cleanup) }, { voicesDir: sharedDir });
    });

    it('lists the shared clips as voices of every model, after its own voices/', async () => {
      assert.deepEqual(
        (await voicesOf(modelDir)).map((v) => v.id),
        ['default', 'jfk', 'kennedy'],
      );
      assert.deepEqual(
        (await voicesOf(bareDir)).map((v) => v.id),
        ['default', 'jfk', 'kennedy'],
      );
      const own = (await voicesOf(modelDir)).find((v) => v.id === 'jfk');
      assert.match(own!.name, /voices\//, "the model folder's jfk is listed");
    });

    it('clones a shared voice exactly as ref_audio of the same clip does', async () => {
      const input = 'A voice from the shared folder.';
      const preset = await pcmOf(server.base, { model: modelDir, input, seed: 9, voice: 'kennedy' });
      const cloned = await pcmOf(server.base, { model: modelDir, input, seed: 9, ref_audio: jfkUrl() });
      assert.ok(preset.equals(cloned), '--voices-dir/kennedy.wav is the JFK clip');
      const plain = await pcmOf(server.base, { model: modelDir, input, seed: 9 });
      assert.ok(!plain.equals(preset), 'the shared voice changes the audio');
      // a model without voices/ of its own speaks the shared clips too
      const bare = await pcmOf(server.base, { model: bareDir, input, seed: 9, voice: 'jfk' });
      assert.ok(bare.equals(await pcmOf(server.base, { model: bareDir, input, seed: 9, ref_audio: toneUrl })), 'bare model: jfk is the shared tone');
    });

    it("prefers the model's own voices/ clip on a name clash", async () => {
      const input = 'Whose voice is this?';
      const preset = await pcmOf(server.base, { model: modelDir, input, seed: 11, voice: 'jfk' });
      const own = await pcmOf(server.base, { model: modelDir, input, seed: 11, ref_audio: jfkUrl() });
      const shared = await pcmOf(server.base, { model: modelDir, input, seed: 11, ref_audio: toneUrl });
      assert.ok(!own.equals(shared), 'the two clips clone differently');
      assert.ok(preset.equals(own), 'voices/jfk.wav wins over --voices-dir/jfk.wav');
    });

    it('refuses a missing directory in the configuration with one line naming it', async () => {
      const missing = path.join(scratch, 'no-such-voices');
      for (const [flags, env, source] of [
        [{ voicesDir: missing }, {}, '--voices-dir'],
        [{}, { VOXD_VOICES_DIR: missing }, 'VOXD_VOICES_DIR'],
      ] as const) {
        assert.throws(
          () => resolveConfig(flags, env),
          (error: unknown) => {
            assert.ok(error instanceof ConfigError);
            assert.equal(error.message, `invalid value for ${source}: directory ${missing} does not exist`);
            return true;
          },
        );
      }
      const file = path.join(sharedDir, 'kennedy.wav');
      assert.throws(() => resolveConfig({ voicesDir: file }, {}), { message: `invalid value for --voices-dir: ${file} is not a directory` });
      assert.equal(resolveConfig({}, {}).voicesDir, null);
      assert.equal(resolveConfig({}, { VOXD_VOICES_DIR: sharedDir }).voicesDir, sharedDir);
    });
  });

  describe('through the hub', () => {
    it('loads owner/pocket from a hub repository with the backbone and its mmproj', async (t) => {
      const double = await HubDouble.start();
      t.after(() => double.close());
      double.addRepo('owner/pocket', {
        files: { [path.basename(tiny.model)]: tiny.model, [path.basename(tiny.mmproj)]: tiny.mmproj, 'README.md': Buffer.from('# pocket') },
      });
      const server = await startTestServer(t, {}, { HF_ENDPOINT: double.endpoint });
      const response = await post(server.base, { model: 'owner/pocket', input: 'Hello from the hub.', response_format: 'wav', seed: 1 });
      assert.equal(response.status, 200, await response.clone().text());
      assert.ok((await durationOf(Buffer.from(await response.arrayBuffer()), 'wav')) > 0.1);
    });
  });
});
