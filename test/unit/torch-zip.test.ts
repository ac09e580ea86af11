/**
 * readTorchZipPickle (src/engines/torch-zip.ts): the pickle of a PyTorch zip checkpoint, whether torch wrote it
 * (native/test/data/torch, torch 1.13) or our own writer did (scripts/torch/writer.mjs, which the Kokoro test models
 * use), and null for everything else, however damaged.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { pathToFileURL } from 'node:url';
import { readTorchZipPickle } from '../../src/engines/torch-zip.js';
import { ROOT } from '../helpers/paths.js';

const FIXTURES = path.join(ROOT, 'native', 'test', 'data', 'torch');

interface TorchWriter {
  TorchTensor: new (shape: number[], data: () => Float32Array) => object;
  writeTorchFile(file: string, root: string, value: unknown): void;
}

describe('readTorchZipPickle', () => {
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'voxd-torch-zip-'));
  after(() => fs.rmSync(scratch, { recursive: true, force: true }));

  it('reads data.pkl of checkpoints torch wrote, pickle protocols 2 and 4, whatever the root is called', async () => {
    for (const [name, protocol] of [
      ['state-dict.pt', 2],
      ['voice.pt', 2],
      ['protocol4.pt', 4],
    ] as const) {
      const pickle = await readTorchZipPickle(path.join(FIXTURES, name));
      assert.ok(pickle, name);
      assert.deepEqual([pickle[0], pickle[1], pickle[pickle.length - 1]], [0x80, protocol, 0x2e], `${name}: PROTO ${protocol} ... STOP`);
    }
  });

  it('reads data.pkl of a checkpoint our writer wrote', async () => {
    const writer = (await import(pathToFileURL(path.join(ROOT, 'scripts', 'torch', 'writer.mjs')).href)) as TorchWriter;
    const file = path.join(scratch, 'ours.pth');
    writer.writeTorchFile(file, 'ours', new Map([['w', new writer.TorchTensor([2, 2], () => Float32Array.of(1, 2, 3, 4))]]));
    const pickle = await readTorchZipPickle(file);
    assert.ok(pickle);
    assert.ok(pickle.includes('torch._utils\n_rebuild_tensor_v2\n'));
    assert.equal(pickle[pickle.length - 1], 0x2e);
  });

  it('gives null for what is not a zip checkpoint: legacy format, compressed entries, other files, none at all', async () => {
    for (const file of [
      path.join(FIXTURES, 'legacy.pt'),
      path.join(FIXTURES, 'compressed.pt'),
      path.join(FIXTURES, 'make-fixtures.py'),
      path.join(ROOT, 'package.json'),
      FIXTURES,
      path.join(scratch, 'missing.pt'),
    ]) {
      assert.equal(await readTorchZipPickle(file), null, file);
    }
  });

  it('gives null for every truncation of a checkpoint', async () => {
    const whole = fs.readFileSync(path.join(FIXTURES, 'protocol4.pt'));
    const cut = path.join(scratch, 'cut.pt');
    for (let length = 0; length < whole.length; length++) {
      fs.writeFileSync(cut, whole.subarray(0, length));
      assert.equal(await readTorchZipPickle(cut), null, `${length} bytes`);
    }
  });
});
