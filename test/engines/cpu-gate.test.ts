/**
 * The cores ggml's thread teams share (docs/architecture.md "Sharing the cores"): two models computing at once take
 * turns on the cores instead of running more spinning threads than there are cores, and what each produces is the
 * same as alone.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { NativeTtsGgmlModel, NativeWhisperModel, NativeWhisperParams } from '../../src/native/addon.js';
import { loadNative } from '../../src/native/load.js';
import { makeTiny } from '../helpers/ggml-tts.js';
import { JFK_WAV } from '../helpers/paths.js';
import { readWavMono } from '../helpers/wav.js';
import { whisperTestModel } from '../helpers/whisper-models.js';

const { samples: jfk } = readWavMono(JFK_WAV);
const WHISPER_PARAMS: NativeWhisperParams = {
  language: 'en',
  translate: false,
  initialPrompt: null,
  temperature: 0,
  temperatureInc: 0,
  maxTokens: 24,
  wordTimestamps: false,
};
const SPEECH = { text: 'The quick brown fox jumps over the lazy dog.', reference: null, language: null, seed: 7, temperature: null, maxFrames: 20 };

describe('cpu gate: models computing at once share the cores', () => {
  const native = loadNative();
  const capacity = native.systemInfo().cpuGate.capacity;
  // teams of a thread per core, as models have by default: any two of them must take turns (on one core a team is
  // a single thread, which never spins and takes no lease)
  const threads = capacity;
  let whisper: NativeWhisperModel;
  let tts: NativeTtsGgmlModel;

  before(async () => {
    whisper = await native.WhisperModel.load(await whisperTestModel({ size: 'tiny' }), { maxBatch: 4, threads });
    const tiny = await makeTiny('pockettts');
    tts = await native.TtsGgmlModel.load({ model: tiny.model, mmproj: tiny.mmproj, threads, sequences: 4 });
  });

  after(() => {
    whisper?.release();
    tts?.release();
  });

  it('makes teams take turns, gives every core back, and changes no result', { skip: capacity < 2 && 'one core: no team to share it' }, async () => {
    const aloneText = (await whisper.transcribe(jfk, WHISPER_PARAMS, null)).segments.map((s) => s.text).join('');
    const aloneSpeech = await tts.synthesize(SPEECH);
    const before = native.systemInfo().cpuGate;

    const [together, ...speeches] = await Promise.all([
      whisper.transcribe(jfk, WHISPER_PARAMS, null),
      tts.synthesize(SPEECH),
      tts.synthesize(SPEECH),
      tts.synthesize(SPEECH),
    ]);
    // a batched transcription settles from inside the batcher's step, which gives its cores back once the step ends
    const deadline = Date.now() + 5000;
    while (native.systemInfo().cpuGate.inUse > 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
    const gate = native.systemInfo().cpuGate;

    assert.equal(gate.inUse, 0, 'every lease was given back');
    assert.equal(gate.peakInUse, capacity, 'a team held every core');
    assert.ok(gate.acquisitions > before.acquisitions, 'both models computed under leases');
    assert.ok(gate.waits > before.waits, 'a team waited for the cores while the other computed');
    assert.equal(together.segments.map((s) => s.text).join(''), aloneText, 'the transcript is the same as alone');
    for (const speech of speeches) assert.deepEqual(speech, aloneSpeech, 'the speech is the same as alone');
  });
});
