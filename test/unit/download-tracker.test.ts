/** A download's progress (src/services/hub/tracker.ts): bytes from the blobs on disk, and time left from what arrived. */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { it } from 'node:test';
import { DownloadTracker } from '../../src/services/hub/tracker.js';

it('counts whole blobs and partial transfers, and rates only what arrived while it watched', async (t) => {
  const dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'voxd-tracker-'));
  t.after(() => fsp.rm(dir, { recursive: true, force: true }));
  const [model, projector] = [path.join(dir, 'model'), path.join(dir, 'mmproj')];
  const tracker = new DownloadTracker();
  tracker.expect(10_000);
  assert.deepEqual(tracker.state(0), { bytes: 0, total: 10_000, eta: null }, 'the listing gave the total');

  // a resumed transfer: 4000 bytes were on disk before; they are progress, not a rate
  fs.writeFileSync(`${model}.incomplete`, Buffer.alloc(4000));
  tracker.add(model, 8000);
  assert.deepEqual(tracker.state(1000), { bytes: 4000, total: 10_000, eta: null });
  fs.appendFileSync(`${model}.incomplete`, Buffer.alloc(2000));
  // 2000 bytes arrived in the 2 s watched: the 4000 left take 4 s
  assert.deepEqual(tracker.state(2000), { bytes: 6000, total: 10_000, eta: 4 });

  // a cached projector joins: whole at once, still no part of the rate
  fs.writeFileSync(projector, Buffer.alloc(2000));
  tracker.add(projector, 2000);
  fs.renameSync(`${model}.incomplete`, model);
  fs.appendFileSync(model, Buffer.alloc(2000));
  const done = tracker.state(3000);
  assert.equal(done.bytes, 10_000);
  assert.equal(done.eta, 0);
});
