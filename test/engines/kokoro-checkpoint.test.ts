/**
 * The random-weight Kokoro-82M models the engine's tests run on (scripts/make-kokoro-test-model.mjs) held to
 * upstream's own code: torch.load reads them as it reads the release, their keys and shapes are those of upstream's
 * modules (less the InstanceNorm affine weights the release lacks), KModel loads them and speaks a few frames per
 * token, and the same options write the same bytes. The checks that need Debian's python3-torch skip without it.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import {
  KOKORO_REFERENCE,
  kokoroGenerator,
  kokoroOracleUnavailable,
  kokoroTestModel,
  runKokoroOracle,
  runPython,
  type KokoroModelPaths,
} from '../helpers/kokoro.js';

// Upstream's modules built from a config.json, as KModel builds them, against torch.load of a checkpoint: the
// state-dict listing this check trusts is upstream's, never one of ours.
const COMPARE_WITH_UPSTREAM = `
import collections, json, os, sys
ref, checkpoint, config_file, voices = sys.argv[1:5]
sys.path[:0] = [os.path.join(ref, 'shims'), ref]
import numpy as np
import torch
import torch.nn.utils.parametrizations as parametrizations
if not hasattr(parametrizations, 'weight_norm'):
    parametrizations.weight_norm = torch.nn.utils.weight_norm  # torch < 2.1: old-style weight_g/weight_v, as released
from kokoro.istftnet import Decoder
from kokoro.modules import CustomAlbert, ProsodyPredictor, TextEncoder
from transformers import AlbertConfig
c = json.load(open(config_file, encoding='utf-8'))
modules = {
    'bert': CustomAlbert(AlbertConfig(vocab_size=c['n_token'], **c['plbert'])),
    'bert_encoder': torch.nn.Linear(c['plbert']['hidden_size'], c['hidden_dim']),
    'predictor': ProsodyPredictor(style_dim=c['style_dim'], d_hid=c['hidden_dim'], nlayers=c['n_layer'], max_dur=c['max_dur'], dropout=c['dropout']),
    'text_encoder': TextEncoder(channels=c['hidden_dim'], kernel_size=c['text_encoder_kernel_size'], depth=c['n_layer'], n_symbols=c['n_token']),
    'decoder': Decoder(dim_in=c['hidden_dim'], style_dim=c['style_dim'], dim_out=c['n_mels'], **c['istftnet']),
}
def affine(m):
    return {f'{n}.{k}' for n, x in m.named_modules() if isinstance(x, torch.nn.InstanceNorm1d) for k in ('weight', 'bias')}
loaded = torch.load(checkpoint, map_location='cpu', weights_only=True)
packs = {}
for f in sorted(os.listdir(voices)):
    pack = torch.load(os.path.join(voices, f), weights_only=True)
    bin = os.path.join(ref, 'voices', f[:-3] + '.bin')
    packs[f] = {'shape': list(pack.shape), 'stride': list(pack.stride()), 'dtype': str(pack.dtype),
                'same_as_kokoro_js': bool((pack.numpy().reshape(-1) == np.fromfile(bin, dtype='<f4')).all()) if os.path.exists(bin) else None}
json.dump({
    'expected': {n: [[k, list(v.shape)] for k, v in m.state_dict().items() if k not in affine(m)] for n, m in modules.items()},
    'affine': {n: len(affine(m)) for n, m in modules.items()},
    'written': {n: [[k, list(v.shape)] for k, v in sd.items()] for n, sd in loaded.items()},
    'containers': sorted({type(sd).__name__ for sd in loaded.values()}),
    'metadata': all(hasattr(sd, '_metadata') for sd in loaded.values()),
    'dtypes': sorted({str(v.dtype) for sd in loaded.values() for v in sd.values()}),
    'finite': all(bool(torch.isfinite(v).all()) for sd in loaded.values() for v in sd.values()),
    'packs': packs,
}, sys.stdout)
`;

interface Comparison {
  expected: Record<string, [string, number[]][]>;
  affine: Record<string, number>;
  written: Record<string, [string, number[]][]>;
  containers: string[];
  metadata: boolean;
  dtypes: string[];
  finite: boolean;
  packs: Record<string, { shape: number[]; stride: number[]; dtype: string; same_as_kokoro_js: boolean | null }>;
}

async function compareWithUpstream(model: KokoroModelPaths): Promise<Comparison> {
  return JSON.parse(await runPython(COMPARE_WITH_UPSTREAM, [KOKORO_REFERENCE, model.checkpoint, model.config, model.voices])) as Comparison;
}

function sha256(file: string): string {
  return createHash('sha256').update(fs.readFileSync(file)).digest('hex');
}

/** Every file under `dir`, relative, with its sha256. */
function hashes(dir: string): Record<string, string> {
  return Object.fromEntries(
    (fs.readdirSync(dir, { recursive: true }) as string[])
      .filter((f) => fs.statSync(path.join(dir, f)).isFile())
      .sort()
      .map((f) => [f, sha256(path.join(dir, f))]),
  );
}

const skip = kokoroOracleUnavailable();

describe('random-weight Kokoro-82M test models', () => {
  let tiny: KokoroModelPaths;
  let scratch: string;
  before(async () => {
    tiny = await kokoroTestModel({ size: 'tiny' });
    scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'voxd-kokoro-'));
  });
  after(() => fs.rmSync(scratch, { recursive: true, force: true }));

  for (const size of ['tiny', 'full'] as const) {
    it(`${size}: torch.load reads upstream's keys, order and shapes (less InstanceNorm affine), float32, and 54 voice packs`, { skip }, async () => {
      const model = await kokoroTestModel({ size });
      const c = await compareWithUpstream(model);
      assert.deepEqual(Object.keys(c.written), ['bert', 'bert_encoder', 'predictor', 'text_encoder', 'decoder']);
      for (const [name, keys] of Object.entries(c.expected)) {
        assert.deepEqual(
          c.written[name],
          keys.map(([key, shape]) => [`module.${key}`, shape]),
          name,
        );
      }
      assert.ok((c.affine.predictor ?? 0) > 0 && (c.affine.decoder ?? 0) > 0, 'upstream has InstanceNorm affine weights, the checkpoint does not');
      assert.deepEqual(c.containers, ['OrderedDict']);
      assert.ok(c.metadata, 'state dicts carry _metadata, as state_dict() gives them');
      assert.deepEqual(c.dtypes, ['torch.float32']);
      assert.ok(c.finite);
      assert.equal(Object.keys(c.packs).length, 54);
      for (const [file, pack] of Object.entries(c.packs)) {
        assert.deepEqual([pack.shape, pack.stride, pack.dtype], [[510, 1, 256], [256, 256, 1], 'torch.float32'], file);
      }
      for (const voice of ['af_heart.pt', 'am_michael.pt', 'bf_emma.pt']) assert.equal(c.packs[voice]?.same_as_kokoro_js, true, voice);
    });
  }

  it('full: config.json is the released one byte for byte; tiny only shrinks ALBERT in it', { skip }, async () => {
    const released = fs.readFileSync(path.join(KOKORO_REFERENCE, 'config.json'), 'utf8');
    assert.equal(fs.readFileSync((await kokoroTestModel({ size: 'full' })).config, 'utf8'), released);
    const config = JSON.parse(fs.readFileSync(tiny.config, 'utf8')) as Record<string, unknown>;
    const expected = JSON.parse(released) as Record<string, unknown>;
    assert.deepEqual(config, {
      ...expected,
      plbert: { ...(expected.plbert as object), hidden_size: 64, num_attention_heads: 2, intermediate_size: 128, num_hidden_layers: 2 },
    });
  });

  it('tiny: upstream KModel loads it and speaks finite audio, a few frames per token', { skip }, async () => {
    const out = path.join(scratch, 'oracle');
    const result = await runKokoroOracle({
      checkpoint: tiny.checkpoint,
      config: tiny.config,
      voice: path.join(tiny.voices, 'af_heart.pt'),
      phonemes: 'hˌW ɑɹ ju?',
      out,
      noNoise: true,
    });
    const frames = result.predDur.reduce((a, b) => a + b, 0);
    assert.equal(result.predDur.length, result.inputIds.length);
    assert.ok(
      result.predDur.every((d) => d >= 1 && d <= 8),
      `durations ${result.predDur.join(' ')}`,
    );
    assert.equal(result.audio.length, 600 * frames);
    const peak = result.audio.reduce((m, x) => Math.max(m, Math.abs(x)), 0);
    assert.ok(
      result.audio.every((x) => Number.isFinite(x)),
      'finite',
    );
    assert.ok(peak > 1e-4 && peak < 10, `peak ${peak}`);
  });

  it('writes the same bytes for the same options', async () => {
    const again = await (await kokoroGenerator()).writeKokoroTestModel(path.join(scratch, 'again'), { size: 'tiny' });
    const written = hashes(again.dir);
    assert.equal(Object.keys(written).length, 2 + 54);
    assert.deepEqual(written, hashes(tiny.dir));
  });
});
