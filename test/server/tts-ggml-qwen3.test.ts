/**
 * The GGML TTS engine with a random-weight Qwen3-TTS model (scripts/make-tts-test-model.mjs --arch qwen3tts, tiny):
 * the native surface, then POST /v1/audio/speech on a real server and through a local hub double. A file of its own:
 * each test file must finish within the runner's per-file limit.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { NativeTtsGgmlRequest } from '../../src/native/addon.js';
import { loadNative } from '../../src/native/load.js';
import { decodeAudio } from '../../src/services/audio/decode.js';
import { durationOf, FRAME, makeTiny, pcmOf, post, RATE, type TtsModelPaths } from '../helpers/ggml-tts.js';
import { HubDouble } from '../helpers/hub-double.js';
import { nativeRejection } from '../helpers/native.js';
import { JFK_WAV } from '../helpers/paths.js';
import { expectEnvelope, startTestServer, type TestServer } from '../helpers/server.js';

describe('GGML TTS engine (random-weight Qwen3-TTS)', () => {
  let qwen: TtsModelPaths;
  let server: TestServer;
  const cleanups: (() => Promise<void>)[] = [];
  after(() => Promise.all(cleanups.map((cleanup) => cleanup())));
  before(async () => {
    qwen = await makeTiny('qwen3tts');
    server = await startTestServer({ after: (cleanup) => cleanups.push(cleanup) });
  });
  /** Qwen3-TTS's decoder window: audio comes 72 frames at a time. */
  const WINDOW = 72;

  it('loads, streams a decoder window at a time, batches with the same audio as alone, and checks its language', async () => {
    const model = await loadNative().TtsGgmlModel.load({ model: qwen.model, mmproj: qwen.mmproj, threads: 2, sequences: 4 });
    try {
      assert.deepEqual(model.info(), { arch: 'qwen3tts', sampleRate: RATE, variant: '', sequences: 4 });
      const jfk = (await decodeAudio(await fsp.readFile(JFK_WAV), { sampleRate: RATE })).samples;
      const spanish: NativeTtsGgmlRequest = { text: 'Hola mundo.', seed: 2, language: 'spanish', reference: jfk };
      const greedy: NativeTtsGgmlRequest = { text: 'Greedy.', seed: 3, temperature: 0 };
      // the random talker samples its end token early for some seeds, and for which ones depends on the CPU's
      // kernels (their sums round differently): the first request takes the first seed that spans two windows
      const talker = 'Hello world, this is a test of the random talker.';
      let seed = 1;
      while (seed < 8 && (await model.synthesize({ text: talker, seed })).length <= WINDOW * FRAME) seed++;
      const requests: NativeTtsGgmlRequest[] = [{ text: talker, seed }, spanish, greedy, { text: 'Bounded.', seed: 4, maxFrames: 20 }];
      const alone: Float32Array[] = [];
      for (const request of requests) {
        const streamed: Float32Array[] = [];
        alone.push(await model.synthesize(request, (chunk) => streamed.push(chunk)));
        const frames = (alone.at(-1)?.length ?? 0) / FRAME;
        assert.equal(streamed.length, Math.ceil(frames / WINDOW), `${frames} frames in windows of ${WINDOW}`);
      }
      assert.ok((alone[0]?.length ?? 0) > WINDOW * FRAME, 'the first request spans two windows');
      assert.equal(alone[3]?.length, 20 * FRAME);
      assert.notDeepEqual(await model.synthesize({ ...spanish, reference: null }), alone[1], 'the voice changes the audio');
      assert.notDeepEqual(await model.synthesize({ ...spanish, language: 'english' }), alone[1], 'the language changes the audio');
      assert.deepEqual(await model.synthesize({ ...greedy, seed: 99 }), alone[2], 'greedy: the seed makes no difference');

      const batch = model.createBatch();
      const slots = requests.map((request) => batch.add(request));
      const results = new Map<number, Float32Array>();
      while (batch.active > 0) {
        for (const result of await batch.step()) if ('samples' in result) results.set(result.slot, result.samples);
      }
      batch.close();
      slots.forEach((slot, i) => assert.deepEqual(results.get(slot), alone[i], `request ${i}: batch = alone`));

      assert.equal((await nativeRejection(model.synthesize({ text: 'Hello.', language: 'klingon' }))).code, 'invalid_argument');
      // 1200 samples (50 ms) would abort in the speaker encoder's padded convolutions
      assert.throws(() => model.synthesize({ text: 'Hello.', reference: new Float32Array(1200).fill(0.1) }), { code: 'invalid_argument' });
    } finally {
      model.release();
    }
  });

  it('speaks over HTTP in every format, streams, clones, batches, takes its languages and comes from the hub', async (t) => {
    const dir = path.join(os.tmpdir(), `voxd-qwen3-${process.pid}`);
    await fsp.mkdir(dir, { recursive: true });
    t.after(() => fsp.rm(dir, { recursive: true, force: true }));
    for (const file of [qwen.model, qwen.mmproj]) await fsp.copyFile(file, path.join(dir, path.basename(file)));
    for (const format of ['mp3', 'wav', 'flac', 'ogg', 'opus', 'aac', 'pcm'] as const) {
      const response = await post(server.base, { model: dir, input: 'Hello world.', response_format: format, seed: 1 });
      assert.equal(response.status, 200, await response.clone().text());
      assert.ok((await durationOf(Buffer.from(await response.arrayBuffer()), format)) > 0.1, format);
    }
    const input = 'Seventy two frames make one window of audio, and this is more than that.';
    const streamed = await pcmOf(server.base, { model: dir, input, seed: 5, stream: true });
    const bodies = [5, 6, 7].map((seed) => ({ model: dir, input, seed }));
    const together = await Promise.all(bodies.map((body) => pcmOf(server.base, body)));
    assert.ok(together[0]?.equals(streamed), 'batched = streamed alone');
    assert.ok(!together[1]?.equals(together[0] as Buffer), 'another seed, other audio');
    const dataUrl = `data:audio/wav;base64,${fs.readFileSync(JFK_WAV).toString('base64')}`;
    assert.ok(
      !(await pcmOf(server.base, { model: dir, input: 'Clone me.', seed: 1, ref_audio: dataUrl })).equals(
        await pcmOf(server.base, { model: dir, input: 'Clone me.', seed: 1 }),
      ),
    );
    assert.equal((await pcmOf(server.base, { model: dir, input: 'Bonjour.', seed: 1, lang_code: 'f' })).length > 0, true);
    await expectEnvelope(await post(server.base, { model: dir, input: 'Namaste.', lang_code: 'h' }), 400, 'invalid_request', 'lang_code');
    assert.equal((await post(server.base, { model: dir, input: 'Hello.', instructions: 'cheerfully' })).headers.get('x-voxd-ignored'), 'instructions');

    const double = await HubDouble.start();
    t.after(() => double.close());
    double.addRepo('owner/qwen3-tts', { files: { [path.basename(qwen.model)]: qwen.model, [path.basename(qwen.mmproj)]: qwen.mmproj } });
    const hubServer = await startTestServer(t, {}, { HF_ENDPOINT: double.endpoint });
    const response = await post(hubServer.base, { model: 'owner/qwen3-tts', input: 'Hello from the hub.', response_format: 'wav', seed: 1 });
    assert.equal(response.status, 200, await response.clone().text());
  });
});
