/**
 * `ref_audio` for engines that clone a voice: a server-side path (inside the --models-dir roots when they are
 * given) or a base64 `data:` URL, decoded like any upload to mono at the model's rate. A path must name a regular
 * file no larger than an upload may be; it is opened without blocking (a FIFO would otherwise hold a worker
 * thread forever) and read under the request's abort signal.
 */
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import { ApiError } from '../../errors.js';
import { dataUrlBytes } from '../audio/data-url.js';
import { decodeAudio } from '../audio/decode.js';
import { findLocalPath } from '../model-id.js';

const READ_CHUNK_BYTES = 1024 * 1024;

export interface ReferenceOptions {
  sampleRate: number;
  roots: string[];
  maxSeconds: number;
  /** Largest file a path may name (--max-upload-mb). */
  maxBytes: number;
  signal?: AbortSignal;
}

export async function loadReferenceAudio(refAudio: string, { sampleRate, roots, maxSeconds, maxBytes, signal }: ReferenceOptions): Promise<Float32Array> {
  const data = dataUrlBytes(refAudio) ?? (await readReferenceFile(refAudio, roots, maxBytes, signal));
  if (data.length === 0) throw new ApiError('invalid_audio', 'ref_audio is empty', { param: 'ref_audio' });
  try {
    return (await decodeAudio(data, { sampleRate, maxSeconds, ...(signal ? { signal } : {}) })).samples;
  } catch (error) {
    if (error instanceof ApiError && error.code === 'invalid_audio') throw new ApiError('invalid_audio', `ref_audio: ${error.message}`, { param: 'ref_audio' });
    throw error;
  }
}

async function readReferenceFile(refAudio: string, roots: string[], maxBytes: number, signal: AbortSignal | undefined): Promise<Buffer> {
  const refused = (reason: string): ApiError => new ApiError('invalid_request', `ref_audio ${refAudio} ${reason}`, { param: 'ref_audio' });
  // missing and outside the roots read the same, so the answer does not tell which paths exist
  const unreadable = refused(`is not a file the server can read${roots.length > 0 ? ' under --models-dir' : ''}`);
  const file = findLocalPath(refAudio, roots);
  if (!file) throw unreadable;
  const handle = await fsp.open(file, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK | fs.constants.O_NOCTTY).catch(() => {
    throw unreadable;
  });
  try {
    const { size } = await handle.stat().then((stat) => {
      if (!stat.isFile()) throw refused('is not a regular file');
      return stat;
    });
    if (size > maxBytes) throw refused(`is ${size} bytes; the limit is ${maxBytes} (--max-upload-mb)`);
    // read at most one byte past the limit: the file may grow after the stat
    const chunks: Buffer[] = [];
    let total = 0;
    for (;;) {
      signal?.throwIfAborted();
      const { bytesRead, buffer } = await handle.read(Buffer.allocUnsafe(READ_CHUNK_BYTES), 0, READ_CHUNK_BYTES, null);
      if (bytesRead === 0) break;
      chunks.push(buffer.subarray(0, bytesRead));
      total += bytesRead;
      if (total > maxBytes) throw refused(`is larger than the limit of ${maxBytes} bytes (--max-upload-mb)`);
    }
    return Buffer.concat(chunks, total);
  } finally {
    await handle.close();
  }
}
