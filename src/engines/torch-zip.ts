import { open, type FileHandle } from 'node:fs/promises';

// A PyTorch checkpoint (torch.save's zip format) is a zip of stored entries: `<root>/data.pkl` (the pickle that
// names the tensors) and one `<root>/data/<key>` per storage. Only the zip's directory and the pickle are read here,
// within bounds no checkpoint comes near.
const EOCD_SIZE = 22;
const MAX_COMMENT = 0xffff;
const ZIP64_LOCATOR_SIZE = 20;
const ZIP64_EOCD_SIZE = 56;
const CENTRAL_HEADER_SIZE = 46;
const LOCAL_HEADER_SIZE = 30;
const MAX_DIRECTORY_BYTES = 64 << 20;
/** A state dict's pickle takes a few hundred bytes per tensor (Kokoro-82M's, 548 tensors: about 100 KB). */
const MAX_PICKLE_BYTES = 64 << 20;

async function readAt(file: FileHandle, offset: number, length: number): Promise<Buffer | null> {
  const out = Buffer.alloc(length);
  const { bytesRead } = await file.read(out, 0, length, offset);
  return bytesRead === length ? out : null;
}

/** Where the central directory lies: the classic end record, or the ZIP64 one its locator points to (torch writes both). */
async function directoryOf(file: FileHandle, size: number): Promise<{ offset: number; length: number } | null> {
  const tailLength = Math.min(size, EOCD_SIZE + MAX_COMMENT);
  const tail = await readAt(file, size - tailLength, tailLength);
  if (!tail) return null;
  for (let at = tail.length - EOCD_SIZE; at >= 0; at--) {
    if (tail.readUInt32LE(at) !== 0x06054b50 || at + EOCD_SIZE + tail.readUInt16LE(at + 20) > tail.length) continue;
    const endAt = size - tailLength + at;
    const locator = endAt >= ZIP64_LOCATOR_SIZE ? await readAt(file, endAt - ZIP64_LOCATOR_SIZE, ZIP64_LOCATOR_SIZE) : null;
    if (locator?.readUInt32LE(0) === 0x07064b50) {
      const record = await readAt(file, Number(locator.readBigUInt64LE(8)), ZIP64_EOCD_SIZE);
      if (record?.readUInt32LE(0) !== 0x06064b50) return null;
      return { offset: Number(record.readBigUInt64LE(48)), length: Number(record.readBigUInt64LE(40)) };
    }
    return { offset: tail.readUInt32LE(at + 16), length: tail.readUInt32LE(at + 12) };
  }
  return null;
}

/**
 * The bytes of `data.pkl` of a PyTorch zip checkpoint (the entry `<root>/data.pkl`, whatever its root is called),
 * for engines that recognise their checkpoints by what the pickle names. Null for anything else: a missing or
 * unreadable file, a directory, a file that is not a zip, a zip without that entry, a compressed or oversized entry
 * (PyTorch stores its entries uncompressed), or a truncated file.
 */
export async function readTorchZipPickle(path: string): Promise<Buffer | null> {
  const file = await open(path, 'r').catch(() => null);
  if (!file) return null;
  try {
    const { size } = await file.stat();
    const directory = await directoryOf(file, size);
    if (!directory || directory.length > MAX_DIRECTORY_BYTES || directory.offset + directory.length > size) return null;
    const entries = await readAt(file, directory.offset, directory.length);
    for (let at = 0; entries && at + CENTRAL_HEADER_SIZE <= entries.length && entries.readUInt32LE(at) === 0x02014b50;) {
      const nameLength = entries.readUInt16LE(at + 28);
      const next = at + CENTRAL_HEADER_SIZE + nameLength + entries.readUInt16LE(at + 30) + entries.readUInt16LE(at + 32);
      const name = entries.toString('utf8', at + CENTRAL_HEADER_SIZE, Math.min(at + CENTRAL_HEADER_SIZE + nameLength, entries.length));
      if (/^[^/]+\/data\.pkl$/.test(name)) {
        const method = entries.readUInt16LE(at + 10);
        const length = entries.readUInt32LE(at + 24);
        if (method !== 0 || length !== entries.readUInt32LE(at + 20) || length > MAX_PICKLE_BYTES) return null;
        // the data follows the local header, whose name and extra field (torch's padding) the directory does not repeat
        const local = await readAt(file, entries.readUInt32LE(at + 42), LOCAL_HEADER_SIZE);
        if (local?.readUInt32LE(0) !== 0x04034b50) return null;
        return readAt(file, entries.readUInt32LE(at + 42) + LOCAL_HEADER_SIZE + local.readUInt16LE(26) + local.readUInt16LE(28), length);
      }
      at = next;
    }
    return null;
  } catch {
    return null; // a directory (EISDIR) or a read error: not a checkpoint
  } finally {
    await file.close();
  }
}
