/**
 * The model registry's loads with engine doubles (no model runs): what a client that leaves may start, and what a
 * load that fails costs. The registry with real engines is tested in engines/registry.test.ts.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, it, type TestContext } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { pino } from 'pino';
import type { Engine, LoadedModel } from '../../src/engines/types.js';
import { ApiError } from '../../src/errors.js';
import { HubClient } from '../../src/services/hub.js';
import { Metrics } from '../../src/services/metrics.js';
import { ModelRegistry } from '../../src/services/registry.js';
import { HubDouble } from '../helpers/hub-double.js';
import { SILERO_V6 } from '../helpers/paths.js';

const REPO = 'ggml-org/whisper-vad';
const FILE = 'ggml-silero-v6.2.0.bin';

async function tempDir(t: TestContext, prefix: string): Promise<string> {
  const dir = await fsp.mkdtemp(path.join(os.tmpdir(), prefix));
  t.after(() => fsp.rm(dir, { recursive: true, force: true }));
  return dir;
}

async function registryWith(t: TestContext, engines: Engine[], hubEndpoint = 'http://127.0.0.1:9'): Promise<{ registry: ModelRegistry; hub: HubClient }> {
  const hub = new HubClient({ endpoint: hubEndpoint, cacheDir: await tempDir(t, 'voxd-registry-cache-'), offline: false });
  const registry = new ModelRegistry({
    engines,
    hub,
    logger: pino({ level: 'silent' }),
    metrics: new Metrics(),
    modelsDirs: [],
    defaults: { stt: null, tts: null, vad: 'unused' },
    maxLoaded: 0,
    idleTtlMs: 0,
  });
  t.after(() => registry.close());
  return { registry, hub };
}

/** An engine that takes any file, as a multi-GB model's engine would: each load is counted, and lasts until `finish()`. */
function slowEngine(): { engine: Engine; loads: string[]; disposals: string[]; finish: () => void } {
  const loads: string[] = [];
  const disposals: string[] = [];
  let finish!: () => void;
  const finished = new Promise<void>((resolve) => (finish = resolve));
  const engine: Engine = {
    name: 'slow',
    task: 'vad',
    detect: () => Promise.resolve(true),
    async load({ id }): Promise<LoadedModel> {
      loads.push(id);
      await finished;
      const dispose = (): Promise<void> => {
        disposals.push(id);
        return Promise.resolve();
      };
      return { id, task: 'vad', engine: 'slow', dispose };
    },
  };
  return { engine, loads, disposals, finish };
}

describe('model registry loads', () => {
  it('loads a model once, however many of its requests leave while the engine loads it', async (t) => {
    const model = path.join(await tempDir(t, 'voxd-registry-model-'), 'model.bin');
    await fsp.writeFile(model, 'weights');
    const slow = slowEngine();
    const { registry } = await registryWith(t, [slow.engine]);

    for (let i = 0; i < 5; i++) {
      const leaving = new AbortController();
      const request = registry.acquire(model, 'vad', leaving.signal);
      await sleep(100); // time for a second load to reach the engine, were one started
      leaving.abort(new Error('the client left'));
      await assert.rejects(request, /the client left/);
    }
    assert.deepEqual(slow.loads, [model], 'one load, which no request waits for any more');

    slow.finish();
    using lease = await registry.acquire(model, 'vad');
    assert.equal(lease.model.engine, 'slow');
    assert.deepEqual(slow.loads, [model], 'the next request is served by that load');
    assert.deepEqual(slow.disposals, [], 'and the model it made is kept');
  });

  it('checks a cached file that no engine loads against its hash once while it is unchanged', async (t) => {
    const double = await HubDouble.start();
    t.after(() => double.close());
    double.addRepo(REPO, { files: { [FILE]: SILERO_V6 } });
    const { registry, hub } = await registryWith(t, [], double.endpoint); // a valid file that no engine takes
    const reads = t.mock.method(fs, 'createReadStream');
    const invalid = (error: unknown): boolean => error instanceof ApiError && error.code === 'invalid_model';

    await assert.rejects(registry.acquire(`${REPO}/${FILE}`), invalid);
    const blob = await fsp.realpath(hub.cachedFile(REPO, FILE) ?? assert.fail('the file is cached'));
    const hashings = (): number => reads.mock.calls.filter((call) => call.arguments[0] === blob).length;
    assert.equal(hashings(), 1, 'hashed after the first failed load');
    await assert.rejects(registry.acquire(`${REPO}/${FILE}`), invalid);
    assert.equal(hashings(), 1, 'not hashed again');

    // other bytes of the same size, as a failing disk leaves them: the changed file is hashed again, and deleted
    await fsp.writeFile(blob, Buffer.alloc((await fsp.stat(blob)).size, 0x20));
    await assert.rejects(registry.acquire(`${REPO}/${FILE}`), (error) => error instanceof ApiError && error.code === 'model_download_failed');
    assert.equal(hashings(), 2);
    assert.equal(hub.cachedFile(REPO, FILE), null);
  });
});
