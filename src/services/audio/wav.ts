/**
 * 32-bit float WAV files (WAVE_FORMAT_IEEE_FLOAT), interleaved: what separation returns, so that target +
 * residual reconstruct the input exactly as computed, with no 16-bit rounding in between. A file can be made in
 * pieces, so a long one never has to exist whole in memory.
 */
const FORMAT_IEEE_FLOAT = 3;
const HEADER_BYTES = 58;
/** Frames per piece of `floatWavPieces`: 256 KiB of stereo samples. */
const PIECE_FRAMES = 32768;

export function encodeFloatWav(channels: readonly Float32Array[], sampleRate: number): Buffer {
  return Buffer.concat([...floatWavPieces(channels, sampleRate)]);
}

/**
 * The WAV of `channels` as a header and then pieces of interleaved samples. `sampleAt(channel, frame)` (default:
 * the channels' own samples) lets a caller derive the samples as they are written, e.g. a difference of two signals.
 */
export function* floatWavPieces(
  channels: readonly Float32Array[],
  sampleRate: number,
  sampleAt: (channel: number, frame: number) => number = (c, i) => (channels[c] as Float32Array)[i] as number,
): Generator<Buffer> {
  const count = channels.length;
  const frames = channels[0]?.length ?? 0;
  yield floatWavHeader(count, frames, sampleRate);
  for (let start = 0; start < frames; start += PIECE_FRAMES) {
    const end = Math.min(frames, start + PIECE_FRAMES);
    const interleaved = new Float32Array((end - start) * count); // little-endian hosts only, like the rest of voxd
    for (let i = start; i < end; i++) {
      for (let c = 0; c < count; c++) interleaved[(i - start) * count + c] = sampleAt(c, i);
    }
    yield Buffer.from(interleaved.buffer, interleaved.byteOffset, interleaved.byteLength);
  }
}

function floatWavHeader(count: number, frames: number, sampleRate: number): Buffer {
  const dataBytes = frames * count * 4;
  const header = Buffer.alloc(HEADER_BYTES);
  header.write('RIFF', 0, 'ascii');
  header.writeUInt32LE(HEADER_BYTES - 8 + dataBytes, 4);
  header.write('WAVE', 8, 'ascii');
  header.write('fmt ', 12, 'ascii');
  header.writeUInt32LE(18, 16);
  header.writeUInt16LE(FORMAT_IEEE_FLOAT, 20);
  header.writeUInt16LE(count, 22);
  header.writeUInt32LE(sampleRate, 24);
  header.writeUInt32LE(sampleRate * count * 4, 28);
  header.writeUInt16LE(count * 4, 32);
  header.writeUInt16LE(32, 34);
  header.writeUInt16LE(0, 36); // no extension
  // non-PCM formats carry a fact chunk with the frame count
  header.write('fact', 38, 'ascii');
  header.writeUInt32LE(4, 42);
  header.writeUInt32LE(frames, 46);
  header.write('data', 50, 'ascii');
  header.writeUInt32LE(dataBytes, 54);
  return header;
}
