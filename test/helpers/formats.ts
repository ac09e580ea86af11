/**
 * Test clips converted with Debian's ffmpeg command into every format the decoder reads; conversions are cached
 * in os.tmpdir()/voxd-test-audio, keyed by source, format and ffmpeg arguments, so repeated runs are fast.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export const CONVERSION_CACHE = path.join(os.tmpdir(), 'voxd-test-audio');

function haveFfmpeg(): boolean {
  return spawnSync('ffmpeg', ['-version']).status === 0 && spawnSync('ffprobe', ['-version']).status === 0;
}

/** null when ffmpeg is there (installing it with apt-get when root on Debian), else why the suite skips. */
export function ensureFfmpeg(): string | null {
  if (haveFfmpeg()) return null;
  if (process.getuid?.() === 0 && fs.existsSync('/usr/bin/apt-get')) {
    const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
    const install = () => spawnSync('apt-get', ['install', '-y', '--no-install-recommends', 'ffmpeg'], { env, stdio: 'ignore' }).status === 0;
    if (!install()) {
      spawnSync('apt-get', ['update'], { env, stdio: 'ignore' });
      install();
    }
    if (haveFfmpeg()) return null;
  }
  return 'the ffmpeg command (Debian package "ffmpeg", used to convert the test clips) is missing and could not be installed: run `apt-get install ffmpeg`';
}

export interface Format {
  name: string;
  ext: string;
  /** ffmpeg output arguments; `stereo` says whether the source has two channels. */
  args: (stereo: boolean) => string[];
  codec: string;
  container: string;
  lossless?: boolean;
  /** The rate of the encoded stream when the codec forces one (Opus: 48 kHz). */
  rate?: number;
  /** Channels of the encoded stream when the format forces them. */
  channels?: number;
}

export const FORMATS: Format[] = [
  { name: 'mp3', ext: 'mp3', args: () => ['-c:a', 'libmp3lame', '-b:a', '96k'], codec: 'mp3', container: 'mp3' },
  { name: 'flac', ext: 'flac', args: () => ['-c:a', 'flac'], codec: 'flac', container: 'flac', lossless: true },
  { name: 'm4a (faststart)', ext: 'm4a', args: () => ['-c:a', 'aac', '-b:a', '128k', '-movflags', '+faststart'], codec: 'aac', container: 'm4a' },
  { name: 'm4a (moov at the end)', ext: 'm4a', args: () => ['-c:a', 'aac', '-b:a', '128k'], codec: 'aac', container: 'm4a' },
  { name: 'aac (adts)', ext: 'aac', args: () => ['-c:a', 'aac', '-b:a', '128k', '-f', 'adts'], codec: 'aac', container: 'aac' },
  { name: 'ogg vorbis', ext: 'ogg', args: () => ['-c:a', 'libvorbis', '-q:a', '5'], codec: 'vorbis', container: 'ogg' },
  { name: 'opus in ogg', ext: 'opus', args: () => ['-c:a', 'libopus', '-b:a', '64k'], codec: 'opus', container: 'ogg', rate: 48000 },
  { name: 'opus in webm', ext: 'webm', args: () => ['-c:a', 'libopus', '-b:a', '64k', '-f', 'webm'], codec: 'opus', container: 'webm', rate: 48000 },
  { name: 'vorbis in matroska', ext: 'mka', args: () => ['-c:a', 'libvorbis', '-f', 'matroska'], codec: 'vorbis', container: 'matroska' },
  { name: 'wav 8-bit', ext: 'wav', args: () => ['-c:a', 'pcm_u8'], codec: 'pcm_u8', container: 'wav', lossless: true },
  { name: 'wav 16-bit', ext: 'wav', args: () => ['-c:a', 'pcm_s16le'], codec: 'pcm_s16le', container: 'wav', lossless: true },
  { name: 'wav 24-bit', ext: 'wav', args: () => ['-c:a', 'pcm_s24le'], codec: 'pcm_s24le', container: 'wav', lossless: true },
  { name: 'wav 32-bit', ext: 'wav', args: () => ['-c:a', 'pcm_s32le'], codec: 'pcm_s32le', container: 'wav', lossless: true },
  { name: 'wav 32-bit float', ext: 'wav', args: () => ['-c:a', 'pcm_f32le'], codec: 'pcm_f32le', container: 'wav', lossless: true },
  {
    name: 'wav stereo 48 kHz',
    ext: 'wav',
    // a mono source is copied into both channels, so the average down-mix gives the original back
    args: (stereo) => [...(stereo ? [] : ['-af', 'pan=stereo|c0=c0|c1=c0']), '-ar', '48000', '-c:a', 'pcm_s16le'],
    codec: 'pcm_s16le',
    container: 'wav',
    lossless: true,
    rate: 48000,
    channels: 2,
  },
  {
    name: 'mp3 stereo 48 kHz',
    ext: 'mp3',
    args: (stereo) => [...(stereo ? [] : ['-af', 'pan=stereo|c0=c0|c1=c0']), '-ar', '48000', '-c:a', 'libmp3lame', '-b:a', '128k'],
    codec: 'mp3',
    container: 'mp3',
    rate: 48000,
    channels: 2,
  },
];

/** Converts `source` with ffmpeg (cached); returns the file's path. */
export function convert(source: string, format: Format, stereo: boolean): string {
  const args = format.args(stereo);
  const stat = fs.statSync(source);
  const key = createHash('sha256')
    .update(JSON.stringify([source, stat.size, stat.mtimeMs, args]))
    .digest('hex')
    .slice(0, 12);
  const base = `${path.basename(source, path.extname(source))}-${format.name.replace(/[^a-z0-9]+/gi, '-')}-${key}.${format.ext}`;
  const out = path.join(CONVERSION_CACHE, base);
  if (fs.existsSync(out)) return out;
  fs.mkdirSync(CONVERSION_CACHE, { recursive: true });
  const tmp = `${out}.${process.pid}.tmp`;
  const run = spawnSync('ffmpeg', ['-nostdin', '-v', 'error', '-y', '-i', source, ...args, '-f', ffmpegMuxer(format), tmp], { encoding: 'utf8' });
  assert.equal(run.status, 0, `ffmpeg ${format.name}: ${run.stderr}`);
  fs.renameSync(tmp, out); // atomic: a concurrent run never sees half a file
  return out;
}

function ffmpegMuxer(format: Format): string {
  const args = format.args(false);
  const explicit = args.lastIndexOf('-f');
  if (explicit >= 0) return args[explicit + 1] as string;
  return { mp3: 'mp3', flac: 'flac', m4a: 'ipod', aac: 'adts', ogg: 'ogg', opus: 'ogg', webm: 'webm', mka: 'matroska', wav: 'wav' }[format.ext] as string;
}
