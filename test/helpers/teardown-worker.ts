/**
 * A worker_thread for test/engines/addon-teardown.test.ts: loads the addon, starts engine work of one kind, says
 * `busy` and never waits for the work, so that the test terminates the worker while the work is in flight.
 */
import fs from 'node:fs';
import path from 'node:path';
import { parentPort, workerData } from 'node:worker_threads';
import { loadNative } from '../../src/native/load.js';
import { SHARED, SILERO_V6 } from './paths.js';

export type TeardownMode = 'codec' | 'vad' | 'flite' | 'sphinx' | 'tts';

interface Job {
  mode: TeardownMode;
  /** The GGML TTS test model, for `tts`. */
  tts?: { model: string; mmproj: string };
  /** The length of `tts`'s streamed synthesis, in frames. */
  synthesisFrames: number;
}

/** 16 kHz noise: every engine takes it, and it is cheap to make. */
function noise(seconds: number): Float32Array {
  const out = new Float32Array(seconds * 16000);
  let state = 12345;
  for (let i = 0; i < out.length; i++) {
    state = (state * 1103515245 + 12345) & 0x7fffffff;
    out[i] = (state / 0x7fffffff - 0.5) * 0.2;
  }
  return out;
}

const LONG_TEXT = 'The quick brown fox jumps over the lazy dog. '.repeat(40);

async function start({ mode, tts, synthesisFrames }: Job): Promise<void> {
  const addon = loadNative();
  // rejections after the environment is gone do not matter; the promises are never awaited
  const inFlight = (promise: Promise<unknown>): void => void promise.catch(() => undefined);
  switch (mode) {
    case 'codec': {
      const wav = fs.readFileSync(path.join(SHARED, 'audio', 'speech', 'jfk.wav'));
      inFlight(addon.decodeAudio(wav, { sampleRate: 24000 }));
      inFlight(new addon.AudioEncoder({ format: 'mp3', sampleRate: 16000, streaming: true }).encode(noise(20)));
      break;
    }
    case 'vad': {
      const vad = await addon.VadModel.load(SILERO_V6);
      inFlight(vad.segments(noise(30)));
      inFlight((await vad.openStream()).process(noise(5)));
      break;
    }
    case 'flite': {
      const flite = await addon.FliteModel.load();
      inFlight(flite.synthesize(LONG_TEXT, { voice: addon.FliteModel.voiceIds[0] as string }, () => undefined));
      break;
    }
    case 'sphinx': {
      const sphinx = await addon.SphinxModel.load({});
      inFlight(sphinx.transcribe(noise(8)));
      break;
    }
    case 'tts': {
      const model = await addon.TtsGgmlModel.load({ ...(tts as NonNullable<Job['tts']>), sequences: 3 });
      // a streamed synthesis on the model's executor thread, and a batch stepping beside it
      inFlight(model.synthesize({ text: LONG_TEXT, seed: 1, maxFrames: synthesisFrames }, () => undefined));
      const batch = model.createBatch();
      batch.add({ text: LONG_TEXT, seed: 2, maxFrames: 400 });
      inFlight(
        (async () => {
          for (;;) await batch.step();
        })(),
      );
      break;
    }
  }
  parentPort?.postMessage('busy');
}

start(workerData as Job).catch((error: unknown) => parentPort?.postMessage(`error: ${error instanceof Error ? error.stack : String(error)}`));
