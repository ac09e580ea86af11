/**
 * The abort mix: what 8-10 impatient clients do to a server's batched engines at once. Whisper transcriptions (some
 * streamed as SSE), Pocket TTS and Qwen3-TTS speech in several formats (some streamed), and live Whisper sessions
 * on /v1/realtime, a share of them abandoned by their client at a random moment (a request aborted, a socket dropped
 * mid-audio). bench/abort-mix.ts runs it for minutes and prints what came back; the fuzz target `abort-mix` runs
 * short random mixes and checks that every request is answered and the engines are idle again afterwards.
 */
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import WebSocket from 'ws';
import { envelopeCode } from './hostile.js';
import { JFK_WAV, ROOT, SHARED } from './paths.js';
import { pcm16, readWavMono } from './wav.js';
import { whisperTestModel } from './whisper-models.js';

/** The random-weight models the mix runs on (scripts/make-*-test-model.mjs), as model IDs (their paths). */
export interface MixModels {
  whisper: string;
  pocket: string;
  qwen: string;
}

export async function mixModels(whisperSize: 'tiny' | 'base' = 'base'): Promise<MixModels> {
  const generator = (await import(pathToFileURL(path.join(ROOT, 'scripts', 'make-tts-test-model.mjs')).href)) as {
    makeTtsTestModel(options: { arch: string; size: 'tiny' }): Promise<{ dir: string }>;
  };
  return {
    whisper: await whisperTestModel({ size: whisperSize, en: whisperSize === 'base' }),
    pocket: (await generator.makeTtsTestModel({ arch: 'pockettts', size: 'tiny' })).dir,
    qwen: (await generator.makeTtsTestModel({ arch: 'qwen3tts', size: 'tiny' })).dir,
  };
}

export const MIX_KINDS = ['transcription', 'transcription-stream', 'speech', 'speech-stream', 'live'] as const;
export type MixKind = (typeof MIX_KINDS)[number];
const TRANSCRIPT_FORMATS = ['json', 'verbose_json', 'text', 'srt'] as const;
const SPEECH_FORMATS = ['mp3', 'wav', 'pcm', 'opus', 'flac'] as const;
const TEXTS = [
  'Hello world.',
  'The quick brown fox jumps over the lazy dog. It was a sunny day.',
  'One two three four five six seven. Eight nine ten.',
  'Ask not what your country can do for you.',
];
const CLIPS = [JFK_WAV, path.join(SHARED, 'audio', 'speech', 'librivox-0870.wav'), path.join(SHARED, 'audio', 'speech', 'librivox-0890.wav')];
/** A live session streams the first seconds of a clip, in appends of this many milliseconds. */
const APPEND_MS = 100;

export interface MixRequest {
  kind: MixKind;
  /** Speech: Pocket TTS or Qwen3-TTS (transcriptions and live sessions use the Whisper model). */
  voice: 'pocket' | 'qwen';
  /** An index into the formats of the kind (transcript or audio formats). */
  format: number;
  /** An index into the texts (speech) or the clips (transcriptions and live sessions). */
  content: number;
  /** When the client gives up: it aborts the request or drops the socket after this many ms; null when it waits. */
  abortAfterMs: number | null;
  /**
   * `max_tokens` of a transcription; absent: none, and random weights decode every window to its token limit at every
   * temperature of the fallback (a runaway, for the job time limit to stop).
   */
  maxTokens?: number;
}

/** What one request got. `no-answer`: nothing within the bound while the client still waited. */
export interface MixOutcome {
  request: MixRequest;
  result: 'ok' | 'aborted' | 'error' | 'no-answer';
  /** The HTTP status (0 for a live session or when none came), and the error envelope's code when there was one. */
  status: number;
  code: string | null;
  ms: number;
}

/** A request of the mix; `abortShare` of them are abandoned between 0 and `maxAbortMs`. */
export function randomMixRequest(random: () => number, abortShare: number, maxAbortMs = 3000): MixRequest {
  const pick = (n: number): number => Math.floor(random() * n);
  return {
    kind: MIX_KINDS[pick(MIX_KINDS.length)] as MixKind,
    voice: random() < 0.5 ? 'pocket' : 'qwen',
    format: pick(SPEECH_FORMATS.length),
    content: pick(TEXTS.length),
    abortAfterMs: random() < abortShare ? Math.round(random() * maxAbortMs) : null,
  };
}

export interface MixOptions {
  base: string;
  models: MixModels;
  /** A request unanswered this long while its client waits is a `no-answer`. */
  boundMs: number;
  /** Seconds of a clip a live session streams, and how many times faster than real time (1: paced as a microphone). */
  liveSeconds: number;
  livePace: number;
}

/** Runs one request of the mix to its end and reports what came back. */
export async function runMixRequest(request: MixRequest, options: MixOptions): Promise<MixOutcome> {
  const started = performance.now();
  const outcome = (result: MixOutcome['result'], status = 0, code: string | null = null): MixOutcome => ({
    request,
    result,
    status,
    code,
    ms: performance.now() - started,
  });
  if (request.kind === 'live') return liveSession(request, options, outcome);
  const client = new AbortController();
  const gaveUp = request.abortAfterMs === null ? undefined : setTimeout(() => client.abort(), request.abortAfterMs);
  const bound = setTimeout(() => client.abort(new Error('no answer')), options.boundMs);
  try {
    const response = await fetch(`${options.base}${request.kind.startsWith('speech') ? '/v1/audio/speech' : '/v1/audio/transcriptions'}`, {
      method: 'POST',
      signal: client.signal,
      ...httpBody(request, options.models),
    });
    const body = Buffer.from(await response.arrayBuffer());
    if (response.status !== 200) return outcome('error', response.status, envelopeCode(body));
    // a stream that began with 200 and then failed ends with an error event (docs/api.md)
    const streamedError = request.kind === 'transcription-stream' ? /"error":\{[^}]*"code":"([^"]*)"/.exec(body.toString('utf8')) : null;
    return streamedError ? outcome('error', 200, streamedError[1] ?? null) : outcome('ok', 200);
  } catch (error) {
    if (client.signal.reason instanceof Error && client.signal.reason.message === 'no answer') return outcome('no-answer');
    if (client.signal.aborted) return outcome('aborted');
    return outcome('error', 0, error instanceof Error ? error.message : String(error));
  } finally {
    clearTimeout(gaveUp);
    clearTimeout(bound);
  }
}

function httpBody(request: MixRequest, models: MixModels): { body: FormData | string; headers?: Record<string, string> } {
  if (request.kind.startsWith('speech')) {
    return {
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        model: request.voice === 'pocket' ? models.pocket : models.qwen,
        input: TEXTS[request.content % TEXTS.length],
        response_format: SPEECH_FORMATS[request.format % SPEECH_FORMATS.length],
        stream: request.kind === 'speech-stream',
      }),
    };
  }
  const form = new FormData();
  form.append('file', new Blob([new Uint8Array(clip(request.content).wav)]), 'clip.wav');
  form.append('model', models.whisper);
  form.append('response_format', TRANSCRIPT_FORMATS[request.format % TRANSCRIPT_FORMATS.length] as string);
  if (request.kind === 'transcription-stream') form.append('stream', 'true');
  if (request.maxTokens) form.append('max_tokens', String(request.maxTokens));
  return { body: form };
}

/** A clip's file, and its samples for live sessions; read once each. */
const clipCache = new Map<number, { wav: Buffer; samples: Float32Array; rate: number }>();
function clip(index: number): { wav: Buffer; samples: Float32Array; rate: number } {
  const file = CLIPS[index % CLIPS.length] as string;
  let found = clipCache.get(index % CLIPS.length);
  if (!found) {
    const { sampleRate, samples } = readWavMono(file);
    found = { wav: fs.readFileSync(file), samples, rate: sampleRate };
    clipCache.set(index % CLIPS.length, found);
  }
  return found;
}

/**
 * A /v1/realtime session: configure, append the clip's first `liveSeconds` as PCM16 at `livePace` times real time,
 * commit, and wait for the transcript; a client that gives up drops the socket when its time comes.
 */
async function liveSession(
  request: MixRequest,
  options: MixOptions,
  outcome: (result: MixOutcome['result'], status?: number, code?: string | null) => MixOutcome,
): Promise<MixOutcome> {
  const { samples, rate } = clip(request.content);
  const seconds = Math.min(options.liveSeconds, samples.length / rate);
  const audio = pcm16(samples.subarray(0, Math.round(seconds * rate)));
  const socket = new WebSocket(`${options.base.replace(/^http/, 'ws')}/v1/realtime?intent=transcription`);
  const started = performance.now();
  let settle: (outcome: MixOutcome) => void = () => undefined;
  const done = new Promise<MixOutcome>((resolve) => (settle = resolve));
  let finished = false;
  const finish = (result: MixOutcome): void => {
    if (finished) return;
    finished = true;
    clearTimeout(bound);
    clearTimeout(gaveUp);
    socket.terminate();
    settle(result);
  };
  const bound = setTimeout(() => finish(outcome('no-answer')), options.boundMs + seconds * 1000);
  const gaveUp = request.abortAfterMs === null ? undefined : setTimeout(() => finish(outcome('aborted')), request.abortAfterMs);
  socket.on('message', (data) => {
    const event = JSON.parse(String(data)) as { type: string; error?: { code?: string } };
    if (event.type === 'conversation.item.input_audio_transcription.completed') finish(outcome('ok'));
    else if (event.type === 'error') finish(outcome('error', 0, event.error?.code ?? null));
  });
  socket.on('error', () => finish(outcome('error', 0, 'socket_error')));
  socket.on('close', () => finish(outcome('error', 0, 'closed')));
  socket.on('open', () => {
    void (async () => {
      socket.send(
        JSON.stringify({
          type: 'session.update',
          session: {
            type: 'transcription',
            audio: { input: { format: { type: 'audio/pcm', rate }, transcription: { model: options.models.whisper }, turn_detection: null } },
          },
        }),
      );
      const step = Math.round((rate * APPEND_MS) / 1000) * 2;
      for (let at = 0; at < audio.length && !finished; at += step) {
        socket.send(JSON.stringify({ type: 'input_audio_buffer.append', audio: audio.subarray(at, at + step).toString('base64') }));
        const due = started + ((at / step + 1) * APPEND_MS) / options.livePace;
        await new Promise((resolve) => setTimeout(resolve, Math.max(0, due - performance.now())));
      }
      if (!finished) socket.send(JSON.stringify({ type: 'input_audio_buffer.commit' }));
    })();
  });
  return done;
}
