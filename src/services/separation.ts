/**
 * Source separation for POST /v1/audio/separations: the description is matched against the model's targets
 * before the upload is decoded (a request the model cannot serve costs no work), the upload is decoded at its own
 * rate and channels, and the separator runs as a scheduler job. The residual is left to the caller to derive as
 * input − target, sample by sample, so the two add up to the input exactly.
 */
import { SEPARATOR_MODEL_ID } from '../engines/separator.js';
import type { PcmAudio, SeparatorModel } from '../engines/types.js';
import { ApiError } from '../errors.js';
import { decodeAudioChannels } from './audio/decode.js';
import type { Upload } from './audio/upload-budget.js';
import type { ModelRegistry } from './registry.js';
import type { Scheduler } from './scheduler.js';

export interface SeparationRequest {
  /** Absent: the built-in separator. */
  model?: string;
  /** The uploaded file, in any format the decoder reads; it holds the decoded audio's share of the upload budget. */
  file: Upload;
  /** Free text naming the sound to extract. */
  description: string;
  signal: AbortSignal;
}

/** The input as decoded, and the target stem at its rate, channel count and length. */
export interface SeparatedAudio {
  input: PcmAudio;
  target: Float32Array[];
}

export interface SeparationServiceOptions {
  registry: ModelRegistry;
  scheduler: Scheduler;
  /** --max-separation-seconds. */
  maxSeconds: number;
}

export class SeparationService {
  constructor(private readonly options: SeparationServiceOptions) {}

  async separate({ model: modelId = SEPARATOR_MODEL_ID, file, description, signal }: SeparationRequest): Promise<SeparatedAudio> {
    using lease = await this.options.registry.acquire<SeparatorModel>(modelId, 'separation', signal);
    const model = lease.model;
    const target = model.match(description);
    if (!target) {
      const served = model.targets.map((t) => `${t.name} (${t.synonyms.slice(0, 4).join(', ')})`).join('; ');
      throw new ApiError('invalid_request', `model ${model.id} cannot extract "${description}"; it serves: ${served}`, { param: 'description' });
    }
    const input = await decodeAudioChannels(file.take(), { maxSeconds: this.options.maxSeconds, signal });
    // the input, the separator's copy of it and the target stem, as large (the copy only while the separator runs)
    file.holding(3 * input.channels.reduce((bytes, channel) => bytes + channel.byteLength, 0));
    const stem = await this.options.scheduler.run(model, (jobSignal) => model.separate(input, target, jobSignal), signal);
    return { input, target: stem };
  }
}
