/**
 * One Wyoming connection (docs/wyoming.md): `describe` → `info`; speech-to-text (`transcribe`, `audio-start`,
 * `audio-chunk`s, `audio-stop` → `transcript-start`, `transcript-chunk`s, `transcript`, `transcript-stop`);
 * text-to-speech, whole (`synthesize` → one `audio-start`, `audio-chunk`s, `audio-stop`) or streamed (`synthesize-start`,
 * `synthesize-chunk`s → one audio group per sentence as soon as it is complete, the compatibility `synthesize`
 * ignored, `synthesize-stop` → `synthesize-stopped`). Work goes through the same services, scheduler and limits as the
 * HTTP API. What cannot be done is an `error {text, code}`, after which the connection is closed.
 */
import type { Socket } from 'node:net';
import type { TtsModel } from '../engines/types.js';
import { ApiError } from '../errors.js';
import type { Logger } from '../logger.js';
import type { UploadBudget } from '../services/audio/upload-budget.js';
import type { ModelRegistry } from '../services/registry.js';
import { completeSentences } from '../services/tts/sentences.js';
import { speechRequest, type SpeechService } from '../services/tts/speech.js';
import type { Transcriber } from '../services/stt/transcriber.js';
import { encodeEvent, EventReader, WyomingProtocolError, type EventLimits, type WyomingEvent } from './events.js';
import { wyomingInfo, wyomingVoices } from './info.js';

export interface WyomingServices {
  registry: ModelRegistry;
  transcriber: Transcriber;
  speech: SpeechService;
  uploads: UploadBudget;
  logger: Logger;
  /** The models the programs serve (--wyoming-stt-model, --wyoming-tts-model); null: that program is not offered. */
  sttModel: string | null;
  ttsModel: string | null;
  version: string;
  limits: EventLimits & {
    /** --max-audio-seconds: the longest audio a transcription takes. */
    maxAudioSeconds: number;
    /** A connection on which nothing is sent either way for this long is closed. */
    idleMs: number;
  };
}

/** The PCM format of an `audio-start`/`audio-chunk`. */
interface PcmFormat {
  rate: number;
  width: number;
  channels: number;
}

/** How far the text given to a streaming synthesis has been spoken. */
interface StreamingSynthesis {
  voice: unknown;
  pending: string;
  /** The sentences spoken so far, in order: each waits for the one before. */
  spoken: Promise<void>;
}

/** Seconds of audio per `audio-chunk` of synthesized speech. */
const SPEECH_CHUNK_SECONDS = 0.5;
/** Transcripts of the text given in `transcribe.language` tags: `en_US` → `en`. */
const BASE_LANGUAGE = /^([a-z]{2,3})(?:[-_].*)?$/i;

export class WyomingConnection {
  private readonly reader: EventReader;
  private readonly controller = new AbortController();
  /** Events are handled one after another, in order. */
  private queue: Promise<void> = Promise.resolve();
  private transcription: { model: string; language: string | null; format: PcmFormat | null; chunks: Buffer[]; bytes: number } | null = null;
  private synthesis: StreamingSynthesis | null = null;
  /** Rearmed (refreshed) by every event either way: one timer for the connection's life. */
  private readonly idle: NodeJS.Timeout;
  /** Events being handled and sentences being spoken: while any is, the connection is not idle. */
  private working = 0;
  private closed = false;

  constructor(
    private readonly socket: Socket,
    private readonly services: WyomingServices,
  ) {
    this.reader = new EventReader(services.limits);
    socket.on('data', (chunk: Buffer) => this.receive(chunk));
    socket.on('close', () => this.close());
    socket.on('error', () => this.close());
    const { idleMs } = services.limits;
    // a connection at work (a transcription waiting for its turn, a long synthesis) is not idle
    const timedOut = (): void => {
      if (this.working > 0) this.idle.refresh();
      else this.fail(new ApiError('request_timeout', `nothing was sent either way for ${idleMs / 1000} s (--wyoming-idle-timeout)`));
    };
    this.idle = setTimeout(timedOut, idleMs).unref();
  }

  private receive(chunk: Buffer): void {
    this.touch();
    let events: WyomingEvent[];
    try {
      events = this.reader.push(chunk);
    } catch (error) {
      this.fail(error);
      return;
    }
    for (const event of events) {
      this.queue = this.queue.then(() => (this.closed ? undefined : this.busy(() => this.handle(event)))).catch((error: unknown) => this.fail(error));
    }
  }

  private async handle(event: WyomingEvent): Promise<void> {
    switch (event.type) {
      case 'describe':
        return this.send('info', this.info());
      case 'ping':
        return this.send('pong', typeof event.data.text === 'string' ? { text: event.data.text } : {});
      // the reference implementation spelled it "transcibe" before 1.4
      case 'transcribe':
      case 'transcibe':
        return this.startTranscription(event.data);
      case 'audio-start':
        return this.audioStart(event.data);
      case 'audio-chunk':
        return this.audioChunk(event);
      case 'audio-stop':
        return this.audioStop();
      case 'synthesize':
        // Home Assistant sends the whole text once more inside a stream, for servers that do not stream: not twice
        if (this.synthesis) return;
        return this.speak(requiredText(event.data), event.data.voice);
      case 'synthesize-start':
        this.synthesis = { voice: event.data.voice, pending: '', spoken: Promise.resolve() };
        return;
      case 'synthesize-chunk':
        return this.streamText(requiredText(event.data));
      case 'synthesize-stop':
        return this.stopStream();
      default:
        this.services.logger.debug({ type: event.type }, 'wyoming: an event voxd does not serve, ignored');
    }
  }

  /** `info` from what is loaded: a describe is answered at once (Home Assistant waits 1 s). */
  private info(): Record<string, unknown> {
    const { registry, sttModel, ttsModel, version } = this.services;
    const program = (id: string | null) => (id === null ? null : { id, model: registry.peek(id) });
    return wyomingInfo(version, program(sttModel), program(ttsModel));
  }

  // ---- speech-to-text ----

  private startTranscription(data: Record<string, unknown>): void {
    const model = optionalString(data.name, 'transcribe.name') ?? this.services.sttModel;
    if (model === null) throw new ApiError('invalid_request', 'this server offers no speech-to-text over Wyoming (--wyoming-stt-model)');
    const tag = optionalString(data.language, 'transcribe.language');
    const language = tag === null ? null : (BASE_LANGUAGE.exec(tag)?.[1]?.toLowerCase() ?? tag);
    this.transcription = { model, language, format: null, chunks: [], bytes: 0 };
  }

  private audioStart(data: Record<string, unknown>): void {
    // audio without a transcribe first: transcribed with the defaults, as the reference servers do
    if (!this.transcription) this.startTranscription({});
    const transcription = this.transcription!;
    transcription.format = pcmFormat(data, 'audio-start');
  }

  private audioChunk(event: WyomingEvent): void {
    const transcription = this.transcription;
    if (!transcription?.format) throw new ApiError('invalid_request', 'audio-chunk before audio-start');
    const format = pcmFormat(event.data, 'audio-chunk');
    if (format.rate !== transcription.format.rate || format.width !== transcription.format.width || format.channels !== transcription.format.channels) {
      throw new ApiError('invalid_request', 'an audio-chunk changes the format its audio-start gave');
    }
    const payload = event.payload ?? Buffer.alloc(0);
    if (payload.length % (format.width * format.channels) !== 0) throw new ApiError('invalid_audio', 'an audio-chunk holds a partial sample frame');
    const limit = this.services.limits.maxAudioSeconds * format.rate * format.width * format.channels;
    if (transcription.bytes + payload.length > limit) {
      throw new ApiError('invalid_audio', `the audio is longer than ${this.services.limits.maxAudioSeconds} s (--max-audio-seconds)`);
    }
    transcription.chunks.push(payload);
    transcription.bytes += payload.length;
  }

  private async audioStop(): Promise<void> {
    const transcription = this.transcription;
    this.transcription = null;
    if (!transcription?.format || transcription.bytes === 0) return this.send('transcript', { text: '' });
    const { transcriber, uploads } = this.services;
    using upload = uploads.open();
    const wav = pcmWav(Buffer.concat(transcription.chunks), transcription.format);
    upload.admit(wav.length);
    upload.hold(wav);
    using prepared = await transcriber.prepare({
      model: transcription.model,
      file: upload,
      language: transcription.language,
      task: 'transcribe',
      prompt: null,
      wordTimestamps: false,
      signal: this.controller.signal,
    });
    let started = false;
    for await (const event of prepared.events()) {
      if (event.type === 'segment' && event.segment.text.trim()) {
        if (!started) await this.send('transcript-start', { language: event.language });
        started = true;
        await this.send('transcript-chunk', { text: event.segment.text });
      } else if (event.type === 'done') {
        await this.send('transcript', { text: event.result.text.trim(), language: event.result.language });
        if (started) await this.send('transcript-stop');
      }
    }
  }

  // ---- text-to-speech ----

  private streamText(text: string): void {
    const synthesis = this.synthesis;
    if (!synthesis) throw new ApiError('invalid_request', 'synthesize-chunk before synthesize-start');
    const { complete, rest } = completeSentences(synthesis.pending + text);
    synthesis.pending = rest;
    if (complete.trim()) this.speakInTurn(synthesis, complete);
  }

  private async stopStream(): Promise<void> {
    const synthesis = this.synthesis;
    if (!synthesis) throw new ApiError('invalid_request', 'synthesize-stop before synthesize-start');
    if (synthesis.pending.trim()) this.speakInTurn(synthesis, synthesis.pending);
    await synthesis.spoken;
    this.synthesis = null;
    await this.send('synthesize-stopped');
  }

  /** Speaks `text` after what the stream has spoken so far; the events go on being read meanwhile. */
  private speakInTurn(synthesis: StreamingSynthesis, text: string): void {
    synthesis.spoken = synthesis.spoken.then(() => this.busy(() => this.speak(text, synthesis.voice)));
    // a failure is sent and closes the connection; the stop that waits for it then finds it closed
    synthesis.spoken.catch((error: unknown) => this.fail(error));
  }

  /**
   * `text` as one audio group: `audio-start`, the audio in chunks as it is synthesized (the first before the rest is
   * spoken), `audio-stop`.
   */
  private async speak(text: string, voice: unknown): Promise<void> {
    const { speech, ttsModel } = this.services;
    if (ttsModel === null) throw new ApiError('invalid_request', 'this server offers no text-to-speech over Wyoming (--wyoming-tts-model)');
    const { name, language } = await this.chooseVoice(ttsModel, voice);
    using prepared = await speech.prepare(speechRequest(ttsModel, text, { voice: name, language }), this.controller.signal);
    const format = { rate: prepared.sampleRate, width: 2, channels: 1 };
    await this.send('audio-start', format);
    for await (const pcm of prepared.stream(SPEECH_CHUNK_SECONDS)) await this.send('audio-chunk', format, pcm);
    await this.send('audio-stop');
  }

  /**
   * The voice a `synthesize` names (`{name, speaker}`, or `{language}` alone) as the model's voice and `lang_code`:
   * by name; else the first voice of that language; else the model's default.
   */
  private async chooseVoice(ttsModel: string, voice: unknown): Promise<{ name: string | null; language: string }> {
    const fields = voice && typeof voice === 'object' ? (voice as Record<string, unknown>) : {};
    const name = optionalString(fields.name, 'voice.name');
    const tag = optionalString(fields.language, 'voice.language');
    const lease = await this.services.registry.acquire(ttsModel, 'tts', this.controller.signal);
    try {
      const model = lease.model as TtsModel;
      const voices = wyomingVoices(model);
      const chosen =
        name !== null ? voices.find((v) => v.name === name) : tag !== null ? voices.find((v) => v.languages.some((l) => sameLanguage(l, tag))) : null;
      if (name !== null && !chosen)
        throw new ApiError('invalid_request', `unknown voice '${name}'; voices: ${voices.map((v) => v.name).join(', ')}`, { param: 'voice' });
      if (tag !== null && !chosen) throw new ApiError('invalid_request', `no voice speaks ${tag}`, { param: 'voice' });
      const own = chosen ? model.voices.find((v) => v.id === chosen.name)?.language : undefined;
      return { name: chosen?.name ?? null, language: own ?? 'a' };
    } finally {
      lease.release();
    }
  }

  // ---- the connection ----

  private async send(type: string, data: Record<string, unknown> = {}, payload: Buffer | null = null): Promise<void> {
    if (this.closed) return;
    this.touch();
    if (!this.socket.write(encodeEvent(type, data, payload))) {
      await new Promise<void>((resolve) => {
        const done = (): void => {
          this.socket.off('drain', done);
          this.socket.off('close', done);
          resolve();
        };
        this.socket.on('drain', done);
        this.socket.on('close', done);
      });
    }
  }

  /** What cannot be done: an `error` event, then the connection closed (Home Assistant waits otherwise). */
  private fail(error: unknown): void {
    if (this.closed) return;
    const apiError = error instanceof WyomingProtocolError ? new ApiError('invalid_request', error.message) : ApiError.from(error);
    if (apiError.status >= 500) this.services.logger.warn({ err: error }, 'wyoming: request failed');
    const socket = this.socket;
    this.close(false);
    // the error goes out whole, then the connection ends whether or not the client closes its side
    socket.end(encodeEvent('error', { text: apiError.message, code: apiError.code }), () => socket.destroy());
  }

  /**
   * Stops the connection's work; `drop` (shutting down, the client gone) closes its socket at once, without
   * waiting for a client that keeps its side open.
   */
  close(drop = true): void {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.idle);
    this.controller.abort();
    if (drop) this.socket.destroy();
  }

  private async busy(work: () => Promise<void>): Promise<void> {
    this.working++;
    try {
      await work();
    } finally {
      this.working--;
      this.touch();
    }
  }

  private touch(): void {
    if (!this.closed) this.idle.refresh();
  }
}

/** A required `text` field. */
function requiredText(data: Record<string, unknown>): string {
  if (typeof data.text !== 'string') throw new ApiError('invalid_request', 'text is required and must be a string', { param: 'text' });
  return data.text;
}

/** An optional string field: absent or null is null. */
function optionalString(value: unknown, field: string): string | null {
  if (value === undefined || value === null || value === '') return null;
  if (typeof value !== 'string') throw new ApiError('invalid_request', `${field} must be a string`, { param: field });
  return value;
}

/** `rate`, `width` and `channels` of an audio event, checked: what a WAV of them can hold. */
function pcmFormat(data: Record<string, unknown>, event: string): PcmFormat {
  const field = (name: 'rate' | 'width' | 'channels', min: number, max: number): number => {
    const value = data[name];
    if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
      throw new ApiError('invalid_audio', `${event}.${name} must be an integer from ${min} to ${max}`, { param: name });
    }
    return value;
  };
  return { rate: field('rate', 1000, 384_000), width: field('width', 1, 4), channels: field('channels', 1, 8) };
}

/** Raw little-endian PCM as a WAV file, for the decoder every transcription goes through. */
function pcmWav(pcm: Buffer, { rate, width, channels }: PcmFormat): Buffer {
  const header = Buffer.alloc(44);
  header.write('RIFF', 0, 'ascii');
  header.writeUInt32LE(36 + pcm.length, 4);
  header.write('WAVEfmt ', 8, 'ascii');
  header.writeUInt32LE(16, 16);
  header.writeUInt16LE(1, 20); // integer PCM (8-bit unsigned, wider signed)
  header.writeUInt16LE(channels, 22);
  header.writeUInt32LE(rate, 24);
  header.writeUInt32LE(rate * width * channels, 28);
  header.writeUInt16LE(width * channels, 32);
  header.writeUInt16LE(width * 8, 34);
  header.write('data', 36, 'ascii');
  header.writeUInt32LE(pcm.length, 40);
  return Buffer.concat([header, pcm]);
}

/** Whether two language tags name the same language (`en_US` and `en-us`; `en` and `en_GB` by their base). */
function sameLanguage(a: string, b: string): boolean {
  const norm = (tag: string): string => tag.toLowerCase().replace('-', '_');
  const base = (tag: string): string => norm(tag).split('_')[0] as string;
  return norm(a) === norm(b) || (base(a) === base(b) && (!norm(a).includes('_') || !norm(b).includes('_')));
}
