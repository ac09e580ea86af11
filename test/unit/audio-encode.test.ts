/**
 * Native audio encoding (FFmpeg's libraries in the addon): every response format as a whole clip and as a
 * stream of chunks, checked with our own decoder and with Debian's ffprobe; container rules of streams (one
 * header, WAV 0xFFFFFFFF sizes, Ogg pages per chunk); input validation; determinism under concurrency.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import type { NativeError } from '../../src/native/addon.js';
import { loadNative } from '../../src/native/load.js';
import { decodeAudio } from '../../src/services/audio/decode.js';
import { AUDIO_FORMATS, contentTypeOf, createEncoder, encodeAudio, fileExtensionOf, isAudioFormat, type AudioFormat } from '../../src/services/audio/encode.js';
import { JFK_WAV } from '../helpers/paths.js';
import { readWavMono } from '../helpers/wav.js';
import { nativeRejection } from '../helpers/native.js';

const jfk = readWavMono(JFK_WAV); // 16 kHz mono, 11 s
const RATE = jfk.sampleRate;
const N = jfk.samples.length;
const CHUNK = RATE / 2; // 0.5 s

const HAVE_FFPROBE = spawnSync('ffprobe', ['-version']).status === 0;
const NO_FFPROBE = HAVE_FFPROBE ? false : 'ffprobe (Debian package "ffmpeg") is not installed';
const TMP = fs.mkdtempSync(path.join(os.tmpdir(), 'voxd-encode-'));
after(() => fs.rmSync(TMP, { recursive: true, force: true }));

interface Expect {
  /** ffprobe's codec_name and format_name. */
  codec: string;
  container: string;
  /** Our decoder's container name. */
  decodedContainer: string;
  /** The rate ffprobe reports (Opus always decodes at 48 kHz). */
  probeRate: number;
  /** Codec frame, samples at 16 kHz: the tolerance on durations. */
  frame: number;
  /** Samples the decoder cannot know to drop, at the start of a whole clip (ADTS AAC has no place to say). */
  priming: number;
  /** The same in a stream (MP3's gapless info is in the Xing/LAME frame, which only a seekable output gets). */
  streamPriming: number;
  lossless: boolean;
  /** Lowest correlation of the decoded audio with the input (best lag). */
  minCorrelation: number;
}

const EXPECT: Record<AudioFormat, Expect> = {
  mp3: {
    codec: 'mp3',
    container: 'mp3',
    decodedContainer: 'mp3',
    probeRate: 16000,
    frame: 576,
    priming: 0,
    streamPriming: 1105,
    lossless: false,
    minCorrelation: 0.98,
  },
  wav: {
    codec: 'pcm_s16le',
    container: 'wav',
    decodedContainer: 'wav',
    probeRate: 16000,
    frame: 1,
    priming: 0,
    streamPriming: 0,
    lossless: true,
    minCorrelation: 1,
  },
  flac: {
    codec: 'flac',
    container: 'flac',
    decodedContainer: 'flac',
    probeRate: 16000,
    frame: 4096,
    priming: 0,
    streamPriming: 0,
    lossless: true,
    minCorrelation: 1,
  },
  ogg: {
    codec: 'vorbis',
    container: 'ogg',
    decodedContainer: 'ogg',
    probeRate: 16000,
    frame: 1024,
    priming: 0,
    streamPriming: 0,
    lossless: false,
    minCorrelation: 0.97,
  },
  opus: {
    codec: 'opus',
    container: 'ogg',
    decodedContainer: 'ogg',
    probeRate: 48000,
    frame: 320,
    priming: 0,
    streamPriming: 0,
    lossless: false,
    minCorrelation: 0.97,
  },
  aac: {
    codec: 'aac',
    container: 'aac',
    decodedContainer: 'aac',
    probeRate: 16000,
    frame: 1024,
    priming: 1024,
    streamPriming: 1024,
    lossless: false,
    minCorrelation: 0.98,
  },
  pcm: {
    codec: 'pcm_s16le',
    container: 's16le',
    decodedContainer: 'pcm',
    probeRate: 16000,
    frame: 1,
    priming: 0,
    streamPriming: 0,
    lossless: true,
    minCorrelation: 1,
  },
};

// ---- helpers ----

/** The code of what `fn` throws synchronously. */
function thrownCode(fn: () => unknown): string {
  try {
    fn();
  } catch (error) {
    return (error as NativeError).code;
  }
  assert.fail('expected a throw');
}

function int16Samples(bytes: Buffer): Float32Array {
  const out = new Float32Array(bytes.length >> 1);
  for (let i = 0; i < out.length; i++) out[i] = bytes.readInt16LE(i * 2) / 32768;
  return out;
}

/** Decodes with our decoder (raw PCM by hand: it has no container to probe) at 16 kHz. */
async function decode(format: AudioFormat, bytes: Buffer): Promise<{ samples: Float32Array; codec: string; container: string }> {
  if (format === 'pcm') return { samples: int16Samples(bytes), codec: 'pcm_s16le', container: 'pcm' };
  const audio = await decodeAudio(bytes, { sampleRate: RATE });
  assert.equal(audio.truncated, false, `${format}: decoded as truncated`);
  return audio;
}

/** The highest normalised correlation of `b` against `a` over lags 0..maxLag (b delayed). */
function bestCorrelation(a: Float32Array, b: Float32Array, maxLag: number): number {
  let best = -1;
  for (let lag = 0; lag <= maxLag; lag += 1) {
    const n = Math.min(a.length, b.length - lag);
    let ab = 0;
    let aa = 0;
    let bb = 0;
    for (let i = 0; i < n; i += 2) {
      const x = a[i] as number;
      const y = b[i + lag] as number;
      ab += x * y;
      aa += x * x;
      bb += y * y;
    }
    best = Math.max(best, ab / Math.sqrt(aa * bb));
  }
  return best;
}

interface Probe {
  codec: string;
  container: string;
  rate: number;
  channels: number;
  /** Seconds: the stream's or the container's duration; for ADTS (estimated from the bitrate) packets × 1024. */
  duration: number;
}

function probe(format: AudioFormat, bytes: Buffer): Probe {
  const file = path.join(TMP, `probe.${fileExtensionOf(format)}`);
  fs.writeFileSync(file, bytes);
  const raw = format === 'pcm' ? ['-f', 's16le', '-sample_rate', String(RATE), '-ch_layout', 'mono'] : [];
  const run = spawnSync(
    'ffprobe',
    [
      '-v',
      'error',
      ...raw,
      '-count_packets',
      '-show_entries',
      'stream=codec_name,sample_rate,channels,duration,nb_read_packets:format=format_name,duration',
      '-of',
      'json',
      file,
    ],
    { encoding: 'utf8' },
  );
  assert.equal(run.status, 0, `ffprobe ${format}: ${run.stderr}`);
  const json = JSON.parse(run.stdout) as {
    streams: { codec_name: string; sample_rate: string; channels: number; duration?: string; nb_read_packets: string }[];
    format: { format_name: string; duration?: string };
  };
  assert.equal(json.streams.length, 1);
  const stream = json.streams[0]!;
  const rate = Number(stream.sample_rate);
  const duration = format === 'aac' ? (Number(stream.nb_read_packets) * 1024) / rate : Number(stream.duration ?? json.format.duration);
  return { codec: stream.codec_name, container: json.format.format_name, rate, channels: stream.channels, duration };
}

/** Ogg pages of a byte string: each must parse, back to back, to the end. */
function oggPages(bytes: Buffer): { flags: number; granule: bigint; serial: number }[] {
  const pages = [];
  let at = 0;
  while (at < bytes.length) {
    assert.equal(bytes.toString('latin1', at, at + 4), 'OggS', `no Ogg page at byte ${at}`);
    const segments = bytes[at + 26] as number;
    let size = 27 + segments;
    for (let i = 0; i < segments; i++) size += bytes[at + 27 + i] as number;
    pages.push({ flags: bytes[at + 5] as number, granule: bytes.readBigInt64LE(at + 6), serial: bytes.readUInt32LE(at + 14) });
    at += size;
  }
  assert.equal(at, bytes.length, 'the bytes end inside an Ogg page');
  return pages;
}

function count(bytes: Buffer, text: string): number {
  let n = 0;
  for (let at = bytes.indexOf(text, 0, 'latin1'); at >= 0; at = bytes.indexOf(text, at + 1, 'latin1')) n++;
  return n;
}

/** The stream of `samples` in 0.5 s chunks: every call's bytes. */
async function encodeChunks(format: AudioFormat, samples: Float32Array, chunk = CHUNK): Promise<Buffer[]> {
  const encoder = createEncoder({ format, sampleRate: RATE });
  const parts: Buffer[] = [];
  for (let at = 0; at < samples.length; at += chunk) parts.push(await encoder.write(samples.subarray(at, at + chunk)));
  parts.push(await encoder.end());
  return parts;
}

function assertDuration(what: string, got: number, expected: number, slack: { below: number; above: number }): void {
  assert.ok(got >= expected - slack.below && got <= expected + slack.above, `${what}: ${got} samples, expected ${expected} (-${slack.below}/+${slack.above})`);
}

// ---- suites ----

describe('audio encoding: formats, content types', () => {
  it('names each format, its content type and its extension', () => {
    assert.deepEqual([...AUDIO_FORMATS], ['mp3', 'wav', 'flac', 'ogg', 'opus', 'aac', 'pcm']);
    assert.deepEqual(
      AUDIO_FORMATS.map((f) => contentTypeOf(f)),
      ['audio/mpeg', 'audio/wav', 'audio/flac', 'audio/ogg', 'audio/ogg', 'audio/aac', 'audio/pcm'],
    );
    assert.deepEqual(
      AUDIO_FORMATS.map((f) => fileExtensionOf(f)),
      ['mp3', 'wav', 'flac', 'ogg', 'opus', 'aac', 'pcm'],
    );
    assert.ok(isAudioFormat('opus'));
    assert.ok(!isAudioFormat('wma') && !isAudioFormat(undefined));
  });

  it("the system's FFmpeg encodes every format", () => {
    assert.deepEqual([...loadNative().AudioEncoder.formats], [...AUDIO_FORMATS]);
  });

  it('keeps the input rate where the codec takes it, else picks the nearest one', () => {
    const rate = (format: AudioFormat, sampleRate: number) => createEncoder({ format, sampleRate }).outputSampleRate;
    for (const format of AUDIO_FORMATS) {
      for (const r of [16000, 24000, 48000]) assert.equal(rate(format, r), r, `${format} ${r}`);
    }
    assert.equal(rate('opus', 22050), 24000);
    assert.equal(rate('opus', 44100), 48000);
    assert.equal(rate('opus', 11025), 12000);
    assert.equal(rate('mp3', 96000), 48000);
    assert.equal(rate('aac', 192000), 96000);
    assert.equal(rate('wav', 22050), 22050);
    assert.equal(rate('ogg', 11025), 11025);
    const encoder = createEncoder({ format: 'mp3', sampleRate: 24000 });
    assert.deepEqual(
      { format: encoder.format, sampleRate: encoder.sampleRate, streaming: encoder.streaming, contentType: encoder.contentType },
      { format: 'mp3', sampleRate: 24000, streaming: true, contentType: 'audio/mpeg' },
    );
  });
});

describe('audio encoding: whole clips', () => {
  for (const format of AUDIO_FORMATS) {
    const x = EXPECT[format];

    it(`${format}: decodes to the input (duration, ${x.lossless ? 'exact 16-bit samples' : 'correlation'}) with our decoder`, async () => {
      const bytes = await encodeAudio(jfk.samples, { format, sampleRate: RATE });
      const audio = await decode(format, bytes);
      assert.equal(audio.container, x.decodedContainer);
      assert.equal(audio.codec, x.codec);
      assertDuration(format, audio.samples.length, N + x.priming, { below: format === 'opus' ? 16 : 0, above: x.frame });
      if (x.lossless) {
        assert.equal(audio.samples.length, N);
        for (let i = 0; i < N; i++) assert.equal(audio.samples[i], jfk.samples[i], `${format} sample ${i}`);
      } else {
        const c = bestCorrelation(jfk.samples, audio.samples, x.priming + 64);
        assert.ok(c >= x.minCorrelation, `${format}: correlation ${c.toFixed(3)}`);
      }
    });

    it(`${format}: ffprobe reads the codec, rate, channels, container and duration`, { skip: NO_FFPROBE }, async () => {
      const bytes = await encodeAudio(jfk.samples, { format, sampleRate: RATE });
      const p = probe(format, bytes);
      assert.deepEqual(
        { codec: p.codec, container: p.container, rate: p.rate, channels: p.channels },
        { codec: x.codec, container: x.container, rate: x.probeRate, channels: 1 },
      );
      // ffprobe counts what the container says: MP3 frames and Opus pre-skip included, so up to a frame or two more
      const slack = format === 'mp3' ? 2 * x.frame + 1105 : format === 'opus' ? 2 * x.frame : x.frame;
      assertDuration(format, Math.round(p.duration * RATE), N + x.priming, { below: 0, above: slack });
    });
  }

  it('wav: the header carries the real sizes; mp3: one Xing/LAME frame; flac: STREAMINFO has the total', async () => {
    const wav = await encodeAudio(jfk.samples, { format: 'wav', sampleRate: RATE });
    assert.equal(wav.length, 44 + N * 2);
    assert.equal(wav.toString('latin1', 0, 4), 'RIFF');
    assert.equal(wav.readUInt32LE(4), wav.length - 8);
    assert.equal(wav.toString('latin1', 36, 40), 'data');
    assert.equal(wav.readUInt32LE(40), N * 2);

    const mp3 = await encodeAudio(jfk.samples, { format: 'mp3', sampleRate: RATE });
    assert.equal(count(mp3, 'ID3'), 0);
    assert.equal(count(mp3, 'Info') + count(mp3, 'Xing'), 1);
    assert.equal(count(mp3, 'LAME') >= 1, true);

    const flac = await encodeAudio(jfk.samples, { format: 'flac', sampleRate: RATE });
    assert.equal(flac.toString('latin1', 0, 4), 'fLaC');
    // STREAMINFO: 4 bits of the total sample count at byte 21 (low nibble), then 32 bits
    assert.equal((flac[21]! & 0x0f) * 2 ** 32 + flac.readUInt32BE(22), N);
  });

  it('resamples to the codec rate: opus from 22050 Hz, mp3 from 96 kHz', async () => {
    const at22k = (await decodeAudio(fs.readFileSync(JFK_WAV), { sampleRate: 22050 })).samples;
    const opus = await encodeAudio(at22k, { format: 'opus', sampleRate: 22050 });
    const back = await decodeAudio(opus, { sampleRate: RATE });
    assertDuration('opus from 22050 Hz', back.samples.length, N, { below: 16, above: 320 });
    assert.ok(bestCorrelation(jfk.samples, back.samples, 64) > 0.95);

    const at96k = (await decodeAudio(fs.readFileSync(JFK_WAV), { sampleRate: 96000 })).samples;
    const mp3 = await encodeAudio(at96k, { format: 'mp3', sampleRate: 96000 });
    const mp3Back = await decodeAudio(mp3, { sampleRate: RATE });
    assert.equal(mp3Back.sourceSampleRate, 48000);
    assertDuration('mp3 from 96 kHz', mp3Back.samples.length, N, { below: 16, above: 576 });
    assert.ok(bestCorrelation(jfk.samples, mp3Back.samples, 64) > 0.98);
  });

  it('a bitrate changes the size of lossy formats', async () => {
    for (const format of ['mp3', 'opus', 'aac', 'ogg'] as const) {
      const low = await encodeAudio(jfk.samples, { format, sampleRate: RATE, bitrate: 24000 });
      const high = await encodeAudio(jfk.samples, { format, sampleRate: RATE, bitrate: 96000 });
      assert.ok(high.length > low.length * 2, `${format}: ${low.length} vs ${high.length} bytes`);
      // about the asked rate (within 30%; Vorbis' managed bitrate and MP3's reservoir wander)
      assert.ok(Math.abs((low.length * 8) / (N / RATE) / 24000 - 1) < 0.3, `${format} at 24 kb/s: ${low.length} bytes`);
    }
  });
});

describe('audio encoding: streams', () => {
  const whole = new Map<AudioFormat, Buffer>();
  const wholeDecoded = async (format: AudioFormat) => {
    let bytes = whole.get(format);
    if (!bytes) whole.set(format, (bytes = await encodeAudio(jfk.samples, { format, sampleRate: RATE })));
    return (await decode(format, bytes)).samples.length;
  };

  for (const format of AUDIO_FORMATS) {
    const x = EXPECT[format];

    it(`${format}: 0.5 s chunks make one container that decodes like the whole clip`, async () => {
      const parts = await encodeChunks(format, jfk.samples);
      const bytes = Buffer.concat(parts);
      const audio = await decode(format, bytes);
      // the whole clip minus its known priming, plus what a stream cannot tell the decoder to drop
      const expected = (await wholeDecoded(format)) - x.priming + x.streamPriming;
      assertDuration(`${format} stream`, audio.samples.length, expected, { below: x.frame, above: x.frame });
      if (x.lossless) {
        assert.equal(audio.samples.length, N);
        for (let i = 0; i < N; i++) assert.equal(audio.samples[i], jfk.samples[i], `${format} sample ${i}`);
      } else {
        const c = bestCorrelation(jfk.samples, audio.samples, x.streamPriming + 64);
        assert.ok(c >= x.minCorrelation, `${format} stream: correlation ${c.toFixed(3)}`);
      }
      // audio comes out while it streams: every chunk but a few at the start (codec lookahead) brings bytes
      const chunkParts = parts.slice(0, -1);
      assert.ok(chunkParts.filter((p) => p.length > 0).length >= chunkParts.length - 1, `${format}: ${parts.map((p) => p.length).join(',')}`);

      if (HAVE_FFPROBE) {
        const p = probe(format, bytes);
        assert.equal(p.codec, x.codec);
        assert.equal(p.rate, x.probeRate);
        if (format !== 'flac') {
          // a streamed FLAC cannot know its total in advance: STREAMINFO says "unknown", ffprobe says N/A
          const slack = format === 'mp3' ? 2 * x.frame : format === 'opus' ? 2 * x.frame : x.frame;
          assertDuration(`${format} stream (ffprobe)`, Math.round(p.duration * RATE), N + x.streamPriming, { below: 0, above: slack });
        }
      }
    });
  }

  it('wav: one RIFF header with 0xFFFFFFFF sizes, then only samples', async () => {
    const parts = await encodeChunks('wav', jfk.samples);
    const head = parts[0]!;
    assert.equal(head.toString('latin1', 0, 4), 'RIFF');
    assert.equal(head.readUInt32LE(4), 0xffffffff);
    assert.equal(head.toString('latin1', 8, 16), 'WAVEfmt ');
    assert.equal(head.toString('latin1', 36, 40), 'data');
    assert.equal(head.readUInt32LE(40), 0xffffffff);
    assert.equal(head.length, 44 + CHUNK * 2);
    for (const part of parts.slice(1, -1)) assert.equal(part.length, CHUNK * 2);
    assert.equal(parts.at(-1)!.length, 0);
    assert.equal(count(Buffer.concat(parts), 'RIFF'), 1);
  });

  for (const format of ['ogg', 'opus'] as const) {
    it(`${format}: every chunk call returns whole Ogg pages with audio; one BOS page, one EOS page`, async () => {
      const parts = await encodeChunks(format, jfk.samples);
      let lastGranule = -1n;
      for (const [i, part] of parts.entries()) {
        assert.ok(part.length > 0, `${format}: call ${i} returned nothing`);
        const pages = oggPages(part);
        if (i < parts.length - 1) {
          // the pages of a chunk end at a later position than the previous call's: audio came out
          const granule = pages.map((p) => p.granule).reduce((a, b) => (b > a ? b : a), -1n);
          assert.ok(granule > lastGranule, `${format}: call ${i} flushed no audio`);
          lastGranule = granule;
        }
      }
      const pages = oggPages(Buffer.concat(parts));
      assert.equal(pages.filter((p) => p.flags & 2).length, 1, 'one beginning-of-stream page');
      assert.equal(pages[0]!.flags & 2, 2);
      assert.equal(pages.filter((p) => p.flags & 4).length, 1, 'one end-of-stream page');
      assert.equal(pages.at(-1)!.flags & 4, 4);
      assert.equal(new Set(pages.map((p) => p.serial)).size, 1);
      assert.equal(count(Buffer.concat(parts), format === 'opus' ? 'OpusHead' : '\x01vorbis'), 1);
    });
  }

  it('mp3, aac, flac, pcm: no second header in the stream', async () => {
    const mp3 = Buffer.concat(await encodeChunks('mp3', jfk.samples));
    assert.equal(count(mp3, 'ID3') + count(mp3, 'Xing') + count(mp3, 'Info'), 0); // a stream cannot rewind to fill one in
    assert.equal(mp3[0], 0xff); // frames from the first byte
    const flac = Buffer.concat(await encodeChunks('flac', jfk.samples));
    assert.equal(count(flac, 'fLaC'), 1);
    assert.equal(flac.toString('latin1', 0, 4), 'fLaC');
    const aac = Buffer.concat(await encodeChunks('aac', jfk.samples));
    assert.equal(aac[0], 0xff); // ADTS: a header per frame and none for the file
    assert.equal((aac[1]! & 0xf0) >> 4, 0xf);
    const pcm = Buffer.concat(await encodeChunks('pcm', jfk.samples));
    assert.equal(pcm.length, N * 2);
  });

  it('chunk sizes do not matter: 1 ms, 0.5 s and 3 s chunks give the same audio', async () => {
    for (const format of ['flac', 'wav', 'mp3', 'opus'] as const) {
      const bytes = await Promise.all([16, CHUNK, 3 * RATE].map(async (size) => Buffer.concat(await encodeChunks(format, jfk.samples, size))));
      // codec frames are cut from a queue, so they do not depend on the chunks; only Ogg pages do
      if (format !== 'opus') for (const b of bytes) assert.ok(b.equals(bytes[1]!), format);
      const [a, b, c] = await Promise.all(bytes.map((b) => decode(format, b)));
      assert.equal(a!.samples.length, b!.samples.length, format);
      assert.equal(c!.samples.length, b!.samples.length, format);
      if (EXPECT[format].lossless) assert.deepEqual(a!.samples, b!.samples);
    }
  });
});

describe('audio encoding: input validation and call order', () => {
  const AudioEncoder = () => loadNative().AudioEncoder;

  it('refuses bad options with invalid_argument', () => {
    const bad: unknown[] = [
      undefined,
      {},
      { format: 'wma', sampleRate: 16000 },
      { format: 'MP3', sampleRate: 16000 },
      { format: 'mp3' },
      { format: 'mp3', sampleRate: 0 },
      { format: 'mp3', sampleRate: 16000.5 },
      { format: 'mp3', sampleRate: 7999 },
      { format: 'mp3', sampleRate: 1e6 },
      { format: 'mp3', sampleRate: '16000' },
      { format: 'mp3', sampleRate: 16000, bitrate: 1 },
      { format: 'mp3', sampleRate: 16000, bitrate: 1e9 },
      { format: 'mp3', sampleRate: 16000, bitrate: 'high' },
      { format: 'mp3', sampleRate: 16000, streaming: 'yes' },
    ];
    for (const options of bad) {
      const Ctor = AudioEncoder() as unknown as new (o: unknown) => unknown;
      assert.equal(
        thrownCode(() => new Ctor(options)),
        'invalid_argument',
        JSON.stringify(options),
      );
    }
    assert.throws(() => createEncoder({ format: 'wma' as AudioFormat, sampleRate: 16000 }), { code: 'invalid_argument' });
  });

  it('rejects samples that are not a Float32Array with invalid_argument, and the encoder still works', async () => {
    const encoder = createEncoder({ format: 'wav', sampleRate: RATE });
    for (const bad of [new Float64Array(4), [0, 0.5], 'abc', null, new Int16Array(4), Buffer.alloc(8)]) {
      assert.equal((await nativeRejection(encoder.write(bad as unknown as Float32Array))).code, 'invalid_argument');
    }
    const head = await encoder.write(new Float32Array([0.5]));
    assert.equal(head.length, 46);
    assert.equal((await encoder.end()).length, 0);
  });

  it('NaN and infinities become silence; beyond full scale is clipped', async () => {
    const input = new Float32Array([NaN, Infinity, -Infinity, 2, -5, 1, -1, 0.25, 0]);
    const bytes = await encodeAudio(input, { format: 'pcm', sampleRate: RATE });
    assert.deepEqual(
      Array.from({ length: input.length }, (_, i) => bytes.readInt16LE(i * 2)),
      [0, 0, 0, 32767, -32768, 32767, -32768, 8192, 0],
    );
    for (const format of AUDIO_FORMATS) {
      const noisy = jfk.samples.slice(0, RATE);
      for (let i = 0; i < noisy.length; i += 97) noisy[i] = i % 2 ? NaN : Infinity;
      const out = await decode(format, await encodeAudio(noisy, { format, sampleRate: RATE }));
      for (const v of out.samples) assert.ok(Number.isFinite(v) && Math.abs(v) <= 1.01, `${format}: ${v}`);
    }
  });

  it('empty chunks are fine: a stream answers its header, later nothing; a clip without audio is a valid file', async () => {
    const wav = createEncoder({ format: 'wav', sampleRate: RATE });
    assert.equal((await wav.write(new Float32Array(0))).length, 44);
    assert.equal((await wav.write(new Float32Array(0))).length, 0);
    assert.equal((await wav.end(new Float32Array(0))).length, 0);
    for (const format of AUDIO_FORMATS) {
      const silent = await encodeAudio(new Float32Array(0), { format, sampleRate: RATE });
      // raw PCM and ADTS have no file header: nothing to write without audio
      if (format === 'pcm' || format === 'aac') assert.equal(silent.length, 0, format);
      else assert.ok(silent.length > 0, format);
      const quiet = createEncoder({ format, sampleRate: RATE, streaming: false });
      assert.equal((await quiet.write(new Float32Array(0))).length, 0);
      assert.equal((await quiet.write(jfk.samples.subarray(0, CHUNK))).length, 0, `${format}: nothing before the end when not streaming`);
      assert.ok((await quiet.end()).length > 0);
    }
    const wavSilent = await encodeAudio(new Float32Array(0), { format: 'wav', sampleRate: RATE });
    assert.equal(wavSilent.length, 44);
    assert.equal(wavSilent.readUInt32LE(40), 0);
  });

  it('calls after end() reject with closed', async () => {
    const encoder = createEncoder({ format: 'mp3', sampleRate: RATE });
    await encoder.write(jfk.samples.subarray(0, CHUNK));
    await encoder.end();
    assert.equal((await nativeRejection(encoder.write(jfk.samples.subarray(0, CHUNK)))).code, 'closed');
    assert.equal((await nativeRejection(encoder.end())).code, 'closed');
  });

  it('the native encoder runs one call at a time (busy); the stream orders calls made without awaiting', async () => {
    const native = new (AudioEncoder())({ format: 'wav', sampleRate: RATE, streaming: true });
    const first = native.encode(jfk.samples.subarray(0, CHUNK));
    assert.equal(
      thrownCode(() => native.encode(jfk.samples.subarray(0, CHUNK))),
      'busy',
    );
    assert.equal(
      thrownCode(() => native.finish()),
      'busy',
    );
    assert.equal((await first).length, 44 + CHUNK * 2);
    assert.equal((await native.finish()).length, 0);

    // through the stream: all calls at once, one reused input array, and the bytes come back in order
    const encoder = createEncoder({ format: 'pcm', sampleRate: RATE });
    const buffer = new Float32Array(CHUNK);
    const calls: Promise<Buffer>[] = [];
    for (let at = 0; at < N; at += CHUNK) {
      const chunk = jfk.samples.subarray(at, at + CHUNK);
      const input = buffer.subarray(0, chunk.length);
      input.set(chunk);
      calls.push(encoder.write(input));
    }
    calls.push(encoder.end());
    const pcm = Buffer.concat(await Promise.all(calls));
    assert.deepEqual(int16Samples(pcm), jfk.samples);
  });

  it('a configuration the codec refuses rejects the first call with invalid_argument, and later calls say why', async () => {
    const encoder = createEncoder({ format: 'ogg', sampleRate: 8000, bitrate: 500000 });
    const error = await nativeRejection(encoder.write(new Float32Array(800)));
    assert.equal(error.code, 'invalid_argument');
    assert.match(error.message, /libvorbis/);
    const later = await nativeRejection(encoder.write(new Float32Array(800)));
    assert.equal(later.code, 'encode_failed');
    assert.match(later.message, /failed earlier/);
  });
});

describe('audio encoding: concurrency', () => {
  it('8 streams at once give the same bytes as one alone, for every format', async () => {
    for (const format of AUDIO_FORMATS) {
      const alone = Buffer.concat(await encodeChunks(format, jfk.samples));
      const together = await Promise.all(Array.from({ length: 8 }, async () => Buffer.concat(await encodeChunks(format, jfk.samples))));
      for (const bytes of together) assert.ok(bytes.equals(alone), `${format}: a concurrent stream differs`);
    }
  });
});
