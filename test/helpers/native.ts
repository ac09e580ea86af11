import assert from 'node:assert/strict';
import type { NativeError } from '../../src/native/addon.js';

/** The native rejection of `promise` (fails when it resolves). */
export async function nativeRejection(promise: Promise<unknown>): Promise<NativeError> {
  try {
    await promise;
  } catch (error) {
    assert.ok(error instanceof Error && typeof (error as NativeError).code === 'string', `not a native error: ${String(error)}`);
    return error as NativeError;
  }
  assert.fail('expected a rejection');
}
