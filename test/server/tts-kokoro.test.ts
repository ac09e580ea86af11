/**
 * Kokoro over HTTP, with the random-weight test model (scripts/make-kokoro-test-model.mjs, tiny ALBERT, the 54 real
 * voice packs): POST /v1/audio/speech in every format, streamed as one container and as SSE events, batched with the
 * same audio as alone, speed, voice mixes and the vendor's names, the voice list, the clear 400s, a crash of the
 * text frontend's child process, the official SDK, and the model fetched from a local hub double by its hub ID. The engine's numbers against upstream's are
 * test/engines/kokoro-oracle.test.ts's.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import OpenAI from 'openai';
import { kokoroEngine } from '../../src/engines/kokoro.js';
import { phonemizerProcess } from '../../src/engines/phonemizer-process.js';
import { durationOf, pcmOf, post } from '../helpers/ggml-tts.js';
import { HubDouble } from '../helpers/hub-double.js';
import { kokoroTestModel, type KokoroModelPaths } from '../helpers/kokoro.js';
import { JFK_WAV } from '../helpers/paths.js';
import { expectEnvelope, startTestServer, type TestServer } from '../helpers/server.js';

const SENTENCE = 'Hello there.';

describe('Kokoro over HTTP (random-weight model)', () => {
  let model: KokoroModelPaths;
  let server: TestServer;
  const cleanups: (() => Promise<void>)[] = [];
  after(() => Promise.all(cleanups.map((cleanup) => cleanup())));
  before(async () => {
    model = await kokoroTestModel();
    server = await startTestServer({ after: (cleanup) => cleanups.push(cleanup) });
  });
  const speak = (body: Record<string, unknown>): Promise<Response> => post(server.base, { model: model.dir, ...body });

  it('is recognised by its content: the checkpoint or its directory, not another file', async () => {
    assert.equal(await kokoroEngine.detect(model.dir), true);
    assert.equal(await kokoroEngine.detect(model.checkpoint), true);
    assert.equal(await kokoroEngine.detect(path.join(model.voices, 'af_heart.pt')), false, 'a voice pack is a torch file too, not a model');
    assert.equal(await kokoroEngine.detect(JFK_WAV), false);
  });

  it('speaks every format, streams one container and SSE events of the same audio', async () => {
    for (const format of ['mp3', 'wav', 'flac', 'ogg', 'opus', 'aac', 'pcm'] as const) {
      const response = await speak({ input: SENTENCE, response_format: format });
      assert.equal(response.status, 200, await response.clone().text());
      assert.ok((await durationOf(Buffer.from(await response.arrayBuffer()), format)) > 0.2, format);
    }
    const two = 'Hello there. How are you?';
    const whole = await pcmOf(server.base, { model: model.dir, input: two });
    const streamed = await pcmOf(server.base, { model: model.dir, input: two, stream: true });
    assert.ok(streamed.equals(whole), 'streamed piece by piece = whole');
    const response = await speak({ input: two, response_format: 'pcm', stream_format: 'sse' });
    assert.match(response.headers.get('content-type') ?? '', /^text\/event-stream/);
    const events = (await response.text())
      .split('\n\n')
      .filter(Boolean)
      .map((e) => JSON.parse(e.replace(/^data: /, '')) as { type: string; audio?: string });
    assert.equal(events.at(-1)?.type, 'speech.audio.done');
    const audio = Buffer.concat(events.slice(0, -1).map((e) => Buffer.from(e.audio as string, 'base64')));
    assert.ok(audio.equals(whole), 'SSE deltas = whole');
  });

  it('batches requests of other voices and speeds with the same audio as alone; speed, voices and mixes change it', async () => {
    const bodies = [
      { input: SENTENCE, voice: 'af_heart' },
      { input: 'A longer sentence, spoken by another voice.', voice: 'am_michael', speed: 1.5 },
      { input: SENTENCE, voice: 'af_bella(2)+af_sky(1)', lang_code: 'b' },
    ].map((b) => ({ model: model.dir, ...b }));
    const alone: Buffer[] = [];
    for (const body of bodies) alone.push(await pcmOf(server.base, body));
    const together = await Promise.all(bodies.map((body) => pcmOf(server.base, body)));
    together.forEach((pcm, i) => assert.ok(pcm.equals(alone[i] as Buffer), `request ${i}: batched = alone`));

    const normal = await pcmOf(server.base, { model: model.dir, input: SENTENCE });
    const fast = await pcmOf(server.base, { model: model.dir, input: SENTENCE, speed: 2 });
    assert.ok(fast.length < normal.length * 0.75, `speed 2: ${fast.length} bytes against ${normal.length}`);
    assert.ok(normal.equals(await pcmOf(server.base, { model: model.dir, input: SENTENCE, voice: 'af_heart' })), 'af_heart is the default');
    assert.ok(!normal.equals(await pcmOf(server.base, { model: model.dir, input: SENTENCE, voice: 'am_adam' })), 'another voice');
    assert.ok(
      (await pcmOf(server.base, { model: model.dir, input: SENTENCE, voice: 'alloy' })).equals(
        await pcmOf(server.base, { model: model.dir, input: SENTENCE, voice: 'am_adam' }),
      ),
      'alloy is am_adam, as Kokoro-FastAPI maps it',
    );
    assert.ok(
      (await pcmOf(server.base, { model: model.dir, input: SENTENCE, voice: 'af_bella+af_sky' })).equals(
        await pcmOf(server.base, { model: model.dir, input: SENTENCE, voice: 'af_sky(3) + af_bella(3)' }),
      ),
      'a mix is its weights over their sum',
    );
    assert.ok((await pcmOf(server.base, { model: model.dir, input: 'Hola, ¿qué tal?', voice: 'ef_dora', lang_code: 'e' })).length > 0);
  });

  it('lists its voices, and answers bad input with a clear 400', async () => {
    const list = (await (await fetch(`${server.base}/v1/audio/voices?model=${encodeURIComponent(model.dir)}`)).json()) as {
      data: { id: string; name: string; language?: string }[];
      capabilities: { languages?: { code: string; name: string }[] };
    };
    assert.equal(list.data.length, 54);
    assert.equal(list.data[0]?.id, 'af_heart', 'the default voice is listed first');
    assert.deepEqual(
      list.capabilities.languages?.map((l) => l.code),
      ['a', 'b', 'e', 'f', 'h', 'i', 'p'],
      'the languages it reads, not j and z',
    );
    assert.deepEqual(
      list.data.find((v) => v.id === 'bf_emma'),
      { id: 'bf_emma', name: 'bf_emma (British English, female)', language: 'b' },
    );
    await expectEnvelope(await speak({ input: SENTENCE, voice: 'nobody' }), 400, 'invalid_request', 'voice');
    await expectEnvelope(await speak({ input: SENTENCE, voice: 'af_bella+' }), 400, 'invalid_request', 'voice');
    await expectEnvelope(await speak({ input: SENTENCE, voice: 'af_bella(0)+af_sky' }), 400, 'invalid_request', 'voice');
    await expectEnvelope(await speak({ input: SENTENCE, lang_code: 'j' }), 400, 'invalid_request', 'lang_code');
    await expectEnvelope(await speak({ input: SENTENCE, lang_code: 'z' }), 400, 'invalid_request', 'lang_code');
    await expectEnvelope(
      await speak({ input: SENTENCE, ref_audio: `data:audio/wav;base64,${fs.readFileSync(JFK_WAV).toString('base64')}` }),
      400,
      'invalid_request',
      'ref_audio',
    );
    await expectEnvelope(await speak({ input: `${'a'.repeat(200)} long`, lang_code: 'a' }), 400, 'invalid_request', 'input');
    await expectEnvelope(await speak({ input: 'Привет, мир.', lang_code: 'a' }), 400, 'invalid_request', 'input');
    assert.equal((await speak({ input: SENTENCE, instructions: 'cheerfully' })).headers.get('x-voxd-ignored'), 'instructions');
  });

  it("survives its text frontend's crash: that request is a 400, the next one is spoken", async () => {
    assert.equal((await speak({ input: SENTENCE, response_format: 'pcm' })).status, 200);
    const pid = phonemizerProcess.pid;
    assert.ok(pid, 'espeak-ng runs in a child process');
    // stopped, the child holds the next request; killed, it ends as a crash of espeak-ng would end it
    process.kill(pid, 'SIGSTOP');
    const pending = speak({ input: SENTENCE, response_format: 'pcm' });
    await new Promise((resolve) => setTimeout(resolve, 200));
    process.kill(pid, 'SIGKILL');
    const failed = await pending;
    await expectEnvelope(failed, 400, 'invalid_request', 'input');
    assert.equal((await speak({ input: SENTENCE, response_format: 'pcm' })).status, 200, 'a new child speaks');
    assert.notEqual(phonemizerProcess.pid, pid);
  });

  it('speaks to the official SDK, and comes from the hub by its ID with its config and voices', async (t) => {
    const client = new OpenAI({ baseURL: `${server.base}/v1`, apiKey: 'none' });
    const answer = await client.audio.speech.create({ model: model.dir, voice: 'coral', input: SENTENCE, response_format: 'wav' });
    assert.ok((await durationOf(Buffer.from(await answer.arrayBuffer()), 'wav')) > 0.2);

    const double = await HubDouble.start();
    t.after(() => double.close());
    const files: Record<string, string> = { 'kokoro-v1_0.pth': model.checkpoint, 'config.json': model.config, 'README.md': model.config };
    for (const voice of ['af_heart', 'am_adam']) files[`voices/${voice}.pt`] = path.join(model.voices, `${voice}.pt`);
    double.addRepo('hexgrad/Kokoro-82M', { files });
    const hubServer = await startTestServer(t, {}, { HF_ENDPOINT: double.endpoint });
    const response = await post(hubServer.base, { model: 'hexgrad/Kokoro-82M', voice: 'alloy', input: SENTENCE, response_format: 'wav' });
    assert.equal(response.status, 200, await response.clone().text());
    const voices = (await (await fetch(`${hubServer.base}/v1/audio/voices?model=hexgrad/Kokoro-82M`)).json()) as { data: { id: string }[] };
    assert.deepEqual(
      voices.data.map((v) => v.id),
      ['af_heart', 'am_adam'],
    );
  });
});
