import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ApiError } from '../../src/errors.js';
import { PEAK_BYTES_PER_UPLOAD_BYTE, UploadBudget } from '../../src/services/audio/upload-budget.js';

const MiB = 1024 * 1024;

/** The ApiError `fn` throws. */
function refusal(fn: () => void): ApiError {
  try {
    fn();
  } catch (error) {
    assert.ok(error instanceof ApiError, String(error));
    return error;
  }
  assert.fail('expected a refusal');
}

describe('upload budget (--max-inflight-upload-mb)', () => {
  it('counts each upload at its peak, refuses what would pass the limit with 503 and Retry-After, and takes back what ends', () => {
    const budget = new UploadBudget({ limitBytes: 40 * MiB });
    assert.equal(PEAK_BYTES_PER_UPLOAD_BYTE, 8);
    using first = budget.open();
    first.admit(2 * MiB);
    assert.equal(budget.inFlightBytes, 16 * MiB);
    const second = budget.open();
    second.admit(2 * MiB);
    const third = budget.open();
    const error = refusal(() => third.admit(2 * MiB));
    assert.equal(error.status, 503);
    assert.equal(error.code, 'too_many_uploads');
    assert.equal(error.headers['Retry-After'], '5');
    assert.match(error.message, /32 MiB of the 40 MiB .*--max-inflight-upload-mb.*needs 16 MiB; retry later/);
    assert.equal(budget.inFlightBytes, 32 * MiB, 'a refused upload holds nothing');
    second[Symbol.dispose]();
    third.admit(2 * MiB);
    assert.equal(budget.inFlightBytes, 32 * MiB);
  });

  it('always admits one upload alone, however large, and grows a body without a declared length as it arrives', () => {
    const budget = new UploadBudget({ limitBytes: 8 * MiB });
    using alone = budget.open();
    alone.admit(0);
    alone.admit(3 * MiB);
    alone.admit(3 * MiB);
    assert.equal(budget.inFlightBytes, 48 * MiB);
    using next = budget.open();
    assert.equal(refusal(() => next.admit(1)).code, 'too_many_uploads');
  });

  it('counts an upload at its decoded audio once decoded, even beyond the limit, since that work is done', () => {
    const budget = new UploadBudget({ limitBytes: 20 * MiB });
    const first = budget.open();
    first.admit(MiB);
    const second = budget.open();
    second.admit(MiB);
    first.holding(2 * MiB);
    assert.equal(budget.inFlightBytes, 10 * MiB);
    second.holding(30 * MiB);
    assert.equal(budget.inFlightBytes, 32 * MiB);
    first[Symbol.dispose]();
    second[Symbol.dispose]();
    assert.equal(budget.inFlightBytes, 0);
  });

  it('hands the encoded bytes out once and forgets them', () => {
    using upload = new UploadBudget({ limitBytes: MiB }).open();
    const bytes = Buffer.from('RIFF');
    upload.hold(bytes);
    assert.equal(upload.take(), bytes);
    assert.throws(() => upload.take(), /already taken/);
  });

  it('trims the allocator 2 s after a burst of at least 64 MiB is over, not after small uploads or while others are in flight', (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] });
    let trims = 0;
    const budget = new UploadBudget({ limitBytes: 1024 * MiB, trim: () => trims++ });
    const small = budget.open();
    small.admit(MiB);
    small[Symbol.dispose]();
    t.mock.timers.tick(10_000);
    assert.equal(trims, 0, 'a small upload leaves little to give back');
    const big = budget.open();
    big.admit(20 * MiB);
    const other = budget.open();
    other.admit(MiB);
    big[Symbol.dispose]();
    t.mock.timers.tick(10_000);
    assert.equal(trims, 0, 'an upload is still in flight');
    other[Symbol.dispose]();
    assert.equal(trims, 0, 'not on the event loop turn that ended the burst');
    t.mock.timers.tick(1999);
    assert.equal(trims, 0);
    t.mock.timers.tick(1);
    assert.equal(trims, 1);
    const after = budget.open();
    after.admit(MiB);
    after[Symbol.dispose]();
    t.mock.timers.tick(10_000);
    assert.equal(trims, 1, 'the burst was counted once');
  });

  it('puts the trim off while uploads come and go after a burst, and trims once when they stop', (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] });
    let trims = 0;
    const budget = new UploadBudget({ limitBytes: 1024 * MiB, trim: () => trims++ });
    const big = budget.open();
    big.admit(20 * MiB);
    big[Symbol.dispose]();
    for (let i = 0; i < 3; i++) {
      t.mock.timers.tick(1500);
      const next = budget.open();
      next.admit(MiB);
      t.mock.timers.tick(1000);
      assert.equal(trims, 0, 'an upload in flight');
      next[Symbol.dispose]();
    }
    t.mock.timers.tick(1000);
    budget.open()[Symbol.dispose](); // a request that ended before its upload was admitted
    t.mock.timers.tick(999);
    assert.equal(trims, 0, 'the last upload ended less than 2 s ago');
    t.mock.timers.tick(1);
    assert.equal(trims, 1, 'an upload never admitted does not put the trim off');
  });
});
