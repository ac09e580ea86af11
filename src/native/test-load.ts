/**
 * Test-loading the addon, apart from the server: run as a script (`node dist/src/native/test-load.js`), it loads the
 * addon as the server would (native/load.ts) and prints what it took as one JSON line, a `TestLoadOutcome`.
 * scripts/install.mjs (its step 0) and test/unit/native-loader.test.ts run it in a child process, so an addon that
 * crashes while loading takes down only the child.
 */
import { NativeLoadError, nativeOrigin, type NativeOrigin } from './load.js';

/** The addon the loader took, or why it took none. */
export type TestLoadOutcome = NativeOrigin | { kind: 'none'; summary: string; passedOver: string | null };

function testLoad(): TestLoadOutcome {
  try {
    return nativeOrigin();
  } catch (error) {
    return {
      kind: 'none',
      summary: error instanceof Error ? error.message : String(error),
      passedOver: error instanceof NativeLoadError ? error.passedOver : null,
    };
  }
}

console.log(JSON.stringify(testLoad()));
