/**
 * POST /v1/audio/speech (docs/api.md). Everything is checked before the first byte. A
 * whole response is one encoded file; a stream is one continuously encoded file sent about every
 * `streaming_interval` seconds of audio, as raw bytes or as base64 in `speech.audio.delta` SSE events.
 */
import { z } from 'zod';
import type { HttpReply } from '../http/reply.js';
import type { HttpRequest } from '../http/request.js';
import type { HttpServer } from '../http/server.js';
import { AUDIO_FORMATS } from '../services/audio/encode.js';
import type { RouteContext } from './context.js';

const speechSchema = z.object({
  model: z.string().trim().min(1),
  input: z.string(),
  // the vendor SDK also sends custom voices as { id }
  voice: z.union([z.string().trim().min(1), z.object({ id: z.string().trim().min(1) }).transform((v) => v.id)]).nullish(),
  speed: z.number().min(0.25).max(4).default(1),
  lang_code: z.string().trim().min(1).default('a'),
  response_format: z.enum(AUDIO_FORMATS).default('mp3'),
  stream: z.boolean().default(false),
  stream_format: z.enum(['audio', 'sse']).default('audio'),
  streaming_interval: z.number().positive().max(60).default(2),
  temperature: z.number().min(0).max(2).nullish(),
  max_tokens: z.number().int().positive().nullish(),
  // extension: reproducible sampling on engines that sample (0 to 2^32 - 2)
  seed: z.number().int().min(0).max(4294967294).nullish(),
  ref_audio: z.string().min(1).nullish(),
  ref_text: z.string().nullish(),
  instruct: z.string().nullish(),
  instructions: z.string().nullish(),
});

export function mountSpeechRoutes(http: HttpServer, context: RouteContext): void {
  http.route('POST', '/v1/audio/speech', (req, reply) => speak(req, reply, context));
}

async function speak(req: HttpRequest, reply: HttpReply, { config, logger, tts }: RouteContext): Promise<void> {
  const fields = await req.json(speechSchema, config.maxJsonKb * 1024);
  const instructions = fields.instructions || fields.instruct;
  using speech = await tts.prepare(
    {
      model: fields.model,
      input: fields.input,
      voice: fields.voice ?? null,
      speed: fields.speed,
      language: fields.lang_code,
      format: fields.response_format,
      temperature: fields.temperature ?? null,
      maxTokens: fields.max_tokens ?? null,
      seed: fields.seed ?? null,
      referenceAudio: fields.ref_audio ?? null,
      referenceText: fields.ref_text ?? null,
      instructions: instructions ? { text: instructions, field: fields.instructions ? 'instructions' : 'instruct' } : null,
    },
    req.signal,
  );
  const ignored: Record<string, string> = speech.ignored.length > 0 ? { 'x-voxd-ignored': speech.ignored.join(', ') } : {};
  if (speech.ignored.length > 0) {
    logger.info(
      { reqId: req.id, model: speech.modelId, ignored: speech.ignored },
      `model ${speech.modelId} cannot honour ${ignored['x-voxd-ignored']}; speaking without`,
    );
  }
  const file = { 'content-type': speech.contentType, 'content-disposition': `attachment; filename=speech.${speech.fileExtension}`, ...ignored };

  if (fields.stream_format === 'sse') {
    await reply.stream('sse', audioEvents(speech.stream(fields.streaming_interval), fields.input.length), ignored);
  } else if (fields.stream) {
    await reply.stream('bytes', speech.stream(fields.streaming_interval), { ...file, 'cache-control': 'no-cache' });
  } else {
    reply.send(await speech.whole(), undefined, file);
  }
}

/** The vendor's speech events: each chunk of the file as base64, then the usage. */
async function* audioEvents(chunks: AsyncIterable<Buffer>, inputChars: number): AsyncGenerator<object> {
  for await (const bytes of chunks) if (bytes.length > 0) yield { type: 'speech.audio.delta', audio: bytes.toString('base64') };
  yield { type: 'speech.audio.done', usage: { input_tokens: inputChars, output_tokens: 0, total_tokens: inputChars } };
}
