/**
 * POST /v1/audio/transcriptions and /v1/audio/translations (docs/api.md): every field,
 * every response format, and streaming as NDJSON (seed) or SSE (vendor SDKs). Everything that can be checked is
 * checked before the first byte; errors after streaming began end the stream with an error line or event.
 */
import { z } from 'zod';
import type { HttpReply } from '../http/reply.js';
import type { HttpRequest } from '../http/request.js';
import type { HttpServer } from '../http/server.js';
import type { SttTask, TranscriptEvent } from '../services/stt/transcriber.js';
import { readAudioForm } from './audio-form.js';
import type { RouteContext } from './context.js';
import { renderTranscript, segmentRecord, TRANSCRIPT_FORMATS, transcriptUsage } from './transcript-formats.js';

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

export function mountTranscriptionRoutes(http: HttpServer, context: RouteContext): void {
  http.route('POST', '/v1/audio/transcriptions', (req, reply) => transcribe(req, reply, context, 'transcribe'));
  http.route('POST', '/v1/audio/translations', (req, reply) => transcribe(req, reply, context, 'translate'));
}

async function transcribe(req: HttpRequest, reply: HttpReply, { config, stt, uploads }: RouteContext, task: SttTask): Promise<void> {
  using upload = uploads.open();
  const fields = await readAudioForm(req, config, upload, fieldsSchema);
  const granularities = fields.timestamp_granularities ?? [];

  using transcription = await stt.prepare({
    model: fields.model,
    file: upload,
    task,
    language: fields.language ?? null,
    prompt: [fields.context, fields.prompt].filter(Boolean).join(' ') || null,
    temperature: fields.temperature,
    maxTokens: fields.max_tokens,
    wordTimestamps: granularities.includes('word'),
    signal: req.signal,
  });
  if (fields.stream) {
    // SSE for the vendor SDKs (they parse streams only as SSE), NDJSON for everyone else
    const sse = fields.stream_format
      ? fields.stream_format === 'sse'
      : (req.header('accept') ?? '').includes('text/event-stream') || !!req.header('x-stainless-lang');
    // awaited here: the transcription's models are held until the stream ends
    await reply.stream(sse ? 'sse' : 'ndjson', sse ? vendorEvents(transcription.events()) : segmentLines(transcription.events()));
    return;
  }
  const rendered = renderTranscript(fields.response_format ?? 'json', await transcription.result(), {
    task,
    verbose: fields.verbose ?? false,
    words: granularities.includes('word'),
    segments: granularities.length === 0 || granularities.includes('segment'),
  });
  reply.send(rendered.body, rendered.contentType);
}

/**
 * The NDJSON stream: one line per segment (`is_final: true`), and on engines that stream text, a line per piece of
 * text as it is decoded before them (`is_final: false`, no times; a segment's pieces concatenated are its text).
 */
async function* segmentLines(events: AsyncIterable<TranscriptEvent>): AsyncGenerator<object> {
  for await (const event of events) {
    if (event.type === 'segment') yield segmentRecord(event.segment, event.language);
    else if (event.type === 'delta' && event.partial) yield { text: event.text, is_final: false };
  }
}

/** The vendor SDKs' stream: the text's deltas as they are decoded (a segment's at a time where the engine does not stream text), then the whole text. */
async function* vendorEvents(events: AsyncIterable<TranscriptEvent>): AsyncGenerator<object> {
  for await (const event of events) {
    if (event.type === 'delta') yield { type: 'transcript.text.delta', delta: event.text };
    else if (event.type === 'done') yield { type: 'transcript.text.done', text: event.result.text, usage: transcriptUsage(event.result) };
  }
}
