/**
 * POST /v1/audio/separations (docs/api.md): multipart `file`, `model` (default: the built-in separator) and
 * `description`, the free text naming the sound to extract. The answer is the target stem and the residual
 * (input − target) as base64 32-bit float WAVs at the input's rate and channels, so they add up to the input.
 * The description is matched before the upload is decoded: a request the model cannot serve costs no work.
 */
import { z } from 'zod';
import type { SeparatorModel } from '../engines/types.js';
import { ApiError } from '../errors.js';
import type { HttpServer } from '../http/server.js';
import { validate } from '../http/validate.js';
import { decodeAudioChannels } from '../services/audio/decode.js';
import { floatWavPieces } from '../services/audio/wav.js';
import { AbortedError } from '../services/scheduler.js';
import { SEPARATOR_MODEL_ID } from '../engines/separator.js';
import type { RouteContext } from './context.js';

const fieldsSchema = z.object({
  model: z.string().trim().min(1).default(SEPARATOR_MODEL_ID),
  description: z.string().trim().min(1),
});

export function mountSeparationRoutes(http: HttpServer, { config, registry, scheduler }: RouteContext): void {
  http.route('POST', '/v1/audio/separations', async (req, reply) => {
    const form = await req.multipart({ maxFileBytes: config.maxUploadMb * 1024 * 1024 });
    const fields = validate(fieldsSchema, form.fields);
    const file = form.files.file;
    if (!file) throw new ApiError('invalid_request', "Missing required parameter: 'file'", { param: 'file' });
    if (file.data.length === 0) throw new ApiError('invalid_audio', 'the uploaded file is empty', { param: 'file' });

    const lease = await registry.acquire<SeparatorModel>(fields.model, 'separation');
    try {
      const model = lease.model;
      const target = model.match(fields.description);
      if (!target) {
        const served = model.targets.map((t) => `${t.name} (${t.synonyms.slice(0, 4).join(', ')})`).join('; ');
        throw new ApiError('invalid_request', `model ${model.id} cannot extract "${fields.description}"; it serves: ${served}`, { param: 'description' });
      }
      const audio = await decodeAudioChannels(file.data, { maxSeconds: config.maxSeparationSeconds, signal: req.signal });
      const stem = await scheduler.run(model.id, (signal) => model.separate(audio, target, signal), req.signal, model.concurrency);
      // streamed: ten minutes of stereo are two WAVs of 200 MB, more than one JSON string can hold as base64
      const input = audio.channels;
      reply.startStream(200, { 'content-type': 'application/json' });
      await reply.write('{"target":"');
      await reply.writeBase64(floatWavPieces(stem, audio.sampleRate));
      await reply.write('","residual":"');
      await reply.writeBase64(floatWavPieces(input, audio.sampleRate, (c, i) => (input[c] as Float32Array)[i]! - (stem[c] as Float32Array)[i]!));
      await reply.write(`","sample_rate":${audio.sampleRate}}`);
      reply.end();
    } catch (error) {
      if (error instanceof AbortedError || req.signal.aborted) return reply.abort();
      throw error;
    } finally {
      lease.release();
    }
  });
}
