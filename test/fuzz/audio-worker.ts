/**
 * The child process behind the audio-file target's decoder (audio-file.ts): decodes every file it is sent with
 * the functions the routes use, and answers with the shape of the audio, or how the file was refused. A file that
 * breaks FFmpeg or voxd's decoding code takes down this process only.
 */
import { ApiError } from '../../src/errors.js';
import { decodeAudio, decodeAudioChannels } from '../../src/services/audio/decode.js';
import type { DecodeReply, DecodeRequest } from './audio-file.js';
import { answerParent } from './worker-child.js';

function nonFinite(channels: Float32Array[]): number {
  let count = 0;
  for (const samples of channels) for (const x of samples) if (!Number.isFinite(x)) count++;
  return count;
}

answerParent<DecodeRequest, DecodeReply, null>(null, async ({ mode, sampleRate, maxSeconds, data }) => {
  try {
    if (mode === 'mono') {
      const audio = await decodeAudio(Buffer.from(data), { sampleRate, maxSeconds });
      const frames = Array.from({ length: audio.channels }, () => audio.samples.length / audio.channels);
      return { frames, sampleRate: audio.sampleRate, duration: audio.duration, nonFinite: nonFinite([audio.samples]) };
    }
    const audio = await decodeAudioChannels(Buffer.from(data), { maxSeconds });
    return { frames: audio.channels.map((c) => c.length), sampleRate: audio.sampleRate, duration: null, nonFinite: nonFinite(audio.channels) };
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    return {
      error: error instanceof Error ? `${typeof code === 'string' ? code : error.name}: ${error.message}` : String(error),
      apiCode: error instanceof ApiError ? error.code : null,
      status: error instanceof ApiError ? error.status : null,
    };
  }
});
