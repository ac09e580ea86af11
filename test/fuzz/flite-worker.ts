/**
 * The child process behind FliteChild (flite-text.ts): loads the built-in flite voices once, then speaks every
 * text it is sent, through the engine module (so its text normalisation is in the path), and answers with how much
 * audio came out. A text that breaks libflite takes down this process only.
 */
import { loadFliteModel } from '../../src/engines/flite.js';
import type { FliteChildReply, FliteChildRequest } from './flite-text.js';

const send = (reply: FliteChildReply): void => void process.send?.(reply);

const model = await loadFliteModel();
process.on('disconnect', () => process.exit(0)); // the parent went away
process.on('message', (request: FliteChildRequest) => {
  const started = performance.now();
  model.synthesize({ text: request.text, voice: request.voice, speed: request.speed }).then(
    (samples) => send({ id: request.id, samples: samples.length, ms: performance.now() - started }),
    (error: unknown) =>
      send({ id: request.id, error: error instanceof Error ? `${(error as { code?: string }).code ?? error.name}: ${error.message}` : String(error) }),
  );
});
send({ ready: true, sampleRate: model.sampleRate });
