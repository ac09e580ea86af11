/**
 * `ref_audio` for engines that clone a voice: a server-side path (inside the --models-dir roots when they are
 * given) or a base64 `data:` URL, decoded like any upload to mono at the model's rate.
 */
import fs from 'node:fs/promises';
import { ApiError } from '../../http/errors.js';
import { decodeAudio } from '../audio/decode.js';
import { findLocalPath } from '../model-id.js';

const DATA_URL = /^data:([\w.+-]+\/[\w.+-]+)?(;[\w-]+=[^;,]*)*;base64,/i;

export interface ReferenceOptions {
  sampleRate: number;
  roots: string[];
  maxSeconds: number;
  signal?: AbortSignal;
}

export async function loadReferenceAudio(refAudio: string, { sampleRate, roots, maxSeconds, signal }: ReferenceOptions): Promise<Float32Array> {
  let data: Buffer;
  const dataUrl = DATA_URL.exec(refAudio);
  if (dataUrl) {
    data = Buffer.from(refAudio.slice(dataUrl[0].length), 'base64');
  } else {
    const file = findLocalPath(refAudio, roots, { code: 'invalid_request', param: 'ref_audio' });
    if (!file) throw new ApiError('invalid_request', `ref_audio ${refAudio} does not exist on the server`, { param: 'ref_audio' });
    data = await fs.readFile(file).catch(() => {
      throw new ApiError('invalid_request', `ref_audio ${refAudio} is not a readable file`, { param: 'ref_audio' });
    });
  }
  if (data.length === 0) throw new ApiError('invalid_audio', 'ref_audio is empty', { param: 'ref_audio' });
  try {
    return (await decodeAudio(data, { sampleRate, maxSeconds, ...(signal ? { signal } : {}) })).samples;
  } catch (error) {
    if (error instanceof ApiError && error.code === 'invalid_audio') throw new ApiError('invalid_audio', `ref_audio: ${error.message}`, { param: 'ref_audio' });
    throw error;
  }
}
