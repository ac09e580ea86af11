/**
 * POST /v1/audio/transcriptions and /v1/audio/translations (docs/api.md): every field,
 * every response format, and streaming as NDJSON (seed) or SSE (vendor SDKs). Everything that can be checked is
 * checked before the first byte; errors after streaming began end the stream with an error line or event.
 */
import { z } from 'zod';
import type { HttpReply } from '../http/reply.js';
import type { HttpRequest } from '../http/request.js';
import type { HttpServer } from '../http/server.js';
import type { VadParams } from '../engines/types.js';
import { DIARIZING_ALIAS } from '../services/registry.js';
import { MAX_DIARIZED_SPEAKERS, MAX_KNOWN_SPEAKERS, MAX_REFERENCE_FIELD_BYTES, type SpeakerRequest } from '../services/stt/diarization.js';
import type { SttTask, TranscriptEvent } from '../services/stt/transcriber.js';
import { readAudioForm } from './audio-form.js';
import type { RouteContext } from './context.js';
import { diarizedSegment, renderTranscript, segmentRecord, TRANSCRIPT_FORMATS, transcriptUsage } from './transcript-formats.js';

const flag = z.preprocess(
  (v) => (typeof v === 'string' ? v.trim().toLowerCase() : v),
  z.enum(['true', 'false', '1', '0']).transform((v) => v === 'true' || v === '1'),
);
const list = z.preprocess((v) => (v === undefined || Array.isArray(v) ? v : [v]), z.array(z.string()));

const speakerCount = z.coerce.number().int().min(1).max(MAX_DIARIZED_SPEAKERS);

/** `"auto"`, or the vendor's server_vad settings (form fields `chunking_strategy[threshold]`, ..., or one JSON string). */
const chunkingStrategy = z.preprocess(
  (v) => {
    if (typeof v !== 'string' || !v.trim().startsWith('{')) return v;
    try {
      return JSON.parse(v) as unknown;
    } catch {
      return v;
    }
  },
  z.union(
    [
      z.literal('auto'),
      z
        .object({
          type: z.literal('server_vad'),
          threshold: z.coerce.number().min(0).max(1).optional(),
          prefix_padding_ms: z.coerce.number().int().min(0).max(10_000).optional(),
          silence_duration_ms: z.coerce.number().int().min(0).max(10_000).optional(),
        })
        .strict(),
    ],
    { error: 'chunking_strategy must be "auto" or server_vad settings: type=server_vad, threshold (0 to 1), prefix_padding_ms, silence_duration_ms' },
  ),
);

const fieldsSchema = z
  .object({
    model: z.string().trim().min(1),
    language: z.string().trim().min(1).optional(),
    prompt: z.string().optional(),
    context: z.string().optional(),
    temperature: z.coerce.number().min(0).max(1).optional(),
    response_format: z.enum(TRANSCRIPT_FORMATS).optional(),
    timestamp_granularities: list.pipe(z.array(z.enum(['word', 'segment']))).optional(),
    include: list.optional(),
    chunking_strategy: chunkingStrategy.optional(),
    stream: flag.optional(),
    stream_format: z.enum(['sse', 'ndjson']).optional(),
    verbose: flag.optional(),
    max_tokens: z.coerce.number().int().positive().optional(),
    diarize: flag.optional(),
    known_speaker_names: list.pipe(z.array(z.string().trim().min(1).max(64)).max(MAX_KNOWN_SPEAKERS)).optional(),
    known_speaker_references: list.pipe(z.array(z.string()).max(MAX_KNOWN_SPEAKERS)).optional(),
    min_speakers: speakerCount.optional(),
    max_speakers: speakerCount.optional(),
  })
  .superRefine((f, ctx) => {
    const names = f.known_speaker_names ?? [];
    const references = f.known_speaker_references ?? [];
    const issue = (path: string, message: string): void => ctx.addIssue({ code: 'custom', path: [path], message });
    if (names.length !== references.length) {
      issue(
        names.length > references.length ? 'known_speaker_references' : 'known_speaker_names',
        `each known speaker needs a name and a reference clip: got ${names.length} known_speaker_names[] and ${references.length} known_speaker_references[]`,
      );
    }
    if (new Set(names).size !== names.length) issue('known_speaker_names', 'known speaker names must differ');
    if (f.min_speakers !== undefined && f.max_speakers !== undefined && f.min_speakers > f.max_speakers) {
      issue('min_speakers', `min_speakers (${f.min_speakers}) is more than max_speakers (${f.max_speakers})`);
    }
    if (f.diarize === false && f.response_format === 'diarized_json') issue('diarize', 'response_format=diarized_json needs diarize=true');
  });

type TranscriptionFields = z.output<typeof fieldsSchema>;

/** Speakers are asked for by the format, the diarizing alias, `diarize=true` or the speaker fields; null when not. */
function speakerRequest(fields: TranscriptionFields): SpeakerRequest | null {
  const names = fields.known_speaker_names ?? [];
  const asked =
    fields.diarize ??
    (fields.response_format === 'diarized_json' ||
      fields.model === DIARIZING_ALIAS ||
      names.length > 0 ||
      fields.min_speakers !== undefined ||
      fields.max_speakers !== undefined);
  if (!asked) return null;
  const references = fields.known_speaker_references ?? [];
  return {
    minSpeakers: fields.min_speakers,
    maxSpeakers: fields.max_speakers,
    known: names.map((name, i) => ({ name, reference: references[i] as string })),
  };
}

/** The VAD settings of a chunking_strategy: server_vad's threshold, pause and padding; "auto" keeps the VAD's defaults. */
function chunkingVad(strategy: TranscriptionFields['chunking_strategy']): VadParams | null {
  if (strategy === undefined) return null;
  if (strategy === 'auto') return {};
  return { threshold: strategy.threshold, minSilenceDurationMs: strategy.silence_duration_ms, speechPadMs: strategy.prefix_padding_ms };
}

export function mountTranscriptionRoutes(http: HttpServer, context: RouteContext): void {
  http.route('POST', '/v1/audio/transcriptions', (req, reply) => transcribe(req, reply, context, 'transcribe'));
  http.route('POST', '/v1/audio/translations', (req, reply) => transcribe(req, reply, context, 'translate'));
}

async function transcribe(req: HttpRequest, reply: HttpReply, { config, stt, uploads }: RouteContext, task: SttTask): Promise<void> {
  using upload = uploads.open();
  const fields = await readAudioForm(req, config, upload, fieldsSchema, {
    names: ['known_speaker_references'],
    maxBytes: MAX_REFERENCE_FIELD_BYTES,
    maxCount: MAX_KNOWN_SPEAKERS,
  });
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
    speakers: speakerRequest(fields),
    chunking: chunkingVad(fields.chunking_strategy),
  });
  if (fields.stream) {
    // SSE for the vendor SDKs (they parse streams only as SSE), NDJSON for everyone else
    const sse = fields.stream_format
      ? fields.stream_format === 'sse'
      : (req.header('accept') ?? '').includes('text/event-stream') || !!req.header('x-stainless-lang');
    // awaited here: the transcription's models are held until the stream ends
    await reply.stream(sse ? 'sse' : 'ndjson', sse ? vendorEvents(transcription.events(), transcription.diarized) : segmentLines(transcription.events()));
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

/**
 * The vendor SDKs' stream: the text's deltas as they are decoded (a segment's at a time where the engine does not
 * stream text), then the whole text. With speakers, as the vendor streams them: each segment with its speaker
 * (`transcript.text.segment`) instead of the deltas.
 */
async function* vendorEvents(events: AsyncIterable<TranscriptEvent>, diarized: boolean): AsyncGenerator<object> {
  for await (const event of events) {
    if (event.type === 'segment' && diarized) yield diarizedSegment(event.segment);
    else if (event.type === 'delta' && !diarized) yield { type: 'transcript.text.delta', delta: event.text };
    else if (event.type === 'done') yield { type: 'transcript.text.done', text: event.result.text, usage: transcriptUsage(event.result) };
  }
}
