import { open } from 'node:fs/promises';

/** "ggml" as a little-endian uint32 at offset 0: whisper.cpp's model files (Whisper, Parakeet, Silero VAD). */
export const GGML_FILE_MAGIC = 0x67676d6c;

/**
 * The first `bytes` bytes of a file (fewer when it is shorter), for engines that recognise their format by its
 * header. Null when it cannot be read: a missing file, a directory or an unreadable file is not a model file of
 * any format.
 */
export async function readFileHead(path: string, bytes: number): Promise<Buffer | null> {
  const file = await open(path, 'r').catch(() => null);
  if (!file) return null;
  try {
    const head = Buffer.alloc(bytes);
    const read = await file.read(head, 0, bytes, 0).catch(() => null);
    return read ? head.subarray(0, read.bytesRead) : null;
  } finally {
    await file.close();
  }
}
