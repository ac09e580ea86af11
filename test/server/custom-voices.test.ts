/**
 * Custom voices and their consents over HTTP (docs/api.md, "Custom voices"), through the official SDK where it has the
 * call (audio.voices, audio.voiceConsents) and raw HTTP otherwise: the vendor's shapes, bad input as 4xx
 * with nothing left on disk, speaking with a voice as with the same ref_audio (sample for sample, on a random-weight
 * Pocket TTS), a restart, and two instances sharing one directory.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { makeTiny, pcmOf, post as speak } from '../helpers/ggml-tts.js';
import { JFK_WAV, SHARED } from '../helpers/paths.js';
import { toFile } from 'openai';
import type { VoiceCreateParams } from 'openai/resources/audio/voices';
import { expectEnvelope, sdk, startTestServer, type TestServer } from '../helpers/server.js';
import { readWavMono, wavBytes } from '../helpers/wav.js';

const JFK = fs.readFileSync(JFK_WAV);
const READER = fs.readFileSync(path.join(SHARED, 'audio', 'speech', 'librivox-0870.wav'));

function upload(fields: Record<string, string>, file: { field: string; bytes: Buffer } | null): FormData {
  const body = new FormData();
  for (const [key, value] of Object.entries(fields)) body.append(key, value);
  if (file) body.append(file.field, new Blob([new Uint8Array(file.bytes)]), 'clip.wav');
  return body;
}

describe('custom voices over HTTP', () => {
  let scratch: string;
  let voicesDir: string;
  let model: string;
  let server: TestServer;
  const cleanups: (() => Promise<void>)[] = [];
  after(async () => {
    await Promise.all(cleanups.map((cleanup) => cleanup()));
    await fsp.rm(scratch, { recursive: true, force: true });
  });
  const start = (flags: Record<string, unknown> = {}): Promise<TestServer> =>
    startTestServer({ after: (cleanup) => cleanups.push(cleanup) }, { customVoicesDir: voicesDir, ...flags });
  const call = (base: string, method: string, route: string, body?: FormData | object): Promise<Response> =>
    fetch(`${base}${route}`, {
      method,
      ...(body instanceof FormData ? { body } : body ? { body: JSON.stringify(body), headers: { 'content-type': 'application/json' } } : {}),
    });
  const consent = async (base: string, name: string): Promise<{ id: string }> => {
    const response = await call(base, 'POST', '/v1/audio/voice_consents', upload({ name, language: 'en-US' }, { field: 'recording', bytes: JFK }));
    assert.equal(response.status, 200, await response.clone().text());
    return (await response.json()) as { id: string };
  };
  const createVoice = (base: string, fields: Record<string, string>, bytes: Buffer | null = JFK): Promise<Response> =>
    call(base, 'POST', '/v1/audio/voices', upload(fields, bytes ? { field: 'audio_sample', bytes } : null));

  before(async () => {
    scratch = await fsp.mkdtemp(path.join(os.tmpdir(), 'voxd-voices-'));
    voicesDir = path.join(scratch, 'voices');
    model = (await makeTiny('pockettts')).dir;
    server = await start();
  });

  it('records consents, lists them a page at a time, renames and deletes them (the SDK)', async () => {
    const client = sdk(server.base);
    const recording = (): Promise<File> => toFile(JFK, 'consent.wav');
    const made = await client.audio.voiceConsents.create({ name: 'Kennedy', language: 'en-US', recording: await recording() });
    assert.match(made.id, /^cons_[0-9a-f]{24}$/);
    const got = await client.audio.voiceConsents.retrieve(made.id);
    assert.deepEqual(Object.keys(got).sort(), ['created_at', 'id', 'language', 'name', 'object']);
    assert.deepEqual([got.object, got.name, got.language], ['audio.voice_consent', 'Kennedy', 'en-US']);
    const second = await client.audio.voiceConsents.create({ name: 'Reader', language: 'en-GB', recording: await recording() });
    const page = await client.audio.voiceConsents.list({ limit: 1 });
    assert.deepEqual([page.data.map((c) => c.id), page.hasNextPage()], [[made.id], true]);
    const next = await page.getNextPage();
    assert.deepEqual([next.data.map((c) => c.id), next.hasNextPage()], [[second.id], false]);
    // the SDK's auto-pagination walks every page
    const all: string[] = [];
    for await (const c of client.audio.voiceConsents.list({ limit: 1 })) all.push(c.id);
    assert.deepEqual(all, [made.id, second.id]);
    assert.equal((await client.audio.voiceConsents.update(second.id, { name: 'The reader' })).name, 'The reader');
    assert.deepEqual(await client.audio.voiceConsents.delete(second.id), { id: second.id, object: 'audio.voice_consent', deleted: true });
    await expectEnvelope(await call(server.base, 'GET', `/v1/audio/voice_consents/${second.id}`), 404, 'not_found');
    await expectEnvelope(await call(server.base, 'GET', '/v1/audio/voice_consents/nope'), 400, 'invalid_request', 'consent_id');
  });

  it('makes a voice (the SDK) that speaks as the same ref_audio does, sample for sample, and deletes it', async () => {
    const client = sdk(server.base);
    const { id: consentId } = await consent(server.base, 'Kennedy');
    // ref_text is voxd's extension: the SDK sends the body's other fields as they are
    const params = { name: 'Kennedy', consent: consentId, audio_sample: await toFile(JFK, 'jfk.wav'), ref_text: 'And so, my fellow Americans' };
    const voice = await client.audio.voices.create(params as VoiceCreateParams);
    assert.match(voice.id, /^voice_[0-9a-f]{24}$/);
    assert.deepEqual([voice.object, voice.name, voice.type], ['audio.voice', 'Kennedy', 'audio_sample']);
    assert.equal((voice as typeof voice & { ref_text: string }).ref_text, 'And so, my fellow Americans');

    const input = 'Speaking with a voice made once.';
    const byRef = await pcmOf(server.base, { model, input, seed: 5, ref_audio: `data:audio/wav;base64,${JFK.toString('base64')}` });
    for (const chosen of [{ id: voice.id }, voice.id, 'Kennedy']) {
      assert.ok((await pcmOf(server.base, { model, input, seed: 5, voice: chosen })).equals(byRef), JSON.stringify(chosen));
    }
    const listed = (await (await call(server.base, 'GET', `/v1/audio/voices?model=${encodeURIComponent(model)}`)).json()) as {
      data: { id: string; custom?: boolean }[];
    };
    assert.ok(
      listed.data.some((v) => v.id === voice.id && v.custom === true),
      'a cloning model lists it',
    );
    const flite = (await (await call(server.base, 'GET', '/v1/audio/voices?model=flite')).json()) as { data: { id: string }[] };
    assert.ok(!flite.data.some((v) => v.id === voice.id), 'a model that cannot clone does not');
    await expectEnvelope(await speak(server.base, { model: 'flite', input, voice: voice.id }), 400, 'invalid_request', 'voice');

    assert.deepEqual(await client.audio.voices.delete(voice.id), { id: voice.id, object: 'audio.voice.deleted', deleted: true });
    await expectEnvelope(await call(server.base, 'GET', `/v1/audio/voices/${voice.id}`), 404, 'not_found');
    await expectEnvelope(await call(server.base, 'DELETE', `/v1/audio/voices/${voice.id}`), 404, 'not_found');
    await expectEnvelope(await speak(server.base, { model, input, voice: voice.id }), 400, 'invalid_request', 'voice');
  });

  it('refuses bad voices with 4xx and leaves nothing half written', async () => {
    const { id: consentId } = await consent(server.base, 'Reader');
    const before = (await fsp.readdir(path.join(voicesDir, 'voices')).catch(() => [])).length;
    const second = (n: number): Buffer => wavBytes(readWavMono(JFK_WAV).samples.subarray(0, n * 16000), 16000);
    await expectEnvelope(await createVoice(server.base, { name: 'Reader' }), 400, 'invalid_request', 'consent');
    await expectEnvelope(await createVoice(server.base, { name: 'Reader', consent: 'cons_000000000000000000000000' }), 400, 'invalid_request', 'consent');
    await expectEnvelope(await createVoice(server.base, { name: 'Reader', consent: 'consent-1' }), 400, 'invalid_request', 'consent');
    await expectEnvelope(
      await createVoice(server.base, { name: 'Reader', consent: consentId }, Buffer.from('not audio at all '.repeat(40))),
      400,
      'invalid_audio',
      'audio_sample',
    );
    await expectEnvelope(await createVoice(server.base, { name: 'Reader', consent: consentId }, second(1)), 400, 'invalid_audio', 'audio_sample');
    const long = wavBytes(
      new Float32Array(31 * 16000).map((_, i) => 0.1 * Math.sin(i / 10)),
      16000,
    );
    await expectEnvelope(await createVoice(server.base, { name: 'Reader', consent: consentId }, long), 400, 'invalid_audio', 'audio_sample');
    await expectEnvelope(await createVoice(server.base, { name: 'Reader', consent: consentId }, null), 400, 'invalid_request', 'audio_sample');
    await expectEnvelope(await createVoice(server.base, { name: 'Reader', consent: consentId, type: 'prompt' }), 400, 'invalid_request', 'type');
    await expectEnvelope(await createVoice(server.base, { name: ' ', consent: consentId }), 400, 'invalid_request', 'name');
    // a model named to encode the voice at once must exist and clone
    await expectEnvelope(await createVoice(server.base, { name: 'Reader', consent: consentId, model: 'flite' }), 400, 'invalid_request', 'model');
    await expectEnvelope(await createVoice(server.base, { name: 'Reader', consent: consentId, model: 'no-such-model' }), 404, 'model_not_found');
    assert.equal((await createVoice(server.base, { name: 'Reader', consent: consentId }, READER)).status, 200);
    await expectEnvelope(await createVoice(server.base, { name: 'Reader', consent: consentId }, READER), 400, 'invalid_request', 'name');
    await expectEnvelope(await call(server.base, 'GET', '/v1/audio/voices/voice_x'), 400, 'invalid_request', 'voice_id');
    const files = await fsp.readdir(path.join(voicesDir, 'voices'));
    assert.equal(files.length, before + 2, `one voice, its record and its audio: ${files.join(', ')}`);
    assert.ok(files.every((f) => !f.endsWith('.tmp')));
  });

  it('keeps voices across a restart, shares them between instances, and holds --max-voices across them', async () => {
    const { id: consentId } = await consent(server.base, 'Shared');
    // two voices exist now ('Reader' from the test before, and the one this instance makes): its limit is reached
    const other = await start({ maxVoices: 2 });
    const made = (await (await createVoice(other.base, { name: 'Shared', consent: consentId })).json()) as { id: string };
    const seen = (await (await call(server.base, 'GET', '/v1/audio/voices')).json()) as { data: { id: string; name: string }[] };
    assert.ok(
      seen.data.some((v) => v.id === made.id),
      'the first instance lists what the second made',
    );
    const input = 'Two instances, one voice.';
    assert.ok(
      (await pcmOf(server.base, { model, input, seed: 3, voice: 'Shared' })).equals(await pcmOf(other.base, { model, input, seed: 3, voice: 'Shared' })),
    );
    await expectEnvelope(await createVoice(other.base, { name: 'One too many', consent: consentId }), 400, 'invalid_request');
    // a server started afresh finds it on disk (nothing of a voice is kept only in memory)
    const fresh = await start();
    assert.equal(((await (await call(fresh.base, 'GET', `/v1/audio/voices/${made.id}`)).json()) as { name: string }).name, 'Shared');
  });

  it('takes voices without consent when the server does not require it, and encodes one at once for a model', async () => {
    const lax = await start({ requireVoiceConsent: 'off' });
    const response = await createVoice(lax.base, { name: 'No consent' }, READER);
    assert.equal(response.status, 200, await response.clone().text());
    assert.equal(((await response.json()) as { consent: string | null }).consent, null);
    // encoded at once by the model named (voxd's extension): it speaks as the same ref_audio does
    const eager = await createVoice(lax.base, { name: 'Eager', model }, READER);
    assert.equal(eager.status, 200, await eager.clone().text());
    const input = 'Encoded when it was made.';
    const byRef = await pcmOf(lax.base, { model, input, seed: 2, ref_audio: `data:audio/wav;base64,${READER.toString('base64')}` });
    assert.ok((await pcmOf(lax.base, { model, input, seed: 2, voice: 'Eager' })).equals(byRef));
  });
});
