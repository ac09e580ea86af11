/**
 * POST /v1/audio/transcriptions and /v1/audio/translations: the seed's fields and the vendor's, every response
 * format, and streaming as NDJSON (seed) or SSE (vendor SDKs). Everything that can be checked is checked before
 * the first byte; errors after streaming began end the stream with an error line or event.
 */
import { z } from 'zod';
import type { SttModel, TranscribeOptions, TranscriptionResult, VadModel } from '../engines/types.js';
import { ApiError } from '../errors.js';
import { errorEnvelope } from '../http/errors.js';
import type { HttpReply } from '../http/reply.js';
import type { HttpRequest } from '../http/request.js';
import type { HttpServer } from '../http/server.js';
import { validate } from '../http/validate.js';
import { decodeAudio } from '../services/audio/decode.js';
import { languageCode } from '../services/languages.js';
import { AbortedError } from '../services/scheduler.js';
import { LONG_AUDIO_SECONDS, transcribeSpeechChunks } from '../services/speech-chunks.js';
import type { RouteContext } from './context.js';
import { renderTranscript, segmentLine, sseDelta, sseDone, TRANSCRIPT_FORMATS } from './transcript-formats.js';

const flag = z.preprocess(
  (v) => (typeof v === 'string' ? v.trim().toLowerCase() : v),
  z.enum(['true', 'false', '1', '0']).transform((v) => v === 'true' || v === '1'),
);
const list = z.preprocess((v) => (v === undefined || Array.isArray(v) ? v : [v]), z.array(z.string()));

const fieldsSchema = z.object({
  model: z.string().trim().min(1),
  language: z.string().trim().min(1).optional(),
  prompt: z.string().optional(),
  context: z.string().optional(),
  temperature: z.coerce.number().min(0).max(1).optional(),
  response_format: z.enum(TRANSCRIPT_FORMATS).optional(),
  timestamp_granularities: list.pipe(z.array(z.enum(['word', 'segment']))).optional(),
  include: list.optional(),
  chunking_strategy: z.union([z.string(), z.record(z.string(), z.string())]).optional(),
  stream: flag.optional(),
  stream_format: z.enum(['sse', 'ndjson']).optional(),
  verbose: flag.optional(),
  max_tokens: z.coerce.number().int().positive().optional(),
});
type Fields = z.output<typeof fieldsSchema>;

type StreamKind = 'ndjson' | 'sse';

/** SSE for the vendor SDKs (they parse streams only as SSE), NDJSON for everyone else. */
function streamKind(req: HttpRequest, fields: Fields): StreamKind {
  if (fields.stream_format) return fields.stream_format;
  if ((req.header('accept') ?? '').includes('text/event-stream') || req.header('x-stainless-lang')) return 'sse';
  return 'ndjson';
}

export function mountTranscriptionRoutes(http: HttpServer, context: RouteContext): void {
  http.route('POST', '/v1/audio/transcriptions', (req, reply) => transcribe(req, reply, context, 'transcribe'));
  http.route('POST', '/v1/audio/translations', (req, reply) => transcribe(req, reply, context, 'translate'));
}

async function transcribe(
  req: HttpRequest,
  reply: HttpReply,
  { config, registry, scheduler, logger }: RouteContext,
  task: 'transcribe' | 'translate',
): Promise<void> {
  const form = await req.multipart({ maxFileBytes: config.maxUploadMb * 1024 * 1024 });
  const fields = validate(fieldsSchema, form.fields);
  const file = form.files.file;
  if (!file) throw new ApiError('invalid_request', "Missing required parameter: 'file'", { param: 'file' });
  if (file.data.length === 0) throw new ApiError('invalid_audio', 'the uploaded file is empty', { param: 'file' });
  const language = fields.language === undefined ? null : languageCode(fields.language);
  if (fields.language !== undefined && language === null) {
    throw new ApiError('invalid_request', `unknown language '${fields.language}' (use an ISO 639-1 code such as en)`, { param: 'language' });
  }

  const lease = await registry.acquire<SttModel>(fields.model, 'stt');
  const releases: (() => void)[] = [() => lease.release()];
  try {
    const model = lease.model;
    // translating means "into English": an English-only model has nothing to translate English audio from, so it
    // transcribes; only audio declared to be in another language is more than it can do
    const englishOnly = model.capabilities.languages?.length === 1 && model.capabilities.languages[0] === 'en';
    const translate = task === 'translate' && !(englishOnly && (language === null || language === 'en'));
    if (translate && !model.capabilities.translate) {
      const reason = englishOnly ? `: it hears English only, and the audio is declared to be '${fields.language}'` : '';
      throw new ApiError('invalid_request', `model ${fields.model} cannot translate${reason}`, { param: englishOnly ? 'language' : 'model' });
    }
    const audio = await decodeAudio(file.data, { sampleRate: model.sampleRate, maxSeconds: config.maxAudioSeconds, signal: req.signal });
    const granularities = fields.timestamp_granularities ?? [];
    const options: TranscribeOptions = {
      language: translate ? null : language,
      prompt: [fields.context, fields.prompt].filter(Boolean).join(' ') || null,
      temperature: fields.temperature,
      maxTokens: fields.max_tokens,
      wordTimestamps: granularities.includes('word'),
      translate,
      signal: req.signal,
    };
    const vad = model.capabilities.vadChunking && audio.duration > LONG_AUDIO_SECONDS ? await registry.acquire<VadModel>(config.vadModel, 'vad') : null;
    releases.push(() => vad?.release());
    const run = (extra: Partial<TranscribeOptions> = {}): Promise<TranscriptionResult> =>
      scheduler.run(
        model.id,
        (signal) => {
          const all = { ...options, ...extra, signal };
          return vad ? transcribeSpeechChunks(model, vad.model, audio.samples, all) : model.transcribe(audio.samples, all);
        },
        req.signal,
        model.concurrency,
      );

    if (fields.stream) {
      await streamTranscript(reply, streamKind(req, fields), run, logger);
      return;
    }
    const result = await run();
    const rendered = renderTranscript(fields.response_format ?? 'json', result, {
      task,
      verbose: fields.verbose ?? false,
      words: granularities.includes('word'),
      segments: granularities.length === 0 || granularities.includes('segment'),
    });
    reply.send(rendered.body, rendered.contentType);
  } catch (error) {
    if (error instanceof AbortedError || req.signal.aborted) return reply.abort();
    throw error;
  } finally {
    releases.forEach((release) => release());
  }
}

/** Streams one line (NDJSON) or delta event (SSE) per segment as it is decoded; a failure ends the stream with an error. */
async function streamTranscript(
  reply: HttpReply,
  kind: StreamKind,
  run: (extra: Partial<TranscribeOptions>) => Promise<TranscriptionResult>,
  logger: RouteContext['logger'],
): Promise<void> {
  reply.startStream(200, { 'content-type': kind === 'sse' ? 'text/event-stream' : 'application/x-ndjson', 'cache-control': 'no-cache' });
  try {
    const result = await run({
      onSegment: (segment, language) => void reply.write(kind === 'sse' ? sseDelta(segment.text) : segmentLine(segment, language)),
    });
    if (kind === 'sse') await reply.write(sseDone(result));
  } catch (error) {
    if (reply.aborted) return;
    const envelope = errorEnvelope(ApiError.from(error));
    logger.warn({ err: error }, 'transcription failed after streaming began');
    await reply.write(kind === 'sse' ? `data: ${JSON.stringify(envelope)}\n\n` : JSON.stringify(envelope) + '\n');
  }
  reply.end();
}
