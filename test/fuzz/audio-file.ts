/**
 * Fuzz target `audio-file`: mutated audio files (seeds: a few KB in each container family the decoder reads,
 * test/fuzz/corpus/audio-file/) through the native decoder, as uploads reach it: `decodeAudio` (mono at an
 * engine's rate) and `decodeAudioChannels` (the separator's: the source's rate and channels), with a length limit,
 * in a child process (audio-worker.ts) under glibc's checking allocator; a few go up to a real server instead, as a
 * transcription or a separation.
 *
 * Findings: the decoder's process or the server dies (crash); a decode or an upload does not end in time, or the
 * server stops answering /healthz (hang); a rejection other than 400 `invalid_audio`, samples that are not finite,
 * more audio than the limit, channels or rates the call does not promise, an upload answered otherwise than 200 or
 * 400 `invalid_audio`, or an error in the server's log (failure).
 */
import type { TransportName } from '../../src/http/transport.js';
import { envelopeCode } from '../helpers/hostile.js';
import { mutateBytes } from './mutators.js';
import type { Rng } from './random.js';
import type { Finding, FuzzTarget, InputFormat } from './target.js';
import { FuzzServers, TRANSPORTS } from './voxd-server.js';
import { WorkerChild } from './worker-child.js';

export interface AudioFileCase {
  /** The decoder in a child process, or an upload to a server's transcription or separation route. */
  via: 'decoder' | 'transcription' | 'separation';
  /** For the decoder: `mono` (decodeAudio at `sampleRate`) or `source` (decodeAudioChannels). */
  mode: 'mono' | 'source';
  sampleRate: number;
  maxSeconds: number;
  /** For uploads: the server's transport. */
  transport: TransportName;
  data: Uint8Array;
}

export type DecodeRequest = Pick<AudioFileCase, 'mode' | 'sampleRate' | 'maxSeconds' | 'data'>;
/** What the child (audio-worker.ts) tells of a decode: the shape of the audio, or how it was refused. */
export type DecodeReply =
  { frames: number[]; sampleRate: number; duration: number | null; nonFinite: number } | { error: string; apiCode: string | null; status: number | null };

/** The largest file generated: seeds are a few KB, and uploads go up to the server's 2 MiB. */
const MAX_FILE = 128 * 1024;
/** A decode of at most MAX_FILE bytes and at most 30 s of audio takes milliseconds; this is a hang. */
const DECODE_MS = 15_000;
/** An upload's answer: decoding, then sphinx on at most the server's 20 s, or the separator on as much. */
const UPLOAD_MS = 30_000;
const RATES = [8000, 16000, 22050, 24000, 44100, 48000];
/** Integers that headers get wrong: zero, one, sign bits, all ones. */
const INTERESTING_INTS = [0, 1, 2, 0x7f, 0x80, 0xff, 0x7fff, 0x8000, 0xffff, 0x7fffffff, 0x80000000, 0xffffffff];

export const AUDIO_FILE_FORMAT: InputFormat<AudioFileCase> = {
  extension: 'json',
  encode: ({ data, ...rest }) => `${JSON.stringify({ ...rest, data: Buffer.from(data).toString('base64') }, null, 2)}\n`,
  decode(content) {
    const { data, ...rest } = JSON.parse(content) as Omit<AudioFileCase, 'data'> & { data: string };
    return { ...rest, data: Buffer.from(data, 'base64') };
  },
};

/** One 1-, 2- or 4-byte little- or big-endian field overwritten with an interesting integer (a header's size, rate, count). */
function setInteger(rng: Rng, bytes: Uint8Array): Uint8Array {
  const width = rng.pick([1, 2, 4]);
  if (bytes.length < width) return bytes;
  const out = Buffer.from(bytes);
  const at = rng.below(out.length - width + 1);
  const value = rng.pick(INTERESTING_INTS) % 2 ** (8 * width);
  if (width === 1) out.writeUInt8(value, at);
  else if (rng.chance(0.5)) out.writeUIntLE(value, at, width);
  else out.writeUIntBE(value, at, width);
  return out;
}

export function generateAudioCase(rng: Rng, seeds: readonly Uint8Array[]): AudioFileCase {
  let data = seeds.length > 0 ? rng.pick(seeds) : new Uint8Array();
  for (let n = rng.length(8); n > 0; n--) data = rng.chance(0.25) ? setInteger(rng, data) : mutateBytes(rng, data, seeds, MAX_FILE);
  return {
    via: rng.weighted([
      [96, 'decoder'],
      [3, 'transcription'],
      [1, 'separation'],
    ] as const),
    mode: rng.chance(0.5) ? 'mono' : 'source',
    sampleRate: rng.pick(RATES),
    maxSeconds: rng.pick([0.5, 5, 30]),
    transport: rng.pick(TRANSPORTS),
    data,
  };
}

/** What a decode's reply says about the decoder: null when all is well. */
export function judgeDecode(input: DecodeRequest, reply: DecodeReply): Finding | null {
  if ('error' in reply) {
    return reply.apiCode === 'invalid_audio' && reply.status === 400 ? null : { kind: 'failure', detail: `rejected with ${reply.error}` };
  }
  const { frames, sampleRate, duration, nonFinite } = reply;
  const shape = `${frames.length} channels of ${frames.join('/')} frames at ${sampleRate} Hz`;
  const wrong = [
    frames.length < 1 || frames.length > (input.mode === 'mono' ? 1 : 2) ? 'a channel count the call does not promise' : null,
    frames.some((n) => n !== frames[0]) || !(frames[0]! > 0) ? 'channels empty or of different lengths' : null,
    !Number.isInteger(sampleRate) || sampleRate <= 0 || (input.mode === 'mono' && sampleRate !== input.sampleRate) ? 'not the rate asked for' : null,
    frames[0]! > input.maxSeconds * sampleRate ? `longer than the limit of ${input.maxSeconds} s` : null,
    duration !== null && Math.abs(duration - frames[0]! / sampleRate) > 1e-6 ? `a duration of ${duration} s` : null,
    nonFinite > 0 ? `${nonFinite} samples that are not finite` : null,
  ].find(Boolean);
  return wrong ? { kind: 'failure', detail: `${wrong}: ${shape}` } : null;
}

export function audioFileTarget(): FuzzTarget<AudioFileCase> {
  const decoder = new WorkerChild<DecodeRequest, DecodeReply, null>(new URL('./audio-worker.js', import.meta.url), 'decoder');
  const servers = new FuzzServers();

  async function upload(input: AudioFileCase): Promise<Finding | null> {
    const server = await servers.get(input.transport);
    const form = new FormData();
    form.append('file', new Blob([new Uint8Array(input.data)]), 'upload.bin');
    if (input.via === 'transcription') form.append('model', 'sphinx');
    else form.append('description', 'vocals');
    const route = input.via === 'transcription' ? '/v1/audio/transcriptions' : '/v1/audio/separations';
    let answer: Finding | null;
    try {
      const response = await fetch(server.base + route, { method: 'POST', body: form, signal: AbortSignal.timeout(UPLOAD_MS) });
      const body = Buffer.from(await response.arrayBuffer());
      const code = envelopeCode(body);
      const fine = response.status === 200 || (response.status === 400 && code === 'invalid_audio');
      answer = fine ? null : { kind: 'failure', detail: `${response.status} ${code}: ${body.toString('utf8', 0, 300)}` };
    } catch (error) {
      const timedOut = error instanceof Error && error.name === 'TimeoutError';
      answer = { kind: timedOut ? 'hang' : 'failure', detail: timedOut ? `no whole answer within ${UPLOAD_MS} ms` : `the answer broke off: ${String(error)}` };
    }
    const finding = (await server.check()) ?? answer;
    if (finding) {
      finding.detail = `${input.via} upload (${input.transport}): ${finding.detail}`;
      await server.restart();
    }
    return finding;
  }

  return {
    name: 'audio-file',
    format: AUDIO_FILE_FORMAT,
    generate: generateAudioCase,
    async run(input) {
      if (input.via !== 'decoder') return upload(input);
      const request: DecodeRequest = { mode: input.mode, sampleRate: input.sampleRate, maxSeconds: input.maxSeconds, data: input.data };
      const outcome = await decoder.call(request, DECODE_MS);
      if (outcome.kind === 'died') return { kind: 'crash', detail: `the decoder's process died: ${outcome.detail}` };
      if (outcome.kind === 'timeout') return { kind: 'hang', detail: `no result within ${outcome.ms} ms` };
      return judgeDecode(request, outcome.reply);
    },
    async teardown() {
      await decoder.stop();
      await servers.close();
    },
  };
}
