/**
 * Silero voice activity detection on whisper.cpp's VAD API (ggml files such as
 * `ggml-org/whisper-vad/ggml-silero-v6.2.0.bin`).
 */
import { loadNative, type NativeVadModel, type NativeVadStream } from '../native/addon.js';
import { readFileHead } from './file-head.js';
import { abortFlagFor } from './native-abort.js';
import type { Engine, ResolvedModel, SpeechSegment, VadModel, VadParams, VadStream } from './types.js';

const GGML_FILE_MAGIC = 0x67676d6c; // "ggml", little-endian uint32 at offset 0
const MODEL_TYPE_PREFIX = 'silero';

/** Reads the ggml header: magic, then a length-prefixed model type string ("silero-v6.2.0", ...). */
async function readModelType(path: string): Promise<string | null> {
  const head = await readFileHead(path, 72);
  if (!head || head.length < 8 || head.readUInt32LE(0) !== GGML_FILE_MAGIC) return null;
  const length = head.readInt32LE(4);
  if (length <= 0 || length > 64 || 8 + length > head.length) return null;
  return head.toString('latin1', 8, 8 + length);
}

class SileroVadStream implements VadStream {
  constructor(private readonly native: NativeVadStream) {}
  process(samples: Float32Array): Promise<Float32Array> {
    return this.native.process(samples);
  }
  reset(): Promise<void> {
    return this.native.reset();
  }
  close(): Promise<void> {
    return this.native.close();
  }
}

class SileroVadModel implements VadModel {
  readonly task = 'vad' as const;
  readonly engine = 'silero-vad';
  readonly sampleRate = 16000 as const;
  readonly frameSamples = 512 as const;

  constructor(
    readonly id: string,
    private native: NativeVadModel | null,
  ) {}

  private get loaded(): NativeVadModel {
    if (!this.native) throw new Error(`model ${this.id} was unloaded`);
    return this.native;
  }

  segments(samples: Float32Array, params: VadParams = {}, signal?: AbortSignal): Promise<SpeechSegment[]> {
    return this.loaded.segments(samples, params, abortFlagFor(signal));
  }

  async openStream(): Promise<VadStream> {
    return new SileroVadStream(await this.loaded.openStream());
  }

  async dispose(): Promise<void> {
    // native contexts are freed when the last stream or worker lets go of the pool (GC of the wrapper)
    this.native = null;
  }
}

export const sileroVadEngine: Engine<VadModel> = {
  name: 'silero-vad',
  task: 'vad',
  async detect(path: string): Promise<boolean> {
    return (await readModelType(path))?.startsWith(MODEL_TYPE_PREFIX) ?? false;
  },
  async load(model: ResolvedModel): Promise<VadModel> {
    if (!model.path) throw new Error('the Silero VAD engine needs a model file');
    const native = await loadNative().VadModel.load(model.path);
    return new SileroVadModel(model.id, native);
  },
};
