/**
 * POST /v1/audio/speech and GET /v1/audio/voices. Everything is checked before the first byte: input, model,
 * voice, language, fields the engine cannot honour, ref_audio. The input is split at sentence boundaries; a
 * whole response synthesises the pieces through the model's batching path, a stream speaks them in order and
 * sends one continuously encoded container about every `streaming_interval` seconds of audio (raw bytes, or
 * base64 in `speech.audio.delta` SSE events).
 */
import { z } from 'zod';
import type { SynthesisRequest, TtsModel } from '../engines/types.js';
import { ApiError } from '../errors.js';
import { errorEnvelope } from '../http/errors.js';
import type { HttpReply } from '../http/reply.js';
import type { HttpRequest } from '../http/request.js';
import type { HttpServer } from '../http/server.js';
import { AUDIO_FORMATS, contentTypeOf, createEncoder, encodeAudio, fileExtensionOf, type AudioFormat } from '../services/audio/encode.js';
import { concatSamples } from '../services/audio/samples.js';
import { AbortedError } from '../services/scheduler.js';
import { loadReferenceAudio } from '../services/tts/reference.js';
import { splitSentences } from '../services/tts/sentences.js';
import type { Synthesizer } from '../services/tts/synthesizer.js';
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
type SpeechFields = z.output<typeof speechSchema>;

export function mountSpeechRoutes(http: HttpServer, context: RouteContext, synthesizer: Synthesizer): void {
  http.route('POST', '/v1/audio/speech', (req, reply) => speak(req, reply, context, synthesizer));
  http.route('GET', '/v1/audio/voices', (req, reply) => listVoices(req, reply, context));
}

async function listVoices(req: HttpRequest, reply: HttpReply, { registry }: RouteContext): Promise<void> {
  const id = req.query.get('model')?.trim() || 'tts-1';
  const lease = await registry.acquire<TtsModel>(id, 'tts');
  try {
    const { cloning, instructions } = lease.model.capabilities;
    // capabilities (an extension) lets a client offer only the fields this model honours (the web interface does)
    reply.json({
      object: 'list',
      model: id,
      capabilities: { cloning, instructions },
      data: lease.model.voices.map(({ id: voice, name }) => ({ id: voice, name })),
    });
  } finally {
    lease.release();
  }
}

/** The model's voice for the request's `voice`: an ID or name of the model's, or a vendor name it maps. */
function resolveVoice(model: TtsModel, voice: string | null | undefined): string {
  if (!voice) return model.defaultVoice;
  const wanted = voice.toLowerCase();
  const own = model.voices.find((v) => v.id.toLowerCase() === wanted || v.name.toLowerCase() === wanted);
  if (own) return own.id;
  // own keys only: `__proto__` or `constructor` must not find Object.prototype's members
  const alias = model.voiceAliases && Object.hasOwn(model.voiceAliases, wanted) ? model.voiceAliases[wanted] : undefined;
  if (alias) return alias;
  const offered = [...model.voices.map((v) => v.id), ...Object.keys(model.voiceAliases ?? {})].join(', ');
  throw new ApiError('invalid_request', `unknown voice '${voice}' for model ${model.id}; voices: ${offered}`, { param: 'voice' });
}

/** The engine's request, and the fields it leaves out because the model cannot honour them. */
interface PreparedRequest {
  request: Omit<SynthesisRequest, 'text'>;
  /** Request fields the model ignores; named in the `x-voxd-ignored` header. */
  ignored: string[];
}

/**
 * Turns the fields into the engine's request. Fields that change what is said or who says it (language, voice,
 * ref_audio) are refused when the model cannot honour them; style instructions are only a wish, so a model without
 * style control speaks anyway and the reply says it ignored them (vendor clients send them by default).
 */
async function synthesisRequest(fields: SpeechFields, model: TtsModel, { config }: RouteContext, signal: AbortSignal): Promise<PreparedRequest> {
  const { capabilities } = model;
  const languages = capabilities.languages;
  if (languages && !languages.includes(fields.lang_code.toLowerCase())) {
    throw new ApiError('invalid_request', `model ${model.id} does not speak lang_code '${fields.lang_code}'; it takes ${languages.join(', ')}`, {
      param: 'lang_code',
    });
  }
  if ((fields.ref_audio || fields.ref_text) && !capabilities.cloning) {
    throw new ApiError('invalid_request', `model ${model.id} cannot clone a voice from ref_audio`, { param: fields.ref_audio ? 'ref_audio' : 'ref_text' });
  }
  const request: Omit<SynthesisRequest, 'text'> = { voice: resolveVoice(model, fields.voice), speed: fields.speed, language: fields.lang_code.toLowerCase() };
  const ignored: string[] = [];
  const instructions = fields.instructions ?? fields.instruct;
  if (instructions && capabilities.instructions) request.instructions = instructions;
  else if (instructions) ignored.push(fields.instructions ? 'instructions' : 'instruct');
  // sampling settings reach only engines that sample; the others ignore them (documented per engine)
  if (capabilities.sampling && fields.temperature != null) request.temperature = fields.temperature;
  if (capabilities.sampling && fields.max_tokens != null) request.maxTokens = fields.max_tokens;
  if (capabilities.sampling && fields.seed != null) request.seed = fields.seed;
  if (fields.ref_audio) {
    const samples = await loadReferenceAudio(fields.ref_audio, {
      sampleRate: model.sampleRate,
      roots: config.modelsDirs,
      maxSeconds: config.maxAudioSeconds,
      maxBytes: config.maxUploadMb * 1024 * 1024,
      signal,
    });
    request.reference = fields.ref_text ? { samples, text: fields.ref_text } : { samples };
  }
  return { request, ignored };
}

async function speak(req: HttpRequest, reply: HttpReply, context: RouteContext, synthesizer: Synthesizer): Promise<void> {
  const { config, registry, logger } = context;
  const fields = await req.json(speechSchema, config.maxJsonKb * 1024);
  const pieces = splitSentences(fields.input);
  if (pieces.length === 0) throw new ApiError('invalid_request', 'input is empty: there is no text to speak', { param: 'input' });
  if (fields.input.length > config.maxInputChars) {
    throw new ApiError('invalid_request', `input is ${fields.input.length} characters; the limit is ${config.maxInputChars} (--max-input-chars)`, {
      param: 'input',
    });
  }

  const lease = await registry.acquire<TtsModel>(fields.model, 'tts');
  try {
    const model = lease.model;
    const { request: base, ignored } = await synthesisRequest(fields, model, context, req.signal);
    const requests = pieces.map((text) => ({ ...base, text }));
    const format = fields.response_format;
    const headers: Record<string, string> = {
      'content-type': contentTypeOf(format),
      'content-disposition': `attachment; filename=speech.${fileExtensionOf(format)}`,
    };
    if (ignored.length > 0) {
      headers['x-voxd-ignored'] = ignored.join(', ');
      logger.info({ reqId: req.id, model: model.id, ignored }, `model ${model.id} cannot honour ${ignored.join(', ')}; speaking without`);
    }

    if (fields.stream || fields.stream_format === 'sse') {
      await streamSpeech(reply, {
        model,
        requests,
        format,
        headers,
        sse: fields.stream_format === 'sse',
        interval: fields.streaming_interval,
        synthesizer,
        context,
        signal: req.signal,
        inputChars: fields.input.length,
      });
      return;
    }
    const audio = await synthesizer.speak(model, requests, { signal: req.signal });
    const body = await encodeAudio(concatSamples(audio), { format, sampleRate: model.sampleRate });
    for (const [name, value] of Object.entries(headers)) reply.header(name, value);
    reply.send(body);
  } catch (error) {
    if (error instanceof AbortedError || req.signal.aborted) return reply.abort();
    throw error;
  } finally {
    lease.release();
  }
}

interface StreamJob {
  model: TtsModel;
  requests: SynthesisRequest[];
  format: AudioFormat;
  headers: Record<string, string>;
  sse: boolean;
  /** Seconds of audio per chunk sent. */
  interval: number;
  synthesizer: Synthesizer;
  context: RouteContext;
  signal: AbortSignal;
  inputChars: number;
}

/**
 * Speaks the pieces in order into one streaming encoder. A chunk goes out once `interval` seconds of audio are
 * pending, and after the first piece so the client hears something as early as possible.
 */
async function streamSpeech(reply: HttpReply, job: StreamJob): Promise<void> {
  const { model, format, sse, synthesizer, signal } = job;
  const encoder = createEncoder({ format, sampleRate: model.sampleRate, streaming: true });
  const ignored = job.headers['x-voxd-ignored'];
  reply.startStream(
    200,
    sse
      ? { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', ...(ignored ? { 'x-voxd-ignored': ignored } : {}) }
      : { ...job.headers, 'cache-control': 'no-cache' },
  );
  const send = async (bytes: Buffer): Promise<void> => {
    if (bytes.length === 0) return;
    await reply.write(sse ? `data: ${JSON.stringify({ type: 'speech.audio.delta', audio: bytes.toString('base64') })}\n\n` : bytes);
  };
  let pending: Float32Array[] = [];
  let pendingSamples = 0;
  // encoder calls and writes run one after another, in the order the audio came
  let chain = Promise.resolve();
  const flush = (): Promise<void> => {
    if (pendingSamples === 0) return chain;
    const samples = concatSamples(pending);
    pending = [];
    pendingSamples = 0;
    chain = chain.then(async () => send(await encoder.write(samples)));
    chain.catch(() => undefined); // handled where the stream awaits the chain
    return chain;
  };
  try {
    const chunkSamples = Math.max(1, Math.round(job.interval * model.sampleRate));
    await synthesizer.speak(model, job.requests, {
      signal,
      onAudio: (samples) => {
        pending.push(samples);
        pendingSamples += samples.length;
        if (pendingSamples >= chunkSamples) void flush();
      },
      onPieceEnd: (index) => {
        if (index === 0) void flush();
      },
    });
    await flush();
    await send(await encoder.end());
    if (sse) {
      await reply.write(
        `data: ${JSON.stringify({ type: 'speech.audio.done', usage: { input_tokens: job.inputChars, output_tokens: 0, total_tokens: job.inputChars } })}\n\n`,
      );
    }
    reply.end();
  } catch (error) {
    await chain.catch(() => undefined);
    if (reply.aborted || signal.aborted) return;
    job.context.logger.warn({ err: error }, 'speech failed after streaming began');
    if (!sse) return reply.abort(); // a binary stream can only be cut: the client sees a truncated transfer
    await reply.write(`data: ${JSON.stringify(errorEnvelope(ApiError.from(error)))}\n\n`);
    reply.end();
  }
}
