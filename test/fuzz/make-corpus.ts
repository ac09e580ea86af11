/**
 * Writes the seed corpora of the http-request, realtime-events and audio-file targets from the clips in
 * ../shared/audio (test/fuzz/corpus/<target>/, committed; run this again only to change the seeds):
 *
 *   npm run build:ts && node dist/test/fuzz/make-corpus.js
 *
 * The audio files in other containers than WAV are made with the ffmpeg command (test/helpers/formats.ts).
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ensureFfmpeg } from '../helpers/formats.js';
import { SHARED } from '../helpers/paths.js';
import { pcm16, readWavMono, wavBytes } from '../helpers/wav.js';
import { BOUNDARY, HTTP_CASE_FORMAT, type HttpCase } from './http-request.js';
import { multipartBytes, partHead, requestBytes, type FormPart } from './http-wire.js';
import { REALTIME_CASE_FORMAT, REALTIME_PATH, VAD_PATH, type RealtimeCase, type WsMessage } from './realtime-events.js';
import { CORPUS_DIR, type InputFormat } from './target.js';

const SPEECH = path.join(SHARED, 'audio', 'speech', 'librivox-0870.wav');
const MUSIC = path.join(SHARED, 'audio', 'music', 'loop_amen.flac');

/** `seconds` of the LibriVox clip from `start`, as mono float samples at 16 kHz. */
function speech(start: number, seconds: number): Float32Array {
  const { sampleRate, samples } = readWavMono(SPEECH);
  return samples.slice(Math.round(start * sampleRate), Math.round((start + seconds) * sampleRate));
}

/** `seconds` of `source` from 1 s in, converted by the ffmpeg command with `args` (output options, the muxer included). */
function ffmpeg(source: string, seconds: number, args: string[]): Buffer {
  // a file, not a pipe: some muxers (MP4's) seek back to write their index
  const out = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'voxd-corpus-')), 'out');
  try {
    const run = spawnSync('ffmpeg', ['-nostdin', '-v', 'error', '-ss', '1', '-t', String(seconds), '-i', source, '-map_metadata', '-1', ...args, out]);
    if (run.status !== 0) throw new Error(`ffmpeg ${args.join(' ')}: ${run.stderr.toString()}`);
    return fs.readFileSync(out);
  } finally {
    fs.rmSync(path.dirname(out), { recursive: true, force: true });
  }
}

/** Replaces the corpus of `target` with `files` (name → content). */
function writeCorpus(target: string, files: Record<string, string | Uint8Array>): void {
  const dir = path.join(CORPUS_DIR, target);
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(dir, { recursive: true });
  for (const [name, content] of Object.entries(files)) fs.writeFileSync(path.join(dir, name), content);
  console.log(`${target}: ${Object.keys(files).length} seeds in ${path.relative(process.cwd(), dir)}`);
}

function encoded<I>(format: InputFormat<I>, seeds: Record<string, I>): Record<string, string> {
  return Object.fromEntries(Object.entries(seeds).map(([name, seed]) => [`${name}.${format.extension}`, format.encode(seed)]));
}

// ---- http-request ----

function request(method: string, target: string, headers: [string, string][] = [], body: Uint8Array = new Uint8Array()): HttpCase {
  const length: [string, string][] = body.length > 0 ? [['Content-Length', String(body.length)]] : [];
  return { transport: 'uws', method, target, version: 'HTTP/1.1', headers: [['Host', 'voxd'], ...headers, ...length], body, splits: [] };
}

function json(target: string, body: unknown, headers: [string, string][] = []): HttpCase {
  return request('POST', target, [['Content-Type', 'application/json'], ...headers], Buffer.from(JSON.stringify(body)));
}

function form(target: string, file: { name: string; type: string; data: Uint8Array }, fields: [string, string][], headers: [string, string][] = []): HttpCase {
  const parts: FormPart[] = [
    { head: partHead('file', file.name, file.type), content: file.data },
    ...fields.map(([name, value]) => ({ head: partHead(name), content: Buffer.from(value) })),
  ];
  const body = multipartBytes({ boundary: BOUNDARY, parts, epilogue: new Uint8Array(), closed: true });
  return request('POST', target, [['Content-Type', `multipart/form-data; boundary=${BOUNDARY}`], ...headers], body);
}

function httpSeeds(): Record<string, HttpCase> {
  const wav = { name: 'speech.wav', type: 'audio/wav', data: wavBytes(speech(1, 1), 16000) };
  const shortWav = { ...wav, data: wavBytes(speech(1, 0.5), 16000) };
  const mp3 = { name: 'speech.mp3', type: 'audio/mpeg', data: ffmpeg(SPEECH, 0.5, ['-c:a', 'libmp3lame', '-b:a', '32k', '-f', 'mp3']) };
  const music = { name: 'loop.flac', type: 'audio/flac', data: ffmpeg(MUSIC, 0.25, ['-c:a', 'flac', '-f', 'flac']) };
  const speechRequest = json('/v1/audio/speech', { model: 'tts-1', input: 'Hello world. How are you?', voice: 'alloy' });
  return {
    healthz: request('GET', '/healthz'),
    readyz: request('GET', '/readyz'),
    metrics: request('GET', '/metrics'),
    'models-list': request('GET', '/v1/models?available=true'),
    'models-describe-builtin': request('GET', '/v1/models/sphinx'),
    'models-describe-hub': request('GET', '/v1/models/ggml-org/whisper-vad/ggml-silero-v6.2.0.bin'),
    'models-describe-alias': request('GET', '/v1/models/whisper-1', [['Authorization', 'Bearer sk-unused']]),
    'models-load-query': request('POST', '/v1/models?model_name=flite'),
    'models-load-json': json('/v1/models', { model_name: 'sphinx' }),
    'models-load-hub': request('POST', '/v1/models?model_name=ggerganov%2Fwhisper.cpp%2Fggml-base.en.bin'),
    'models-load-quant': request('POST', '/v1/models?model_name=owner/repo:Q4_K_M'),
    'models-unload': request('DELETE', '/v1/models?model_name=spectral'),
    voices: request('GET', '/v1/audio/voices?model=flite'),
    speech: speechRequest,
    'speech-wav-kal': json('/v1/audio/speech', { model: 'flite', input: 'Dr. Smith paid $12.50 on Jan. 3rd.', voice: 'kal', response_format: 'wav', speed: 2 }),
    'speech-stream-opus': json('/v1/audio/speech', {
      model: 'tts-1-hd',
      input: 'One. Two. Three.',
      voice: { id: 'awb' },
      response_format: 'opus',
      stream: true,
      streaming_interval: 0.5,
    }),
    'speech-sse': json('/v1/audio/speech', {
      model: 'gpt-4o-mini-tts',
      input: 'Streaming events.',
      voice: 'cedar',
      stream_format: 'sse',
      instructions: 'Cheerful.',
      response_format: 'aac',
    }),
    'speech-options': json('/v1/audio/speech', {
      model: 'flite',
      input: 'Hi.',
      lang_code: 'en-gb',
      response_format: 'flac',
      temperature: 0.5,
      max_tokens: 10,
      seed: 7,
      speed: 0.25,
    }),
    'speech-pcm-chunked': {
      ...speechRequest,
      headers: [
        ['Host', 'voxd'],
        ['Content-Type', 'application/json'],
        ['Transfer-Encoding', 'chunked'],
      ],
      body: chunkedJson({ model: 'tts-1', input: 'Chunked.', response_format: 'pcm' }),
    },
    transcription: form('/v1/audio/transcriptions', wav, [['model', 'whisper-1']]),
    'transcription-verbose': form('/v1/audio/transcriptions', shortWav, [
      ['model', 'sphinx'],
      ['response_format', 'verbose_json'],
      ['timestamp_granularities[]', 'word'],
      ['timestamp_granularities[]', 'segment'],
      ['include[]', 'logprobs'],
      ['language', 'en'],
      ['temperature', '0'],
      ['prompt', 'a dashwood'],
    ]),
    'transcription-stream-sse': form(
      '/v1/audio/transcriptions',
      shortWav,
      [
        ['model', 'sphinx'],
        ['stream', 'true'],
        ['chunking_strategy[type]', 'server_vad'],
        ['max_tokens', '5'],
      ],
      [
        ['Accept', 'text/event-stream'],
        ['X-Stainless-Lang', 'js'],
      ],
    ),
    'transcription-srt': form('/v1/audio/transcriptions', mp3, [
      ['model', 'gpt-4o-transcribe'],
      ['response_format', 'srt'],
      ['stream', 'false'],
      ['verbose', '1'],
    ]),
    translation: form('/v1/audio/translations', mp3, [
      ['model', 'sphinx'],
      ['response_format', 'text'],
    ]),
    separation: form('/v1/audio/separations', music, [['description', 'drums']]),
    'separation-voice': form('/v1/audio/separations', shortWav, [
      ['model', 'spectral'],
      ['description', 'background vocals'],
    ]),
    preflight: request('OPTIONS', '/v1/audio/speech', [
      ['Origin', 'http://example.com'],
      ['Access-Control-Request-Method', 'POST'],
      ['Access-Control-Request-Headers', 'content-type, authorization'],
    ]),
    'realtime-upgrade': request('GET', '/v1/realtime?model=sphinx', [
      ['Connection', 'Upgrade'],
      ['Upgrade', 'websocket'],
      ['Sec-WebSocket-Version', '13'],
      ['Sec-WebSocket-Key', 'dGhlIHNhbXBsZSBub25jZQ=='],
      ['Sec-WebSocket-Protocol', 'realtime, openai-insecure-api-key.sk-unused'],
    ]),
    pipelined: { ...request('GET', '/v1/models'), body: requestBytes(request('GET', '/healthz')) },
  };

  function chunkedJson(body: unknown): Buffer {
    const text = JSON.stringify(body);
    const half = Math.floor(text.length / 2);
    return Buffer.from([text.slice(0, half), text.slice(half)].map((piece) => `${piece.length.toString(16)}\r\n${piece}\r\n`).join('') + '0\r\n\r\n');
  }
}

// ---- realtime-events ----

/** `pcm` as input_audio_buffer.append events of `ms` milliseconds each (16 kHz). */
function appends(pcm: Buffer, ms: number): WsMessage[] {
  const bytes = (16000 * 2 * ms) / 1000;
  return Array.from({ length: Math.ceil(pcm.length / bytes) }, (_, i) => ({
    event: { type: 'input_audio_buffer.append', audio: pcm.subarray(i * bytes, (i + 1) * bytes).toString('base64') },
  }));
}

function frames(pcm: Buffer, ms: number): WsMessage[] {
  const bytes = (16000 * 2 * ms) / 1000;
  return Array.from({ length: Math.ceil(pcm.length / bytes) }, (_, i) => ({ binary: pcm.subarray(i * bytes, (i + 1) * bytes).toString('base64') }));
}

function realtimeSeeds(): Record<string, RealtimeCase> {
  const words = pcm16(speech(1, 0.5));
  // speech between silences, the trailing one longer than the VAD's default 500 ms, so a turn opens and ends
  const utterance = Buffer.concat([pcm16(new Float32Array(1600)), pcm16(speech(0.5, 0.9)), pcm16(new Float32Array(9600))]);
  const at16k = { format: { type: 'audio/pcm', rate: 16000 } };
  const base = { transport: 'uws' as const, endpoint: REALTIME_PATH, query: 'model=sphinx', headers: {}, protocols: [] };
  const vad = { ...base, endpoint: VAD_PATH, query: '' };
  return {
    'manual-commit': {
      ...base,
      messages: [
        {
          event: {
            type: 'session.update',
            session: { type: 'transcription', audio: { input: { ...at16k, transcription: { model: 'sphinx', language: 'en' }, turn_detection: null } } },
          },
        },
        ...appends(words, 100),
        { event: { type: 'input_audio_buffer.commit', event_id: 'commit-1' } },
      ],
    },
    'server-vad': {
      ...base,
      query: '',
      protocols: ['realtime', 'openai-insecure-api-key.sk-unused'],
      messages: [
        {
          event: {
            type: 'session.update',
            session: {
              type: 'transcription',
              audio: {
                input: {
                  ...at16k,
                  transcription: { model: 'gpt-4o-transcribe', prompt: 'dashwood' },
                  turn_detection: { type: 'server_vad', threshold: 0.5, prefix_padding_ms: 300, silence_duration_ms: 300 },
                },
              },
            },
          },
        },
        ...appends(utterance, 200),
      ],
    },
    beta: {
      ...base,
      headers: { 'OpenAI-Beta': 'realtime=v1' },
      messages: [
        {
          event: {
            type: 'transcription_session.update',
            session: { input_audio_transcription: { model: 'sphinx', language: 'en', prompt: '' }, turn_detection: null },
          },
        },
        ...appends(words, 200),
        { event: { type: 'input_audio_buffer.commit' } },
      ],
    },
    'default-rate-clear': {
      ...base,
      protocols: ['realtime', 'openai-beta.realtime-v1'],
      messages: [...appends(words.subarray(0, 6400), 100), { event: { type: 'input_audio_buffer.clear' } }, { event: { type: 'input_audio_buffer.commit' } }],
    },
    'bad-events': {
      ...base,
      messages: [
        { event: { type: 'input_audio_buffer.append', audio: 'not base64!', event_id: 'a' } },
        { event: { type: 'input_audio_buffer.append', audio: 'AAE=' } },
        { event: { type: 'input_audio_buffer.append' } },
        { event: { type: 'session.update', session: { audio: { input: { format: { rate: 999 }, turn_detection: { type: 'semantic_vad' } } } } } },
        { event: { type: 'response.create' } },
        { event: [] },
        { event: 'text' },
        { text: '{"type": "session.update", ' },
        { binary: words.subarray(0, 320).toString('base64') },
      ],
    },
    'no-model': { ...base, query: '', messages: [...appends(words.subarray(0, 3200), 100), { event: { type: 'input_audio_buffer.commit' } }] },
    'vad-config': {
      ...vad,
      messages: [{ event: { model: 'sphinx', language: 'en', sample_rate: 16000, streaming: true } }, ...frames(utterance, 200), { event: { action: 'stop' } }],
    },
    'vad-defaults': { ...vad, messages: [...frames(utterance.subarray(0, 25_601), 100)] },
    'vad-8k': {
      ...vad,
      messages: [
        { event: { sample_rate: 8000, streaming: false } },
        ...frames(utterance.subarray(0, 12_801), 50),
        { text: 'not json' },
        { event: { model: 'x' } },
      ],
    },
    'vad-unknown-model': { ...vad, messages: [{ event: { model: 'owner/repo', language: 'fr' } }, ...frames(words.subarray(0, 3200), 100)] },
  };
}

// ---- audio-file ----

/** Short files in every container family the decoder reads: a few KB each. */
function audioSeeds(): Record<string, Uint8Array> {
  return {
    's16.wav': wavBytes(speech(1, 0.25), 16000),
    'u8-8k.wav': ffmpeg(SPEECH, 0.25, ['-ar', '8000', '-c:a', 'pcm_u8', '-f', 'wav']),
    'f32.wav': ffmpeg(SPEECH, 0.1, ['-c:a', 'pcm_f32le', '-f', 'wav']),
    'stereo-48k.wav': ffmpeg(MUSIC, 0.05, ['-ar', '48000', '-c:a', 'pcm_s16le', '-f', 'wav']),
    'speech.mp3': ffmpeg(SPEECH, 0.5, ['-c:a', 'libmp3lame', '-b:a', '32k', '-f', 'mp3']),
    'stereo.mp3': ffmpeg(MUSIC, 0.3, ['-c:a', 'libmp3lame', '-b:a', '64k', '-f', 'mp3']),
    'speech.flac': ffmpeg(SPEECH, 0.25, ['-c:a', 'flac', '-f', 'flac']),
    'stereo.flac': ffmpeg(MUSIC, 0.1, ['-c:a', 'flac', '-f', 'flac']),
    'vorbis.ogg': ffmpeg(SPEECH, 0.5, ['-c:a', 'libvorbis', '-q:a', '0', '-f', 'ogg']),
    'speech.opus': ffmpeg(SPEECH, 0.5, ['-c:a', 'libopus', '-b:a', '16k', '-f', 'ogg']),
    'opus.webm': ffmpeg(SPEECH, 0.4, ['-c:a', 'libopus', '-b:a', '16k', '-f', 'webm']),
    'aac.m4a': ffmpeg(SPEECH, 0.4, ['-c:a', 'aac', '-b:a', '24k', '-movflags', '+faststart', '-f', 'ipod']),
    'adts.aac': ffmpeg(SPEECH, 0.4, ['-c:a', 'aac', '-b:a', '24k', '-f', 'adts']),
    'speech.aiff': ffmpeg(SPEECH, 0.1, ['-c:a', 'pcm_s16be', '-f', 'aiff']),
    'mulaw.au': ffmpeg(SPEECH, 0.1, ['-ar', '8000', '-c:a', 'pcm_mulaw', '-f', 'au']),
    'speech.caf': ffmpeg(SPEECH, 0.1, ['-c:a', 'pcm_s16le', '-f', 'caf']),
    'speech.wv': ffmpeg(SPEECH, 0.25, ['-c:a', 'wavpack', '-f', 'wv']),
    'speech.ac3': ffmpeg(SPEECH, 0.2, ['-c:a', 'ac3', '-b:a', '64k', '-f', 'ac3']),
  };
}

const missing = ensureFfmpeg();
if (missing) throw new Error(missing);
writeCorpus('http-request', encoded(HTTP_CASE_FORMAT, httpSeeds()));
writeCorpus('realtime-events', encoded(REALTIME_CASE_FORMAT, realtimeSeeds()));
writeCorpus('audio-file', audioSeeds());
