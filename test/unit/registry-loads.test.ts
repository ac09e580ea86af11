/**
 * The model registry's loads with engine doubles (no model runs): what a client that leaves may start, what a
 * load that fails costs, and which files a hub repository ID picks. The registry with real engines is tested in
 * engines/registry.test.ts.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, it, type TestContext } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { pino } from 'pino';
import type { Engine, LoadedModel, ResolvedModel } from '../../src/engines/types.js';
import { ApiError } from '../../src/errors.js';
import { HubClient } from '../../src/services/hub.js';
import { Metrics } from '../../src/services/metrics.js';
import type { ModelRegistry } from '../../src/services/registry.js';
import { newRegistry } from '../helpers/registry.js';
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
  const registry = newRegistry({
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

/** An engine that takes any file and keeps what the registry resolved for each ID. */
function recordingEngine(): { engine: Engine; resolved: Map<string, ResolvedModel> } {
  const resolved = new Map<string, ResolvedModel>();
  const engine: Engine = {
    name: 'recording',
    task: 'stt',
    detect: () => Promise.resolve(true),
    load(model): Promise<LoadedModel> {
      resolved.set(model.id, model);
      return Promise.resolve({ id: model.id, task: 'stt', engine: 'recording', dispose: () => Promise.resolve() });
    },
  };
  return { engine, resolved };
}

/** A stand-in model file of `bytes` bytes that starts with its own name, so that a download tells which file it was. */
function namedFile(name: string, bytes: number): Buffer {
  const content = Buffer.alloc(bytes, ' ');
  content.write(name);
  return content;
}

describe('hub repository IDs', () => {
  const PARAKEET_REPO = 'ggml-org/parakeet-GGUF';
  const parakeet = (quant: string): string => `ggml-parakeet-tdt-0.6b-v3-${quant}.bin`;

  async function hubRegistry(t: TestContext, repos: Record<string, Record<string, number>>) {
    const double = await HubDouble.start();
    t.after(() => double.close());
    for (const [repo, sizes] of Object.entries(repos)) {
      double.addRepo(repo, { files: Object.fromEntries(Object.entries(sizes).map(([name, bytes]) => [name, namedFile(name, bytes)])) });
    }
    const recording = recordingEngine();
    const { registry } = await registryWith(t, [recording.engine], double.endpoint);
    const nameIn = async (file: string | null): Promise<string | null> => (file ? (await fsp.readFile(file, 'utf8')).trim() : null);
    /** The file (and projector) an ID resolves to, by name. */
    const picks = async (id: string): Promise<{ model: string | null; projector: string | null }> => {
      (await registry.acquire(id)).release();
      const resolved = recording.resolved.get(id) ?? assert.fail(`${id} was not loaded`);
      return { model: await nameIn(resolved.path), projector: await nameIn(resolved.projector) };
    };
    return { registry, picks };
  }

  const rejection = (code: string, pattern: RegExp) => (error: unknown) => error instanceof ApiError && error.code === code && pattern.test(error.message);

  it("picks a ggml repository's file by the quantisation in its name, Q8_0 by default", async (t) => {
    const { registry, picks } = await hubRegistry(t, {
      [PARAKEET_REPO]: {
        [parakeet('f32')]: 2400,
        [parakeet('f16')]: 1200,
        [parakeet('q8_0')]: 640,
        [parakeet('q4_k')]: 380,
        [parakeet('q4_0')]: 340,
        'README.md': 40,
      },
    });
    assert.deepEqual(await picks(`${PARAKEET_REPO}:q8_0`), { model: parakeet('q8_0'), projector: null });
    assert.deepEqual(await picks(PARAKEET_REPO), { model: parakeet('q8_0'), projector: null });
    assert.deepEqual(await picks(`${PARAKEET_REPO}:f16`), { model: parakeet('f16'), projector: null });
    assert.deepEqual(await picks(`${PARAKEET_REPO}:Q4_K`), { model: parakeet('q4_k'), projector: null }, 'in any case');
    assert.deepEqual(await picks(`${PARAKEET_REPO}/${parakeet('f16')}`), { model: parakeet('f16'), projector: null });

    // the hub lists a repository's files by name
    const listing = ['f16', 'f32', 'q4_0', 'q4_k', 'q8_0'].map(parakeet).join(', ');
    await assert.rejects(
      registry.acquire(`${PARAKEET_REPO}:q5_1`),
      (error) => error instanceof ApiError && error.code === 'model_not_found' && error.message.endsWith(`has no q5_1 file (it has ${listing})`),
    );
    // q4 is in two names: two files may be two models in a ggml repository, and the client must say which
    await assert.rejects(
      registry.acquire(`${PARAKEET_REPO}:q4`),
      rejection('invalid_model', new RegExp(`several q4 model files; name one: ${PARAKEET_REPO}/${parakeet('q4_0')}, ${PARAKEET_REPO}/${parakeet('q4_k')}$`)),
    );
  });

  it('refuses a tag or a default that several models of a ggml repository carry, and matches tags as whole words', async (t) => {
    const { registry, picks } = await hubRegistry(t, {
      'ggerganov/whisper.cpp': { 'ggml-tiny.bin': 700, 'ggml-tiny-q8_0.bin': 300, 'ggml-base-q8_0.bin': 500, 'ggml-base.en.bin': 900 },
      'someone/parakeet-v2': { 'ggml-parakeet-tdt-0.6b-v2-bf16.bin': 1000, 'ggml-parakeet-tdt-0.6b-v2-f16.bin': 1000 },
    });
    await assert.rejects(
      registry.acquire('ggerganov/whisper.cpp'),
      rejection(
        'invalid_model',
        /several Q8_0 model files; name one: ggerganov\/whisper\.cpp\/ggml-base-q8_0\.bin, ggerganov\/whisper\.cpp\/ggml-tiny-q8_0\.bin$/,
      ),
    );
    assert.deepEqual(await picks('ggerganov/whisper.cpp:base.en'), { model: 'ggml-base.en.bin', projector: null });
    // f16 is not bf16
    assert.deepEqual(await picks('someone/parakeet-v2:f16'), { model: 'ggml-parakeet-tdt-0.6b-v2-f16.bin', projector: null });
    await assert.rejects(registry.acquire('someone/parakeet-v2'), rejection('invalid_model', /several model files; name one: .*bf16\.bin, .*-f16\.bin$/));
  });

  it('takes the smallest GGUF that carries the tag, and the mmproj of that tag', async (t) => {
    const { registry, picks } = await hubRegistry(t, {
      'owner/model-GGUF': {
        'model-BF16.gguf': 1000,
        'model-F16.gguf': 1000,
        'model-Q8_0.gguf': 600,
        'model-Q4_K_M.gguf': 400,
        'model-Q4_0.gguf': 380,
        'mmproj-model-f16.gguf': 200,
        'mmproj-model-Q8_0.gguf': 120,
      },
    });
    assert.deepEqual(await picks('owner/model-GGUF'), { model: 'model-Q8_0.gguf', projector: 'mmproj-model-Q8_0.gguf' });
    assert.deepEqual(await picks('owner/model-GGUF:F16'), { model: 'model-F16.gguf', projector: 'mmproj-model-f16.gguf' });
    assert.deepEqual(await picks('owner/model-GGUF:Q4_K'), { model: 'model-Q4_K_M.gguf', projector: 'mmproj-model-Q8_0.gguf' });
    assert.deepEqual(await picks('owner/model-GGUF:q4'), { model: 'model-Q4_0.gguf', projector: 'mmproj-model-Q8_0.gguf' });
    await assert.rejects(registry.acquire('owner/model-GGUF:Q2_K'), rejection('model_not_found', /has no Q2_K file \(it has model-BF16\.gguf, /));
  });
});
