import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { ApiError } from '../../src/errors.js';
import { loadReferenceAudio } from '../../src/services/tts/reference.js';
import { JFK_WAV } from '../helpers/paths.js';

const options = { sampleRate: 24000, roots: [] as string[], maxSeconds: 60, maxBytes: 10 * 1024 * 1024 };

function refused(code: string, pattern: RegExp): (error: unknown) => boolean {
  return (error) => error instanceof ApiError && error.code === code && error.param === 'ref_audio' && pattern.test(error.message);
}

describe('ref_audio: a server-side path or a data URL', () => {
  it('decodes a path and a base64 data URL of the same clip to the same samples at the model rate', async () => {
    const fromPath = await loadReferenceAudio(JFK_WAV, options);
    assert.ok(Math.abs(fromPath.length / 24000 - 11) < 0.01);
    const url = `data:audio/wav;base64,${fs.readFileSync(JFK_WAV).toString('base64')}`;
    assert.deepEqual(await loadReferenceAudio(url, options), fromPath);
  });

  it('refuses a missing path, a path outside the --models-dir roots, empty and non-audio data', async () => {
    await assert.rejects(loadReferenceAudio('/no/such/clip.wav', options), refused('invalid_request', /is not a file the server can read$/));
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'voxd-ref-'));
    try {
      fs.copyFileSync(JFK_WAV, path.join(root, 'inside.wav'));
      assert.ok((await loadReferenceAudio('inside.wav', { ...options, roots: [root] })).length > 0, 'relative to a root');
      await assert.rejects(
        loadReferenceAudio(JFK_WAV, { ...options, roots: [root] }),
        refused('invalid_request', /is not a file the server can read under --models-dir$/),
      );
      await assert.rejects(
        loadReferenceAudio(path.join(root, '..', path.basename(root), '..', 'x.wav'), { ...options, roots: [root] }),
        refused('invalid_request', /./),
      );
    } finally {
      fs.rmSync(root, { recursive: true, force: true });
    }
    await assert.rejects(loadReferenceAudio('data:audio/wav;base64,', options), refused('invalid_audio', /empty/));
    const text = `data:audio/wav;base64,${Buffer.from('not audio at all '.repeat(10)).toString('base64')}`;
    await assert.rejects(loadReferenceAudio(text, options), refused('invalid_audio', /^ref_audio: /));
  });

  it('refuses a path that is not a regular file or is too large, before reading it, and stops reading when the client leaves', async (t) => {
    const timed = async (work: Promise<unknown>): Promise<number> => {
      const started = performance.now();
      await work.catch(() => undefined);
      return performance.now() - started;
    };
    // /dev/zero would read without end, a FIFO with no writer would block a worker thread forever
    await assert.rejects(loadReferenceAudio('/dev/zero', options), refused('invalid_request', /is not a regular file/));
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'voxd-ref-special-'));
    t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
    const fifo = path.join(dir, 'fifo');
    execFileSync('mkfifo', [fifo]);
    assert.ok((await timed(assert.rejects(loadReferenceAudio(fifo, options), refused('invalid_request', /is not a regular file/)))) < 1000);
    const huge = path.join(dir, 'huge.wav');
    fs.closeSync(fs.openSync(huge, 'w'));
    fs.truncateSync(huge, 64 * 1024 * 1024 * 1024); // sparse: 64 GiB that take no disk
    assert.ok((await timed(assert.rejects(loadReferenceAudio(huge, options), refused('invalid_request', /the limit is 10485760/)))) < 1000);
    const big = path.join(dir, 'big.wav');
    fs.closeSync(fs.openSync(big, 'w'));
    fs.truncateSync(big, 8 * 1024 * 1024);
    const controller = new AbortController();
    controller.abort();
    await assert.rejects(loadReferenceAudio(big, { ...options, signal: controller.signal }), { name: 'AbortError' });
  });
});
