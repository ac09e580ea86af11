/**
 * POST /v1/audio/separations over HTTP with the built-in separator: a stereo 44.1 kHz mixture of a LibriVox clip
 * over the drum loop, uploaded in every format the decoder reads; the base64 WAVs come back at the input's rate,
 * channels and length, add up to the input, and the voice target is closer to the true voice than the mixture.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { PcmAudio } from '../../src/engines/types.js';
import { decodeAudioChannels } from '../../src/services/audio/decode.js';
import { StreamResampler } from '../../src/services/audio/resample.js';
import { encodeFloatWav } from '../../src/services/audio/wav.js';
import { convert, ensureFfmpeg, FORMATS } from '../helpers/formats.js';
import { SHARED } from '../helpers/paths.js';
import { cancelledJobs, expectEnvelope, waitForCancelledJob, startTestServer, type TestServer } from '../helpers/server.js';
import { readWavMono, wavBytes } from '../helpers/wav.js';

const RATE = 44100;

interface Separation {
  target: string;
  residual: string;
  sample_rate: number;
}

function form(fields: Record<string, string>, file: Buffer | null, filename = 'mixture.wav'): FormData {
  const body = new FormData();
  if (file) body.append('file', new Blob([new Uint8Array(file)]), filename);
  for (const [key, value] of Object.entries(fields)) body.append(key, value);
  return body;
}

/** 10·log10(‖reference‖² / ‖reference − estimate‖²) over all channels. */
function sdr(reference: Float32Array[], estimate: Float32Array[]): number {
  let signal = 0;
  let error = 0;
  reference.forEach((channel, c) =>
    channel.forEach((x, i) => {
      signal += x * x;
      error += (x - ((estimate[c] as Float32Array)[i] as number)) ** 2;
    }),
  );
  return 10 * Math.log10(signal / error);
}

/** The LibriVox clip (both channels) over the drum loop repeated to its length, stereo at 44.1 kHz; and the voice stem. */
async function mixture(): Promise<{ mix: PcmAudio; voice: Float32Array[] }> {
  const speech16k = readWavMono(path.join(SHARED, 'audio', 'speech', 'librivox-0870.wav')).samples;
  const resampler = new StreamResampler(16000, RATE);
  const speech = Float32Array.from([...resampler.process(speech16k), ...resampler.flush()]);
  const loop = await decodeAudioChannels(fs.readFileSync(path.join(SHARED, 'audio', 'music', 'loop_amen.flac')), {});
  assert.equal(loop.sampleRate, RATE);
  const voice = [speech.map((x) => 0.5 * x), speech.map((x) => 0.5 * x)];
  const channels = voice.map((v, c) =>
    v.map((x, i) => x + 0.3 * ((loop.channels[c] as Float32Array)[i % (loop.channels[c] as Float32Array).length] as number)),
  );
  return { mix: { channels, sampleRate: RATE }, voice };
}

async function decodeWav(base64: string): Promise<PcmAudio> {
  return decodeAudioChannels(Buffer.from(base64, 'base64'), {});
}

describe('POST /v1/audio/separations', () => {
  let server: TestServer;
  let mix: PcmAudio;
  let voice: Float32Array[];
  let mixtureFile = '';
  const cleanups: (() => Promise<void>)[] = [];
  after(() => Promise.all(cleanups.map((cleanup) => cleanup())));
  before(async () => {
    server = await startTestServer({ after: (cleanup) => cleanups.push(cleanup) }, { maxSeparationSeconds: 30 });
    ({ mix, voice } = await mixture());
    mixtureFile = path.join(os.tmpdir(), `voxd-separation-mixture-${process.pid}.wav`);
    fs.writeFileSync(mixtureFile, encodeFloatWav(mix.channels, RATE));
    cleanups.push(async () => fs.rmSync(mixtureFile, { force: true }));
  });

  async function separate(file: Buffer, description: string, filename?: string): Promise<Separation> {
    const response = await fetch(`${server.base}/v1/audio/separations`, { method: 'POST', body: form({ description }, file, filename) });
    assert.equal(response.status, 200, await response.clone().text());
    assert.match(response.headers.get('content-type') ?? '', /application\/json/);
    const body = (await response.json()) as Separation;
    assert.deepEqual(Object.keys(body).sort(), ['residual', 'sample_rate', 'target']);
    return body;
  }

  it('extracts the voice: closer to the true voice than the mixture, and target + residual = input', async () => {
    const result = await separate(fs.readFileSync(mixtureFile), 'the Vocals');
    assert.equal(result.sample_rate, RATE);
    const [target, residual] = [await decodeWav(result.target), await decodeWav(result.residual)];
    assert.equal(target.channels.length, 2);
    assert.equal(target.channels[0]?.length, mix.channels[0]?.length);
    const mixed = sdr(voice, mix.channels);
    const separated = sdr(voice, target.channels);
    console.log(`voice over drums: SDR of the mixture ${mixed.toFixed(2)} dB, of the target ${separated.toFixed(2)} dB`);
    assert.ok(separated >= mixed + 3, `${separated} vs ${mixed}`);
    const sum = target.channels.map((channel, c) => channel.map((x, i) => x + ((residual.channels[c] as Float32Array)[i] as number)));
    const reconstruction = sdr(mix.channels, sum);
    console.log(`reconstruction: ${reconstruction.toFixed(1)} dB SNR`);
    assert.ok(reconstruction >= 60);
  });

  const skipFormats = ensureFfmpeg();
  it('takes every input format the decoder reads, answering at its rate, channels and length', { skip: skipFormats ?? false }, async () => {
    for (const format of FORMATS) {
      const file = fs.readFileSync(convert(mixtureFile, format, true));
      const input = await decodeAudioChannels(file, {});
      const result = await separate(file, 'drums', `mixture.${format.ext}`);
      const [target, residual] = [await decodeWav(result.target), await decodeWav(result.residual)];
      assert.equal(result.sample_rate, format.rate ?? RATE, format.name);
      for (const stem of [target, residual]) {
        assert.equal(stem.sampleRate, result.sample_rate, format.name);
        assert.equal(stem.channels.length, input.channels.length, format.name);
        assert.equal(stem.channels[0]?.length, input.channels[0]?.length, format.name);
      }
      const sum = target.channels.map((channel, c) => channel.map((x, i) => x + ((residual.channels[c] as Float32Array)[i] as number)));
      assert.ok(sdr(input.channels, sum) >= 60, format.name);
    }
  });

  it('separates mono input at its own rate', async () => {
    const speech = readWavMono(path.join(SHARED, 'audio', 'speech', 'jfk.wav')).samples;
    const result = await separate(wavBytes(speech, 16000), 'speech');
    const target = await decodeWav(result.target);
    assert.deepEqual([result.sample_rate, target.channels.length, target.channels[0]?.length], [16000, 1, speech.length]);
  });

  it('names the sounds a loaded separator extracts in its model entry', async () => {
    const model = (await (await fetch(`${server.base}/v1/models/spectral`)).json()) as { loaded: boolean; targets?: string[] };
    assert.equal(model.loaded, true, 'loaded by the separation before');
    assert.deepEqual(model.targets, ['voice', 'percussive', 'bass', 'harmonic', 'accompaniment']);
  });

  it('answers bad input with 4xx envelopes before any work, and keeps serving', async () => {
    const post = (fields: Record<string, string>, file: Buffer | null, filename?: string): Promise<Response> =>
      fetch(`${server.base}/v1/audio/separations`, { method: 'POST', body: form(fields, file, filename) });
    const wav = fs.readFileSync(mixtureFile);
    const unknown = await post({ description: 'a cat meowing' }, wav);
    assert.equal(unknown.status, 400);
    const envelope = (await unknown.json()) as { error: { code: string; param: string; message: string } };
    assert.equal(envelope.error.param, 'description');
    for (const name of ['voice', 'percussive', 'harmonic', 'accompaniment', 'bass']) assert.match(envelope.error.message, new RegExp(name));
    await expectEnvelope(await post({}, wav), 400, 'invalid_request', 'description');
    await expectEnvelope(await post({ description: 'voice' }, null), 400, 'invalid_request', 'file');
    await expectEnvelope(await post({ description: 'voice', model: 'no-such-separator' }, wav), 404, 'model_not_found');
    await expectEnvelope(await post({ description: 'voice', model: 'sphinx' }, wav), 400, 'invalid_model');
    await expectEnvelope(await post({ description: 'voice' }, Buffer.alloc(0)), 400, 'invalid_audio', 'file');
    await expectEnvelope(await post({ description: 'voice' }, Buffer.from('not audio at all, just text\n'), 'notes.wav'), 400, 'invalid_audio', 'file');
    const long = wavBytes(new Float32Array(16000 * 31), 16000);
    await expectEnvelope(await post({ description: 'voice' }, long), 400, 'invalid_audio', 'file');
    assert.equal((await fetch(`${server.base}/healthz`)).status, 200);
  });

  it('stops the separation of a client that leaves', async () => {
    const noise = new Float32Array(16000 * 30).map(() => Math.random() * 0.2 - 0.1);
    const cancelledBefore = await cancelledJobs(server.base);
    const controller = new AbortController();
    const started = performance.now();
    const pending = fetch(`${server.base}/v1/audio/separations`, {
      method: 'POST',
      body: form({ description: 'voice' }, wavBytes(noise, 16000)),
      signal: controller.signal,
    });
    setTimeout(() => controller.abort(), 150);
    await assert.rejects(pending);
    await waitForCancelledJob(server.base, cancelledBefore, started + 20_000);
    const next = await fetch(`${server.base}/v1/audio/separations`, { method: 'POST', body: form({ description: 'bass' }, fs.readFileSync(mixtureFile)) });
    assert.equal(next.status, 200);
  });
});
