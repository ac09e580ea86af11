import assert from 'node:assert/strict';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, it, type TestContext } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { pino } from 'pino';
import { DEFAULT_VAD_MODEL } from '../../src/config.js';
import { SHIPPED_VAD_MODEL, shippedVadModel, sileroVadEngine } from '../../src/engines/silero-vad.js';
import type { VadModel } from '../../src/engines/types.js';
import { ApiError } from '../../src/errors.js';
import { HubClient } from '../../src/services/hub.js';
import { Metrics } from '../../src/services/metrics.js';
import type { RegistryOptions } from '../../src/services/registry.js';
import { newRegistry } from '../helpers/registry.js';
import { HubDouble } from '../helpers/hub-double.js';
import { JFK_WAV, SILERO_V5, SILERO_V6 } from '../helpers/paths.js';
import { readWavMono } from '../helpers/wav.js';

const VAD_REPO = 'ggml-org/whisper-vad';
const jfk = readWavMono(JFK_WAV).samples;

async function tempDir(t: TestContext, prefix: string): Promise<string> {
  const dir = await fsp.mkdtemp(path.join(os.tmpdir(), prefix));
  t.after(() => fsp.rm(dir, { recursive: true, force: true }));
  return dir;
}

async function setup(t: TestContext, options: Partial<RegistryOptions> & { endpoint?: string; offline?: boolean } = {}) {
  const double = await HubDouble.start();
  t.after(() => double.close());
  double.addRepo(VAD_REPO, { files: { 'ggml-silero-v6.2.0.bin': SILERO_V6, 'ggml-silero-v5.1.2.bin': SILERO_V5 } });
  const cacheDir = await tempDir(t, 'voxd-registry-hub-');
  const hub = new HubClient({ endpoint: options.endpoint ?? double.endpoint, cacheDir, offline: options.offline ?? false });
  const registry = newRegistry({
    engines: [sileroVadEngine],
    hub,
    logger: pino({ level: 'silent' }),
    metrics: new Metrics(),
    modelsDirs: [],
    defaults: { stt: null, tts: null, vad: DEFAULT_VAD_MODEL },
    maxLoaded: 0,
    idleTtlMs: 0,
    fallbacks: { [DEFAULT_VAD_MODEL]: shippedVadModel },
    ...options,
  });
  t.after(() => registry.close());
  return { double, registry, hub };
}

function apiError(code: string, pattern?: RegExp) {
  return (error: unknown): boolean => {
    assert.ok(error instanceof ApiError, `expected ApiError, got ${String(error)}`);
    assert.equal(error.code, code, error.message);
    if (pattern) assert.match(error.message, pattern);
    return true;
  };
}

describe('model registry', () => {
  it('downloads and loads a hub model once under concurrent requests', async (t) => {
    const { double, registry } = await setup(t);
    const leases = await Promise.all(Array.from({ length: 5 }, () => registry.acquire<VadModel>(DEFAULT_VAD_MODEL, 'vad')));
    assert.equal(double.contentTransfers(VAD_REPO, 'ggml-silero-v6.2.0.bin').length, 1);
    assert.ok(leases.every((lease) => lease.model === leases[0]?.model));
    assert.equal((await leases[0]!.model.segments(jfk)).length, 4);
    leases.forEach((lease) => lease.release());
    assert.deepEqual(
      registry.list(false).map((m) => [m.id, m.task, m.engine, m.loaded]),
      [[DEFAULT_VAD_MODEL, 'vad', 'silero-vad', true]],
    );
  });

  it('never frees a model under a running request; DELETE hides it at once', async (t) => {
    const { registry } = await setup(t);
    const lease = await registry.acquire<VadModel>(SILERO_V6, 'vad');
    await registry.unload(SILERO_V6);
    assert.deepEqual(registry.list(false), []);
    assert.equal((await lease.model.segments(jfk)).length, 4, 'still usable by the request that holds it');
    lease.release();
    assert.throws(() => lease.model.segments(jfk), /unloaded/);
    await assert.rejects(registry.unload(SILERO_V6), apiError('model_not_found'));
  });

  it('frees the least recently used idle model beyond --max-loaded-models', async (t) => {
    const { registry } = await setup(t, { maxLoaded: 1 });
    await registry.load(SILERO_V6);
    const held = await registry.acquire(SILERO_V6);
    await registry.load(SILERO_V5);
    assert.equal(registry.list(false).length, 2, 'a model in use is not evicted');
    held.release(); // the model just used is the most recent one: the other goes
    assert.deepEqual(
      registry.list(false).map((m) => m.id),
      [SILERO_V6],
    );
  });

  it('frees models idle for longer than the TTL, but not pinned ones', async (t) => {
    const { registry } = await setup(t, { idleTtlMs: 300 });
    await registry.load(SILERO_V6);
    await registry.load(SILERO_V5, { pinned: true });
    await sleep(1500);
    assert.deepEqual(
      registry.list(false).map((m) => m.id),
      [SILERO_V5],
    );
  });

  it('maps hub and file problems to coded API errors', async (t) => {
    const { double, registry } = await setup(t);
    await assert.rejects(registry.acquire('nobody/nothing/model.bin'), apiError('model_not_found', /not found on the hub/));
    await assert.rejects(registry.acquire(`${VAD_REPO}/missing.bin`), apiError('model_not_found'));
    await assert.rejects(registry.acquire('not a model id'), apiError('model_not_found', /neither a local path nor a hub ID/));
    await assert.rejects(registry.acquire(JFK_WAV), apiError('invalid_model', /not in a format voxd can load/));
    await assert.rejects(registry.acquire(VAD_REPO), apiError('invalid_model', /several model files; name one/));
    await assert.rejects(registry.acquire('whisper-1'), apiError('model_not_found', /--stt-model/));
    await assert.rejects(registry.acquire(SILERO_V6, 'stt'), apiError('invalid_model', /vad model/));

    double.setFaults(VAD_REPO, 'ggml-silero-v5.1.2.bin', { truncateAfterBytes: 1000 });
    await assert.rejects(registry.acquire(`${VAD_REPO}/ggml-silero-v5.1.2.bin`), apiError('model_download_failed'));
    assert.ok(!registry.list(false).some((m) => m.id.endsWith('v5.1.2.bin')), 'a failed load leaves nothing behind');
    const retried = await registry.acquire(`${VAD_REPO}/ggml-silero-v5.1.2.bin`);
    retried.release();
  });

  it('restricts local paths to --models-dir roots', async (t) => {
    const root = await tempDir(t, 'voxd-models-dir-');
    fs.copyFileSync(SILERO_V6, path.join(root, 'vad.bin'));
    const { registry } = await setup(t, { modelsDirs: [root] });
    const lease = await registry.acquire('vad.bin');
    assert.equal(lease.model.id, path.join(root, 'vad.bin'));
    lease.release();
    // outside the roots reads exactly as missing: the answer does not tell which server paths exist
    const outside = await registry.acquire(SILERO_V6).catch((error: unknown) => error as ApiError);
    const missing = await registry.acquire(path.join(path.dirname(SILERO_V6), 'no-such-model.bin')).catch((error: unknown) => error as ApiError);
    assert.ok(outside instanceof ApiError && missing instanceof ApiError);
    assert.equal(outside.code, 'model_not_found');
    assert.equal(outside.message.replace(SILERO_V6, 'X'), missing.message.replace(path.join(path.dirname(SILERO_V6), 'no-such-model.bin'), 'X'));
  });

  it('serves built-in models under their reserved IDs, listed as available before they load', async (t) => {
    const { registry, double } = await setup(t, {
      builtins: { 'builtin-vad': { task: 'vad', engine: 'silero-vad', load: (id) => sileroVadEngine.load({ id, path: SILERO_V6, projector: null }) } },
    });
    assert.ok(registry.list(true).some((m) => m.id === 'builtin-vad' && m.task === 'vad' && !m.loaded));
    const lease = await registry.acquire<VadModel>('builtin-vad', 'vad');
    assert.equal((await lease.model.segments(jfk)).length, 4);
    lease.release();
    assert.deepEqual(
      registry.list(false).map((m) => [m.id, m.loaded]),
      [['builtin-vad', true]],
    );
    assert.equal(double.requests.length, 0, 'no download');
  });

  it('lists aliases and cached models as available', async (t) => {
    const { registry } = await setup(t, { defaults: { stt: SILERO_V6, tts: null, vad: DEFAULT_VAD_MODEL } });
    await registry.load(`${VAD_REPO}/ggml-silero-v5.1.2.bin`);
    await registry.unload(`${VAD_REPO}/ggml-silero-v5.1.2.bin`);
    const available = registry.list(true);
    assert.ok(available.some((m) => m.id === 'whisper-1' && m.target === SILERO_V6 && !m.loaded));
    assert.ok(available.some((m) => m.id === `${VAD_REPO}/ggml-silero-v5.1.2.bin` && !m.loaded));
    assert.ok(
      available.some((m) => m.id === DEFAULT_VAD_MODEL && m.task === 'vad' && !m.loaded),
      'the --vad-model is listed',
    );
    assert.equal(registry.describe('whisper-1').target, SILERO_V6);
    assert.throws(() => registry.describe('tts-1'), apiError('model_not_found'));
  });

  it('uses the shipped default VAD (built from ONNX at build time) when the hub cannot be reached, matching the hub file within 10 ms', async (t) => {
    const { registry } = await setup(t, { endpoint: 'http://127.0.0.1:9' });
    const lease = await registry.acquire<VadModel>(DEFAULT_VAD_MODEL, 'vad');
    t.after(() => lease.release());
    assert.ok(fs.existsSync(SHIPPED_VAD_MODEL));

    const reference = await sileroVadEngine.load({ id: 'reference', path: SILERO_V6, projector: null });
    const [ours, theirs] = await Promise.all([lease.model.segments(jfk), reference.segments(jfk)]);
    assert.equal(ours.length, theirs.length);
    ours.forEach((segment, i) => {
      assert.ok(Math.abs(segment.start - theirs[i]!.start) <= 0.01);
      assert.ok(Math.abs(segment.end - theirs[i]!.end) <= 0.01);
    });
    await reference.dispose();
  });

  it('uses the same fallback in offline mode, and no fallback for other models', async (t) => {
    const { registry, double } = await setup(t, { offline: true });
    const lease = await registry.acquire(DEFAULT_VAD_MODEL);
    lease.release();
    await assert.rejects(registry.acquire(`${VAD_REPO}/ggml-silero-v5.1.2.bin`), apiError('model_not_found', /offline/i));
    assert.equal(double.requests.length, 0, 'offline mode sends nothing to the hub');
  });
});
