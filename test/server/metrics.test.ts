/**
 * GET /metrics as an autoscaler reads it (docs/api.md, "Health and metrics"): per model its loaded state, file size,
 * queue and real-time factor; the saturation gauge while a model is busy and when idle; the process's memory.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { JFK_WAV } from '../helpers/paths.js';
import { startTestServer } from '../helpers/server.js';
import { FLITE_INSTALLED, SPHINX_INSTALLED } from '../helpers/transcripts.js';
import { wavBytes } from '../helpers/wav.js';

/** The value of the series `name{labels}` (labels as rendered), or null when absent. */
function sample(metrics: string, series: string): number | null {
  const line = metrics.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? null : Number(line.slice(series.length + 1));
}

describe('GET /metrics for autoscaling', { skip: SPHINX_INSTALLED && FLITE_INSTALLED ? false : 'pocketsphinx or flite is not installed' }, () => {
  it('reports each loaded model, real-time factors, saturation and resident memory', async (t) => {
    const server = await startTestServer(t);
    const metrics = async (): Promise<string> => (await fetch(`${server.base}/metrics`)).text();
    assert.equal(sample(await metrics(), 'voxd_saturation'), 0, 'idle');

    const upload = new FormData();
    upload.set('model', 'sphinx');
    upload.set('file', new Blob([fs.readFileSync(JFK_WAV)]), 'jfk.wav');
    assert.equal((await fetch(`${server.base}/v1/audio/transcriptions`, { method: 'POST', body: upload })).status, 200);
    const speech = await fetch(`${server.base}/v1/audio/speech`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'flite', input: 'Scale on what the queue says.', response_format: 'wav' }),
    });
    assert.equal(speech.status, 200);
    await speech.arrayBuffer();

    const after = await metrics();
    assert.match(after, /^voxd_model_loaded\{engine="[^"]+",model="sphinx",task="stt"\} 1$/m);
    assert.match(after, /^voxd_model_loaded\{engine="[^"]+",model="flite",task="tts"\} 1$/m);
    assert.equal(sample(after, 'voxd_real_time_factor_count{model="sphinx",task="stt"}'), 1);
    assert.equal(sample(after, 'voxd_real_time_factor_count{model="flite",task="tts"}'), 1);
    assert.ok((sample(after, 'voxd_real_time_factor_sum{model="sphinx",task="stt"}') ?? 0) > 0);
    assert.ok((sample(after, 'process_resident_memory_bytes') ?? 0) > 50 * 1024 * 1024);
    assert.match(after, /^voxd_queue_wait_seconds_count\{model="sphinx"\} \d+$/m);

    // a long separation keeps one of the separator's slots busy: saturation is the share of its slots in use
    const noise = Float32Array.from({ length: 44100 * 600 }, (_, i) => Math.sin(i * 0.01) * 0.1 + ((i * 7919) % 101) / 2000);
    const separation = new FormData();
    separation.set('description', 'voice');
    separation.set('file', new Blob([new Uint8Array(wavBytes(noise, 44100))]), 'long.wav');
    const running = fetch(`${server.base}/v1/audio/separations`, { method: 'POST', body: separation }).then((r) => r.arrayBuffer());
    let busiest = 0;
    for (let tries = 0; tries < 400 && busiest === 0; tries++) {
      busiest = Math.max(busiest, sample(await metrics(), 'voxd_saturation') ?? 0);
      await sleep(25);
    }
    assert.ok(busiest > 0 && busiest <= 1, `saturation while one separation runs: ${busiest}`);
    await running;
    assert.equal(sample(await metrics(), 'voxd_saturation'), 0, 'idle again');
  });
});
