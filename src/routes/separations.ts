/**
 * POST /v1/audio/separations (docs/api.md): multipart `file`, `model` (default: the built-in separator) and
 * `description`, the free text naming the sound to extract. The answer is the target stem and the residual
 * (input − target) as base64 32-bit float WAVs at the input's rate and channels, so they add up to the input.
 */
import { z } from 'zod';
import { base64Text } from '../http/reply.js';
import type { HttpServer } from '../http/server.js';
import { floatWavPieces } from '../services/audio/wav.js';
import type { SeparatedAudio } from '../services/separation.js';
import { readAudioForm } from './audio-form.js';
import type { RouteContext } from './context.js';

const fieldsSchema = z.object({
  // absent: the service's default, the built-in separator
  model: z.string().trim().min(1).optional(),
  description: z.string().trim().min(1),
});

export function mountSeparationRoutes(http: HttpServer, { config, separation, uploads }: RouteContext): void {
  http.route('POST', '/v1/audio/separations', async (req, reply) => {
    using upload = uploads.open();
    const fields = await readAudioForm(req, config, upload, fieldsSchema);
    const separated = await separation.separate({ model: fields.model, file: upload, description: fields.description, signal: req.signal });
    await reply.stream('bytes', separationJson(separated), { 'content-type': 'application/json' });
  });
}

/**
 * The answer's JSON, a piece at a time: ten minutes of stereo are two WAVs of 200 MB, more than one string can
 * hold as base64. The residual is computed as it is written.
 */
async function* separationJson({ input, target }: SeparatedAudio): AsyncGenerator<string> {
  const { channels, sampleRate } = input;
  yield '{"target":"';
  yield* base64Text(floatWavPieces(target, sampleRate));
  yield '","residual":"';
  yield* base64Text(floatWavPieces(channels, sampleRate, (c, i) => (channels[c] as Float32Array)[i]! - (target[c] as Float32Array)[i]!));
  yield `","sample_rate":${sampleRate}}`;
}
