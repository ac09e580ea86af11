/**
 * 32-bit float WAV files (WAVE_FORMAT_IEEE_FLOAT), interleaved: what separation returns, so that target +
 * residual reconstruct the input exactly as computed, with no 16-bit rounding in between.
 */
const FORMAT_IEEE_FLOAT = 3;

export function encodeFloatWav(channels: readonly Float32Array[], sampleRate: number): Buffer {
  const count = channels.length;
  const frames = channels[0]?.length ?? 0;
  const dataBytes = frames * count * 4;
  const header = Buffer.alloc(58);
  header.write('RIFF', 0, 'ascii');
  header.writeUInt32LE(50 + dataBytes, 4);
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
  const interleaved = count === 1 ? (channels[0] as Float32Array) : new Float32Array(frames * count); // little-endian hosts only, like the rest of voxd
  if (count > 1) channels.forEach((channel, c) => channel.forEach((x, i) => (interleaved[i * count + c] = x)));
  return Buffer.concat([header, Buffer.from(interleaved.buffer, interleaved.byteOffset, dataBytes)]);
}
