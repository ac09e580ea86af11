/**
 * The child process of engines/phonemizer-process.ts: reads Kokoro's phonemes through the addon's espeak-ng for its
 * parent, one message per request, so that espeak-ng failing on some text (it has crash bugs) ends this process,
 * not the server.
 */
import { loadNative } from '../native/load.js';
import type { PhonemizerReply, PhonemizerRequest } from './phonemizer-process.js';

process.on('message', (message: PhonemizerRequest) => {
  const reply = (r: PhonemizerReply): void => {
    process.send?.(r);
  };
  loadNative()
    .kokoroPhonemes(message.text, message.langCode, message.dataDir)
    .then(
      (pieces) => reply({ id: message.id, pieces }),
      (error: unknown) => {
        const e = error as { message?: unknown; code?: unknown };
        reply({ id: message.id, error: { message: String(e.message ?? error), code: typeof e.code === 'string' ? e.code : 'native_error' } });
      },
    );
});
// the parent is gone: nothing more to do
process.on('disconnect', () => process.exit(0));
