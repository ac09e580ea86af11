/**
 * The voices a client speaks with (docs/api.md, "Custom voices"): GET /v1/audio/voices (a model's voices and the
 * custom voices it can speak, or the custom voices alone), POST/GET/DELETE of custom voices, and the consents
 * they name at /v1/audio/voice_consents, in the vendor's shapes.
 */
import { z } from 'zod';
import { ApiError } from '../errors.js';
import type { HttpRequest } from '../http/request.js';
import type { HttpServer } from '../http/server.js';
import { validate } from '../http/validate.js';
import { MAX_SAMPLE_BYTES, type CustomVoice } from '../services/tts/custom-voices.js';
import type { RouteContext } from './context.js';

const voiceFields = z.object({
  name: z.string(),
  consent: z.string().trim().min(1).optional(),
  // extensions: what the sample says (cloning models that read it), a model that encodes the voice at once, and the
  // vendor's voice-design fields refused
  ref_text: z.string().optional(),
  model: z.string().trim().min(1).optional(),
  type: z.literal('audio_sample', { error: 'only type=audio_sample voices are made here; prompt voices are not' }).optional(),
});

const consentFields = z.object({ name: z.string(), language: z.string() });
const renameFields = z.object({ name: z.string() });
const listQuery = z.object({
  after: z.string().trim().min(1).optional(),
  limit: z.coerce.number().int().min(1).max(100).default(20),
});

/** A custom voice as the API shows it: the vendor's fields, and voxd's `ref_text` and `custom`. */
function shown(voice: CustomVoice): Record<string, unknown> {
  return { ...voice, custom: true };
}

export function mountVoiceRoutes(http: HttpServer, { tts, customVoices }: RouteContext): void {
  http.route('GET', '/v1/audio/voices', async (req, reply) => {
    const model = req.query.get('model')?.trim();
    if (!model) {
      reply.json({ object: 'list', data: (await customVoices.voices()).map(shown) });
      return;
    }
    const { voices, custom, cloning, instructions, languages } = await tts.voices(model, req.signal);
    // capabilities (an extension) lets a client offer only the fields this model honours (the web interface does)
    reply.json({
      object: 'list',
      model,
      capabilities: { cloning, instructions, ...(languages ? { languages } : {}) },
      data: [...voices.map(({ id, name, language }) => ({ id, name, ...(language ? { language } : {}) })), ...custom.map(shown)],
    });
  });
  http.route('POST', '/v1/audio/voices', async (req, reply) => {
    const { fields, file } = await uploaded(req, 'audio_sample', voiceFields);
    const voice = { name: fields.name, sample: file, consent: fields.consent ?? null, refText: fields.ref_text ?? null };
    reply.json(shown(await tts.createVoice(voice, fields.model ?? null, req.signal)));
  });
  http.route('GET', '/v1/audio/voices/:id', async (req, reply) => reply.json(shown(await customVoices.voice(req.params.id ?? ''))));
  http.route('DELETE', '/v1/audio/voices/:id', async (req, reply) => reply.json(await customVoices.deleteVoice(req.params.id ?? '', req.signal)));

  http.route('POST', '/v1/audio/voice_consents', async (req, reply) => {
    const { fields, file } = await uploaded(req, 'recording', consentFields);
    reply.json(await customVoices.createConsent({ name: fields.name, language: fields.language, recording: file }, req.signal));
  });
  http.route('GET', '/v1/audio/voice_consents', async (req, reply) => {
    const query = validate(listQuery, Object.fromEntries(req.query));
    reply.json(await customVoices.consents(query.after ?? null, query.limit));
  });
  http.route('GET', '/v1/audio/voice_consents/:id', async (req, reply) => reply.json(await customVoices.consent(req.params.id ?? '')));
  // the vendor renames with POST and a JSON body
  http.route('POST', '/v1/audio/voice_consents/:id', async (req, reply) => {
    const { name } = await req.json(renameFields, 64 * 1024);
    reply.json(await customVoices.renameConsent(req.params.id ?? '', name, req.signal));
  });
  http.route('DELETE', '/v1/audio/voice_consents/:id', async (req, reply) => reply.json(await customVoices.deleteConsent(req.params.id ?? '', req.signal)));
}

/** A multipart form with one audio file in `fileField` (10 MiB at most, as the vendor takes) and fields by `schema`. */
async function uploaded<S extends z.ZodType>(req: HttpRequest, fileField: string, schema: S): Promise<{ fields: z.output<S>; file: Buffer }> {
  const form = await req.multipart({ maxFileBytes: MAX_SAMPLE_BYTES });
  const fields = validate(schema, form.fields);
  const file = form.files[fileField];
  if (!file || file.data.length === 0) throw new ApiError('invalid_request', `Missing required parameter: '${fileField}'`, { param: fileField });
  return { fields, file: file.data };
}
