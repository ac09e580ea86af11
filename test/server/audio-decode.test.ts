/**
 * Native audio decoding (FFmpeg's libraries in the addon). The clips in ../shared are converted at test time
 * with Debian's ffmpeg command into every supported format; conversions are cached in
 * os.tmpdir()/voxd-test-audio, keyed by source, format and ffmpeg arguments, so repeated runs are fast.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import zlib from 'node:zlib';
import { ApiError } from '../../src/errors.js';
import type { NativeError } from '../../src/native/addon.js';
import { loadNative } from '../../src/native/load.js';
import { decodeAudio, decodeAudioNative, type DecodedAudio } from '../../src/services/audio/decode.js';
import { JFK_WAV, SHARED } from '../helpers/paths.js';
import { startTestServer } from '../helpers/server.js';
import { SPHINX_INSTALLED, wer } from '../helpers/transcripts.js';
import { readWavMono, wavBytes } from '../helpers/wav.js';
import { correlation, rms } from '../helpers/signal.js';
import { nativeRejection } from '../helpers/native.js';
import { convert, ensureFfmpeg, FORMATS, type Format } from '../helpers/formats.js';
import { mulberry32 } from '../helpers/mulberry32.js';

const MUSIC = path.join(SHARED, 'audio', 'music', 'loop_tabla.flac'); // the longest loop: 1% of it exceeds an AAC frame
const JFK_MP3 = path.join(SHARED, 'audio', 'speech', 'jfk.mp3');
const RATES = [16000, 24000];

// ---- helpers ----

function assertSane(audio: DecodedAudio): void {
  assert.ok(audio.samples instanceof Float32Array);
  assert.ok(audio.samples.length > 0);
  assert.equal(audio.duration, audio.samples.length / audio.sampleRate);
  for (const x of audio.samples) assert.ok(Number.isFinite(x), `sample ${x}`);
}

function peak(samples: Float32Array): number {
  let max = 0;
  for (const x of samples) max = Math.max(max, Math.abs(x));
  return max;
}

function randomBytes(seed: number, length: number): Buffer {
  const next = mulberry32(seed);
  const buf = Buffer.alloc(length);
  for (let i = 0; i < length; i++) buf[i] = Math.floor(next() * 256);
  return buf;
}

/** A valid 2x2 RGB PNG. */
function pngBytes(): Buffer {
  const chunk = (type: string, data: Buffer) => {
    const body = Buffer.concat([Buffer.from(type, 'ascii'), data]);
    const out = Buffer.alloc(body.length + 8);
    out.writeUInt32BE(data.length, 0);
    body.copy(out, 4);
    out.writeUInt32BE(zlib.crc32(body), body.length + 4);
    return out;
  };
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(2, 0);
  ihdr.writeUInt32BE(2, 4);
  ihdr.set([8, 2, 0, 0, 0], 8);
  const pixels = zlib.deflateSync(Buffer.from([0, 255, 0, 0, 0, 255, 0, 0, 0, 0, 255, 255, 255, 255]));
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', ihdr),
    chunk('IDAT', pixels),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

/** Resolves to sane audio or rejects with invalid_audio; anything else (another code, a crash) fails. */
async function decodesOrRefuses(data: Buffer, what: string): Promise<void> {
  try {
    assertSane(await decodeAudioNative(data, { sampleRate: 16000, maxSeconds: 60 }));
  } catch (error) {
    assert.equal((error as NativeError).code, 'invalid_audio', `${what}: ${String(error)}`);
    assert.ok((error as Error).message.length > 10, what);
  }
}

function probeDuration(file: string): number {
  const run = spawnSync('ffprobe', ['-v', 'error', '-show_entries', 'stream=duration', '-of', 'csv=p=0', file], { encoding: 'utf8' });
  return Number(run.stdout.trim());
}

/** The source down-mixed (average of the channels) and resampled by the ffmpeg command: an independent reference. */
function reference(source: string, rate: number, stereo: boolean): Float32Array {
  const pan = stereo ? ['-af', 'pan=mono|c0=0.5*c0+0.5*c1'] : [];
  const run = spawnSync('ffmpeg', ['-nostdin', '-v', 'error', '-i', source, ...pan, '-ar', String(rate), '-f', 'f32le', '-'], { maxBuffer: 1 << 28 });
  assert.equal(run.status, 0);
  const bytes = run.stdout;
  return new Float32Array(bytes.buffer, bytes.byteOffset, bytes.length / 4);
}

// ---- suites ----

describe('audio decoding: shared files, errors, limits', () => {
  const jfk = readWavMono(JFK_WAV);
  const jfkWav = fs.readFileSync(JFK_WAV);

  it('decodes jfk.wav to the original samples at 16 kHz and resamples it to 24 kHz', async () => {
    const audio = await decodeAudio(jfkWav, { sampleRate: 16000 });
    assertSane(audio);
    assert.deepEqual(
      { rate: audio.sampleRate, sourceRate: audio.sourceSampleRate, channels: audio.sourceChannels, codec: audio.codec, container: audio.container },
      { rate: 16000, sourceRate: 16000, channels: 1, codec: 'pcm_s16le', container: 'wav' },
    );
    assert.equal(audio.truncated, false);
    assert.equal(audio.samples.length, jfk.samples.length);
    for (let i = 0; i < audio.samples.length; i++) assert.ok(Math.abs((audio.samples[i] as number) - (jfk.samples[i] as number)) < 1e-6);

    const up = await decodeAudio(jfkWav, { sampleRate: 24000 });
    assertSane(up);
    assert.equal(up.samples.length, (jfk.samples.length * 3) / 2);
    assert.ok(Math.abs(rms(up.samples) / rms(jfk.samples) - 1) < 0.02);
  });

  it('decodes the shared jfk.mp3', async () => {
    const audio = await decodeAudio(fs.readFileSync(JFK_MP3), { sampleRate: 16000 });
    assertSane(audio);
    assert.equal(audio.codec, 'mp3');
    assert.equal(audio.container, 'mp3');
    assert.ok(Math.abs(audio.duration - 11) < 0.11, `duration ${audio.duration}`);
    assert.ok(Math.abs(rms(audio.samples) / rms(jfk.samples) - 1) < 0.1);
  });

  it('decodes stereo 44.1 kHz FLAC by averaging the channels', async () => {
    const audio = await decodeAudio(fs.readFileSync(MUSIC), { sampleRate: 16000 });
    assertSane(audio);
    assert.deepEqual([audio.sourceSampleRate, audio.sourceChannels, audio.codec, audio.container], [44100, 2, 'flac', 'flac']);
  });

  it('refuses bad input with invalid_audio and a message that names the problem', async () => {
    const cases: [string, Buffer, RegExp][] = [
      ['empty', Buffer.alloc(0), /^the file is empty$/],
      [
        'text named .wav',
        Buffer.from('This is not audio, whatever its name (notes.wav) says.\n'.repeat(20)),
        /not an audio file voxd can read \(no known container format\)/,
      ],
      ['random bytes', randomBytes(1, 64 * 1024), /not an audio file voxd can read/],
      ['truncated mp3 (200 bytes)', fs.readFileSync(JFK_MP3).subarray(0, 200), /MP3|MPEG audio|no audio samples|corrupt or truncated|not an audio file/],
      ['a PNG', pngBytes(), /not an audio file voxd can read \(it looks like .*png.*, which is not an audio container\)/i],
      ['a WAV header and no data', wavBytes(new Float32Array(0), 16000), /no audio samples could be decoded/],
      ['a WAV header claiming 4 GB of data, and none', wavBytes(new Float32Array(0), 16000, 0xfffffff0), /no audio samples could be decoded/],
      ['a WAV at 1 Hz', wavBytes(new Float32Array(100), 1), /sample rate of 1 Hz is out of range/],
    ];
    for (const [what, data, message] of cases) {
      const error = await decodeAudio(data, { sampleRate: 16000 }).then(
        () => assert.fail(`${what}: decoded`),
        (e: unknown) => e,
      );
      assert.ok(error instanceof ApiError, `${what}: ${String(error)}`);
      assert.equal(error.code, 'invalid_audio', what);
      assert.equal(error.status, 400);
      assert.equal(error.param, 'file');
      assert.match(error.message, message, what);
    }
  });

  it('decodes what there is of a WAV whose header claims 4 GB', async () => {
    const audio = await decodeAudio(wavBytes(jfk.samples.subarray(0, 16000), 16000, 0xfffffff0), { sampleRate: 16000 });
    assert.equal(audio.samples.length, 16000);
  });

  it('turns NaN and infinity in float PCM into silence', async () => {
    const data = wavBytes(new Float32Array(2000), 16000); // rewritten below as 32-bit float PCM, 1000 samples
    data.writeUInt16LE(3, 20); // WAVE_FORMAT_IEEE_FLOAT
    data.writeUInt32LE(16000 * 4, 28);
    data.writeUInt16LE(4, 32);
    data.writeUInt16LE(32, 34);
    const values = [0.5, NaN, Infinity, -Infinity, -0.25];
    for (let i = 0; i < 1000; i++) data.writeFloatLE(values[i % values.length] as number, 44 + i * 4);
    const audio = await decodeAudio(data, { sampleRate: 16000 });
    assert.equal(audio.codec, 'pcm_f32le');
    assert.deepEqual(Array.from(audio.samples.subarray(0, 5)), [0.5, 0, 0, 0, -0.25]);
  });

  it('never crashes on random bytes', async () => {
    for (let seed = 1; seed <= 40; seed++) {
      const data = randomBytes(seed, [1, 2, 7, 44, 512, 4096, 100_000][seed % 7] as number);
      await decodesOrRefuses(data, `seed ${seed}`);
    }
    // random data behind real headers
    for (let seed = 1; seed <= 10; seed++) {
      await decodesOrRefuses(Buffer.concat([jfkWav.subarray(0, 44), randomBytes(seed, 20_000)]), `wav header + noise ${seed}`);
      await decodesOrRefuses(Buffer.concat([Buffer.from('fLaC'), randomBytes(seed, 20_000)]), `flac magic + noise ${seed}`);
      await decodesOrRefuses(Buffer.concat([Buffer.from('OggS'), randomBytes(seed, 20_000)]), `ogg magic + noise ${seed}`);
      await decodesOrRefuses(Buffer.concat([Buffer.from([0x1a, 0x45, 0xdf, 0xa3]), randomBytes(seed, 20_000)]), `ebml magic + noise ${seed}`);
      await decodesOrRefuses(Buffer.concat([Buffer.from('\0\0\0\x20ftypM4A ', 'latin1'), randomBytes(seed, 20_000)]), `mp4 magic + noise ${seed}`);
    }
  });

  it('rejects with audio_too_long as soon as the decoded audio passes maxSeconds', async () => {
    const native = await nativeRejection(decodeAudioNative(jfkWav, { sampleRate: 16000, maxSeconds: 5 }));
    assert.equal(native.code, 'audio_too_long');
    assert.match(native.message, /longer than the limit of 5 seconds/);
    await assert.rejects(decodeAudio(jfkWav, { sampleRate: 16000, maxSeconds: 5 }), (e: unknown) => {
      return e instanceof ApiError && e.code === 'invalid_audio' && e.param === 'file' && /limit of 5 seconds/.test(e.message);
    });
    assert.equal((await decodeAudio(jfkWav, { sampleRate: 16000, maxSeconds: 11.5 })).samples.length, jfk.samples.length);

    // 20 minutes of audio: stopping at 5 s must not cost a whole decode
    const long = new Float32Array(16000 * 1200);
    for (let i = 0; i < long.length; i += jfk.samples.length) long.set(jfk.samples.subarray(0, long.length - i), i);
    const wav = wavBytes(long, 16000);
    let start = performance.now();
    await decodeAudioNative(wav, { sampleRate: 24000 });
    const whole = performance.now() - start;
    start = performance.now();
    assert.equal((await nativeRejection(decodeAudioNative(wav, { sampleRate: 24000, maxSeconds: 5 }))).code, 'audio_too_long');
    const limited = performance.now() - start;
    assert.ok(limited < whole / 4, `limited ${limited.toFixed(0)} ms vs whole ${whole.toFixed(0)} ms`);
  });

  it('rejects with aborted for an aborted flag or signal, also while decoding', async () => {
    const flag = new (loadNative().AbortFlag)();
    flag.abort();
    assert.equal((await nativeRejection(loadNative().decodeAudio(jfkWav, { sampleRate: 16000 }, flag))).code, 'aborted');
    assert.equal((await nativeRejection(decodeAudio(jfkWav, { sampleRate: 16000, signal: AbortSignal.abort() }))).code, 'aborted');

    const long = wavBytes(new Float32Array(16000 * 3600).fill(0.1), 16000);
    const controller = new AbortController();
    const pending = decodeAudio(long, { sampleRate: 44100, signal: controller.signal });
    setTimeout(() => controller.abort(), 5);
    assert.equal((await nativeRejection(pending)).code, 'aborted');
  });

  it('checks its arguments', async () => {
    const native = loadNative();
    const bad: [unknown, unknown][] = [
      ['not bytes', { sampleRate: 16000 }],
      [new Float32Array(4), { sampleRate: 16000 }],
      [jfkWav, undefined],
      [jfkWav, { sampleRate: 0 }],
      [jfkWav, { sampleRate: 16000.5 }],
      [jfkWav, { sampleRate: 16000, maxSeconds: -1 }],
      [jfkWav, { sampleRate: 16000, maxSeconds: 'long' }],
    ];
    for (const [data, options] of bad) {
      assert.throws(
        () => (native.decodeAudio as (d: unknown, o: unknown) => unknown)(data, options),
        (e: unknown) => (e as NativeError).code === 'invalid_argument',
      );
    }
    assert.throws(
      () => native.decodeAudio(jfkWav, { sampleRate: 16000 }, {} as never),
      (e: unknown) => (e as NativeError).code === 'invalid_argument',
    );
  });

  it('runs 8 decodes at once with the same results as one at a time', async () => {
    const inputs = [jfkWav, fs.readFileSync(JFK_MP3), fs.readFileSync(MUSIC), jfkWav, fs.readFileSync(JFK_MP3), fs.readFileSync(MUSIC), jfkWav, jfkWav];
    const rates = [16000, 16000, 16000, 24000, 24000, 24000, 44100, 8000];
    const alone: DecodedAudio[] = [];
    for (let i = 0; i < inputs.length; i++) alone.push(await decodeAudio(inputs[i] as Buffer, { sampleRate: rates[i] as number }));
    const together = await Promise.all(inputs.map((data, i) => decodeAudio(data, { sampleRate: rates[i] as number })));
    together.forEach((audio, i) => assert.deepEqual(audio.samples, (alone[i] as DecodedAudio).samples));
  });
});

const skipConversions = ensureFfmpeg();

describe('audio decoding: every format, converted with the ffmpeg command', { skip: skipConversions ?? false }, () => {
  const jfk = readWavMono(JFK_WAV);
  const sources = [
    { name: 'jfk', file: JFK_WAV, stereo: false, rate: 16000 },
    { name: 'music', file: MUSIC, stereo: true, rate: 44100 },
  ];
  const files = new Map<string, string>();
  const durations = new Map<string, number>();

  before(() => {
    for (const source of sources) {
      durations.set(source.name, probeDuration(source.file));
      for (const format of FORMATS) files.set(`${source.name}/${format.name}`, convert(source.file, format, source.stereo));
    }
  });

  it('keeps the MP4 index (moov) at the end of the file without faststart, and at the start with it', () => {
    for (const [name, moovFirst] of [
      ['m4a (faststart)', true],
      ['m4a (moov at the end)', false],
    ] as const) {
      const data = fs.readFileSync(files.get(`jfk/${name}`) as string);
      assert.equal(data.indexOf('moov') < data.indexOf('mdat'), moovFirst, name);
    }
  });

  for (const source of sources) {
    for (const format of FORMATS) {
      it(`${source.name}: ${format.name} decodes to the right duration at 16 and 24 kHz`, async () => {
        const data = fs.readFileSync(files.get(`${source.name}/${format.name}`) as string);
        const expected = durations.get(source.name) as number;
        for (const rate of RATES) {
          const audio = await decodeAudio(data, { sampleRate: rate });
          assertSane(audio);
          assert.equal(audio.sampleRate, rate);
          assert.ok(Math.abs(audio.duration / expected - 1) <= 0.01, `${rate} Hz: ${audio.duration} s, expected ${expected} s`);
          assert.equal(audio.codec, format.codec);
          assert.equal(audio.container, format.container);
          assert.equal(audio.sourceSampleRate, format.rate ?? source.rate);
          assert.equal(audio.sourceChannels, format.channels ?? (source.stereo ? 2 : 1));
          assert.equal(audio.truncated, false);
          assert.ok(peak(audio.samples) < 1.5, `peak ${peak(audio.samples)}`);

          const ref = source.stereo ? reference(source.file, rate, true) : rate === 16000 ? jfk.samples : reference(source.file, rate, false);
          const level = rms(audio.samples) / rms(ref);
          assert.ok(Math.abs(level - 1) < 0.1, `${rate} Hz: RMS ${level.toFixed(3)} of the original`);
          if (format.lossless) {
            const c = correlation(audio.samples, ref);
            assert.ok(c > 0.99, `${rate} Hz: correlation ${c.toFixed(4)} with the original`);
          }
        }
      });
    }
  }

  it('never crashes on truncated or corrupted files of any format', async () => {
    for (const format of FORMATS) {
      const data = fs.readFileSync(files.get(`jfk/${format.name}`) as string);
      const cuts = [1, 4, 12, 44, 100, 200, 500, 1000, 4096, data.length >> 2, data.length >> 1, data.length - 1];
      for (const cut of cuts) await decodesOrRefuses(data.subarray(0, cut), `${format.name} cut at ${cut}`);
      for (let seed = 1; seed <= 6; seed++) {
        const next = mulberry32(seed);
        const damaged = Buffer.from(data);
        for (let i = 0; i < 24; i++) damaged[Math.floor(next() * damaged.length)] = Math.floor(next() * 256);
        await decodesOrRefuses(damaged, `${format.name} corrupted (seed ${seed})`);
      }
    }
  });

  it('returns what decoded from a file cut in half, and says so', async () => {
    const data = fs.readFileSync(files.get('jfk/mp3') as string);
    const audio = await decodeAudio(data.subarray(0, Math.floor(data.length / 2)), { sampleRate: 16000 });
    assertSane(audio);
    assert.ok(audio.duration > 4 && audio.duration < 7, `duration ${audio.duration}`);
    assert.equal(audio.truncated, true);
    for (const name of ['flac', 'm4a (faststart)', 'opus in webm']) {
      const file = fs.readFileSync(files.get(`jfk/${name}`) as string);
      const half = await decodeAudio(file.subarray(0, Math.floor(file.length / 2)), { sampleRate: 16000 });
      assert.ok(half.duration > 4 && half.duration < 7, `${name}: duration ${half.duration}`);
      assert.equal(half.truncated, true, name);
    }
  });

  it('decodes other containers: AIFF, CAF, AU, AC-3, E-AC-3, WavPack, ALAC, WMA, MPEG-PS, MPEG-TS', async () => {
    const others: Format[] = [
      { name: 'aiff', ext: 'aiff', args: () => ['-f', 'aiff'], codec: 'pcm_s16be', container: 'aiff' },
      { name: 'caf', ext: 'caf', args: () => ['-c:a', 'pcm_s16le', '-f', 'caf'], codec: 'pcm_s16le', container: 'caf' },
      { name: 'au', ext: 'au', args: () => ['-f', 'au'], codec: 'pcm_s16be', container: 'au' },
      { name: 'ac3', ext: 'ac3', args: () => ['-c:a', 'ac3', '-f', 'ac3'], codec: 'ac3', container: 'ac3' },
      { name: 'eac3', ext: 'eac3', args: () => ['-c:a', 'eac3', '-f', 'eac3'], codec: 'eac3', container: 'eac3' },
      { name: 'wavpack', ext: 'wv', args: () => ['-c:a', 'wavpack', '-f', 'wv'], codec: 'wavpack', container: 'wv' },
      { name: 'alac', ext: 'm4a', args: () => ['-c:a', 'alac', '-f', 'ipod'], codec: 'alac', container: 'm4a' },
      { name: 'wma', ext: 'wma', args: () => ['-c:a', 'wmav2', '-f', 'asf'], codec: 'wmav2', container: 'asf' },
      { name: 'mpeg-ps', ext: 'mpg', args: () => ['-c:a', 'mp2', '-f', 'vob'], codec: 'mp2', container: 'mpeg' },
      { name: 'mpeg-ts', ext: 'ts', args: () => ['-c:a', 'aac', '-f', 'mpegts'], codec: 'aac', container: 'mpegts' },
    ];
    for (const format of others) {
      const audio = await decodeAudio(fs.readFileSync(convert(JFK_WAV, format, false)), { sampleRate: 16000 });
      assertSane(audio);
      assert.equal(audio.codec, format.codec, format.name);
      assert.equal(audio.container, format.container, format.name);
      assert.ok(Math.abs(audio.duration / 11 - 1) <= 0.01, `${format.name}: ${audio.duration} s`);
      assert.ok(Math.abs(rms(audio.samples) / rms(jfk.samples) - 1) < 0.1, format.name);
    }
  });

  it('decodes the audio track of a video, and refuses a video without one', async () => {
    const video = ['-f', 'lavfi', '-i', 'testsrc=duration=3:size=64x48:rate=10'];
    const withAudio = convert(
      JFK_WAV,
      {
        name: 'video',
        ext: 'mp4',
        args: () => [...video, '-map', '1:v', '-map', '0:a', '-c:v', 'mpeg4', '-c:a', 'aac', '-f', 'mp4'],
        codec: '',
        container: '',
      },
      false,
    );
    const audio = await decodeAudio(fs.readFileSync(withAudio), { sampleRate: 16000 });
    assert.deepEqual([audio.codec, audio.container], ['aac', 'mp4']);
    assert.ok(Math.abs(audio.duration / 11 - 1) <= 0.01, `${audio.duration} s`);

    const silent = convert(
      JFK_WAV,
      { name: 'video only', ext: 'mp4', args: () => [...video, '-map', '1:v', '-c:v', 'mpeg4', '-f', 'mp4'], codec: '', container: '' },
      false,
    );
    await assert.rejects(decodeAudio(fs.readFileSync(silent), { sampleRate: 16000 }), (e: unknown) => {
      return e instanceof ApiError && e.code === 'invalid_audio' && /has no audio stream/.test(e.message);
    });
  });

  it('down-mixes 6 channels and 10 unlabelled channels', async () => {
    const surround = convert(
      JFK_WAV,
      { name: '5.1', ext: 'wav', args: () => ['-af', 'pan=5.1|c0=c0|c1=c0|c2=c0|c3=c0|c4=c0|c5=c0'], codec: '', container: '' },
      false,
    );
    const audio = await decodeAudio(fs.readFileSync(surround), { sampleRate: 16000 });
    assert.equal(audio.sourceChannels, 6);
    assert.ok(correlation(audio.samples, jfk.samples) > 0.99);
    assert.ok(Math.abs(rms(audio.samples) / rms(jfk.samples) - 1) < 0.1, `RMS ${rms(audio.samples)}`);

    // 10 channels without positions (a plain WAVEFORMAT header cannot label them): the average
    const frames = jfk.samples.length;
    const data = Buffer.alloc(44 + frames * 10 * 2);
    const header = wavBytes(new Float32Array(0), 16000);
    header.copy(data);
    data.writeUInt32LE(36 + frames * 20, 4);
    data.writeUInt16LE(10, 22);
    data.writeUInt32LE(16000 * 20, 28);
    data.writeUInt16LE(20, 32);
    data.writeUInt32LE(frames * 20, 40);
    for (let i = 0; i < frames; i++) {
      for (let c = 0; c < 10; c++) data.writeInt16LE(c % 2 ? Math.round((jfk.samples[i] as number) * 32767) : 0, 44 + (i * 10 + c) * 2);
    }
    const ten = await decodeAudio(data, { sampleRate: 16000 });
    assert.equal(ten.sourceChannels, 10);
    assert.ok(correlation(ten.samples, jfk.samples) > 0.99);
    assert.ok(Math.abs(rms(ten.samples) / (rms(jfk.samples) / 2) - 1) < 0.02, `RMS ${rms(ten.samples)}`);
  });
});

interface VerboseReply {
  status: number;
  body: { text: string; duration: number; language: string };
}

/** Formats that carry jfk.wav's 16-bit samples exactly. */
const SAME_SAMPLES = new Set(['flac', 'wav 16-bit', 'wav 24-bit', 'wav 32-bit', 'wav 32-bit float']);

const skipHttp = skipConversions ?? (SPHINX_INSTALLED ? false : 'the pocketsphinx-en-us package is not installed');

describe('every format transcribes over HTTP with the built-in recognizer', { skip: skipHttp }, () => {
  // jfk.wav, as in the decoding suite above: on a clip of 5 s, the 1024 priming samples that raw ADTS (which has no
  // field for an encoder delay) decodes as audio would already exceed 1% of the duration
  const source = JFK_WAV;
  const replies = new Map<string, VerboseReply>();
  const manifest = JSON.parse(fs.readFileSync(path.join(SHARED, 'audio', 'speech', 'manifest.json'), 'utf8')) as { file: string; text: string }[];
  const spoken = manifest.find((clip) => clip.file === path.basename(source))!.text;
  let duration = 0;
  let fromWav = '';

  before(async () => {
    const { base } = await startTestServer({ after });
    const transcribe = async (file: string): Promise<VerboseReply> => {
      const body = new FormData();
      body.append('file', new Blob([new Uint8Array(fs.readFileSync(file))]), path.basename(file));
      body.append('model', 'whisper-1');
      body.append('response_format', 'verbose_json');
      const response = await fetch(`${base}/v1/audio/transcriptions`, { method: 'POST', body });
      return { status: response.status, body: (await response.json()) as VerboseReply['body'] };
    };
    duration = probeDuration(source);
    const wav = await transcribe(source);
    assert.equal(wav.status, 200, JSON.stringify(wav.body));
    fromWav = wav.body.text;
    // all at once: the server's queue runs as many as it has cores for
    await Promise.all(FORMATS.map(async (format) => replies.set(format.name, await transcribe(convert(source, format, false)))));
  });

  for (const format of FORMATS) {
    it(`${format.name}: the right duration and a transcript`, () => {
      const { status, body } = replies.get(format.name)!;
      assert.equal(status, 200, JSON.stringify(body));
      assert.ok(Math.abs(body.duration / duration - 1) <= 0.01, `duration ${body.duration} s, expected ${duration} s`);
      assert.equal(body.language, 'english');
      if (SAME_SAMPLES.has(format.name)) {
        assert.equal(body.text, fromWav, 'the same samples as the WAV give the same words');
      } else {
        // pocketsphinx is sensitive to small changes of this noisy clip (lossy codecs move its words around, for
        // better or worse), so this is checked against what was said: a decoding fault (wrong rate or channels,
        // noise) scores near 1 or above
        const errors = wer(spoken, body.text);
        assert.ok(errors <= 0.85, `WER ${errors.toFixed(3)}: ${JSON.stringify(body.text)} for ${JSON.stringify(spoken)}`);
      }
    });
  }
});
