/**
 * The child process behind FliteChild (flite-text.ts): loads the built-in flite voices once, then speaks every
 * text it is sent, through the engine module (so its text normalisation is in the path), and answers with how much
 * audio came out. A text that breaks libflite takes down this process only.
 */
import { loadFliteModel } from '../../src/engines/flite.js';
import type { FliteInput, FliteReady, FliteReply } from './flite-text.js';
import { answerParent } from './worker-child.js';

const model = await loadFliteModel();
answerParent<FliteInput, FliteReply, FliteReady>({ sampleRate: model.sampleRate }, async (input) => {
  const started = performance.now();
  try {
    const samples = await model.synthesize({ text: input.text, voice: input.voice, speed: input.speed });
    return { samples: samples.length, ms: performance.now() - started };
  } catch (error) {
    return { error: error instanceof Error ? `${(error as { code?: string }).code ?? error.name}: ${error.message}` : String(error) };
  }
});
