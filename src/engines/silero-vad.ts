/**
 * Silero voice activity detection on whisper.cpp's VAD API (ggml files such as
 * `ggml-org/whisper-vad/ggml-silero-v6.2.0.bin`). That default model also ships with the package, built from the
 * published ONNX weights at build time (scripts/build-vad-model.mjs), for when the hub is out of reach.
 */
import { access } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { abortFlagFor } from '../native/abort.js';
import type { NativeVadModel, NativeVadStream } from '../native/addon.js';
import { loadNative } from '../native/load.js';
import { GGML_FILE_MAGIC, readFileHead } from './file-head.js';
import type { Engine, ResolvedModel, SpeechSegment, VadModel, VadParams, VadStream } from './types.js';

/** The shipped Silero VAD v6.2.0 (dist/models/, beside the compiled code). */
export const SHIPPED_VAD_MODEL = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'models', 'ggml-silero-v6.2.0.bin');

/** The shipped default VAD model's path; fails, saying how to build it, when this installation lacks it. */
export async function shippedVadModel(): Promise<string> {
  await access(SHIPPED_VAD_MODEL).catch((error: unknown) => {
    throw new Error(`the default VAD model is missing from this installation (${SHIPPED_VAD_MODEL}): build it with node scripts/build-vad-model.mjs`, {
      cause: error,
    });
  });
  return SHIPPED_VAD_MODEL;
}

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
