import fs from 'node:fs';

/** Reads a 16-bit PCM WAV file as mono float32 (tests only; the server decodes audio natively). */
export function readWavMono(file: string): { sampleRate: number; samples: Float32Array } {
  const buf = fs.readFileSync(file);
  let offset = 12;
  let sampleRate = 0;
  let channels = 1;
  while (offset + 8 <= buf.length) {
    const id = buf.toString('ascii', offset, offset + 4);
    const size = buf.readUInt32LE(offset + 4);
    if (id === 'fmt ') {
      channels = buf.readUInt16LE(offset + 10);
      sampleRate = buf.readUInt32LE(offset + 12);
      if (buf.readUInt16LE(offset + 22) !== 16) throw new Error(`${file}: only 16-bit PCM is supported`);
    } else if (id === 'data') {
      const frames = Math.floor(size / 2 / channels);
      const samples = new Float32Array(frames);
      for (let i = 0; i < frames; i++) {
        let sum = 0;
        for (let c = 0; c < channels; c++) sum += buf.readInt16LE(offset + 8 + (i * channels + c) * 2);
        samples[i] = sum / channels / 32768;
      }
      return { sampleRate, samples };
    }
    offset += 8 + size + (size & 1);
  }
  throw new Error(`${file}: no data chunk`);
}

/** A 16-bit mono PCM WAV; `dataSize` overrides the data chunk's declared size. */
export function wavBytes(samples: Float32Array, sampleRate: number, dataSize?: number): Buffer {
  return interleavedWavBytes(samples, 1, sampleRate, dataSize);
}

/** A 16-bit PCM WAV of `channels` interleaved channels (no channel layout: WAVE_FORMAT_PCM). */
export function interleavedWavBytes(samples: Float32Array, channels: number, sampleRate: number, dataSize?: number): Buffer {
  const header = Buffer.alloc(44);
  header.write('RIFF', 0, 'ascii');
  header.writeUInt32LE(dataSize === undefined ? 36 + samples.length * 2 : 0xffffffff, 4);
  header.write('WAVEfmt ', 8, 'ascii');
  header.writeUInt32LE(16, 16);
  header.writeUInt16LE(1, 20); // PCM
  header.writeUInt16LE(channels, 22);
  header.writeUInt32LE(sampleRate, 24);
  header.writeUInt32LE(sampleRate * 2 * channels, 28);
  header.writeUInt16LE(2 * channels, 32);
  header.writeUInt16LE(16, 34);
  header.write('data', 36, 'ascii');
  header.writeUInt32LE(dataSize ?? samples.length * 2, 40);
  return Buffer.concat([header, pcm16(samples)]);
}

/** Float samples as 16-bit little-endian PCM, clipped. */
export function pcm16(samples: Float32Array): Buffer {
  const pcm = new Int16Array(samples.length); // little-endian hosts only, like the rest of voxd
  for (let i = 0; i < samples.length; i++) pcm[i] = Math.max(-32768, Math.min(32767, Math.round((samples[i] as number) * 32768)));
  return Buffer.from(pcm.buffer);
}
