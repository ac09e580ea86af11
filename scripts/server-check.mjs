// The checks a built voxd must pass wherever it is started (docs/building.md): a server that came up answers a
// transcription of WAV and MP3, speech in every format, a separation and a live turn. `npm run release` runs them on
// the installed packages, `npm run container:check` on the container images.
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { InstallError, requireFromRoot, root } from './build-native.mjs';

/**
 * The child's exit code and everything it wrote, once it has closed.
 * @param {import('node:child_process').ChildProcess} child
 * @returns {Promise<{ code: number | null, output: string }>}
 */
export function completion(child) {
  let output = '';
  child.stdout?.on('data', (chunk) => (output += chunk));
  child.stderr?.on('data', (chunk) => (output += chunk));
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, output })));
}

export async function freePort() {
  const server = net.createServer();
  await new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(undefined)));
  const address = /** @type {net.AddressInfo} */ (server.address());
  await new Promise((resolve) => server.close(resolve));
  return address.port;
}

/**
 * Waits for `base` to answer /readyz, polling every 200 ms at most `tries` times; throws with the server's output when
 * it exits or never gets ready.
 * @param {string} base
 * @param {import('node:child_process').ChildProcess} child the server
 * @param {Promise<{ output: string }>} done its completion()
 * @param {number} tries
 */
export async function untilReady(base, child, done, tries) {
  for (let i = 0; ; i++) {
    const ready = await fetch(`${base}/readyz`).then(
      (r) => r.ok,
      () => false,
    );
    if (ready) break;
    if (i > tries || child.exitCode !== null)
      throw new InstallError(`the server did not start:\n${(await Promise.race([done, sleep(2000, { output: '' })])).output}`);
    await sleep(200);
  }
}

/**
 * A live turn over `WS /v1/audio/transcriptions/realtime`: jfk.wav's samples sent as they would stream, then stop;
 * resolves to the transcript of its utterances.
 * @param {string} base
 * @param {string} wav
 */
async function liveTurn(base, wav) {
  const WebSocket = requireFromRoot('ws');
  const socket = new WebSocket(`${base.replace(/^http/, 'ws')}/v1/audio/transcriptions/realtime`);
  /** @type {string[]} */
  const texts = [];
  const closed = new Promise((resolve, reject) => {
    socket.on('close', resolve);
    socket.on('error', reject);
  });
  socket.on('message', (/** @type {Buffer} */ data) => {
    const message = JSON.parse(data.toString('utf8'));
    if (message.type === 'complete') texts.push(message.text);
    if (message.status === 'error') texts.push(`error: ${message.error}`);
  });
  await new Promise((resolve, reject) => {
    socket.once('open', resolve);
    socket.once('error', reject);
  });
  socket.send(JSON.stringify({ model: 'sphinx', sample_rate: 16000 }));
  // jfk.wav is 16 kHz mono 16-bit: its samples are its `data` chunk; 100 ms a frame
  const bytes = fs.readFileSync(wav);
  const data = bytes.indexOf('data', 12);
  const pcm = bytes.subarray(data + 8, data + 8 + bytes.readUInt32LE(data + 4));
  for (let at = 0; at < pcm.length; at += 3200) socket.send(pcm.subarray(at, at + 3200));
  socket.send(JSON.stringify({ action: 'stop' }));
  await closed;
  return texts.join(' ').trim();
}

/**
 * The server at `base`: transcribe WAV and MP3, speak in every format, separate, a live turn; throws on a failure.
 * @param {string} base
 */
export async function exerciseServer(base) {
  const shared = path.join(root, '..', 'shared', 'audio');
  /** @type {string[]} */
  const transcripts = [];
  for (const clip of ['jfk.wav', 'jfk.mp3']) {
    const form = new FormData();
    form.append('file', new Blob([fs.readFileSync(path.join(shared, 'speech', clip))]), clip);
    form.append('model', 'sphinx');
    const transcription = await (await fetch(`${base}/v1/audio/transcriptions`, { method: 'POST', body: form })).json();
    // sphinx hears "country" in the WAV; the MP3 (decoded by the bundled FFmpeg) comes out differently, but in words
    if (!(clip.endsWith('.wav') ? /country/ : /(\w+ ){5}/).test(transcription.text ?? ''))
      throw new InstallError(`transcription of ${clip}: ${JSON.stringify(transcription)}`);
    transcripts.push(transcription.text);
  }
  /** @type {string[]} */
  const spoken = [];
  for (const format of ['mp3', 'wav', 'flac', 'ogg', 'opus', 'aac', 'pcm']) {
    const speech = await fetch(`${base}/v1/audio/speech`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'tts-1', input: 'Installed without a compiler.', response_format: format }),
    });
    const audio = Buffer.from(await speech.arrayBuffer());
    if (!speech.ok || audio.length < 1000) throw new InstallError(`speech as ${format}: ${speech.status} ${audio.toString('utf8', 0, 200)}`);
    spoken.push(`${format} ${audio.length} B`);
  }
  const mix = new FormData();
  mix.append('file', new Blob([fs.readFileSync(path.join(shared, 'music', 'loop_amen.flac'))]), 'loop.flac');
  mix.append('description', 'drums');
  const separation = await (await fetch(`${base}/v1/audio/separations`, { method: 'POST', body: mix })).json();
  if (typeof separation.target !== 'string') throw new InstallError(`separation: ${JSON.stringify(separation).slice(0, 300)}`);
  const live = await liveTurn(base, path.join(shared, 'speech', 'jfk.wav'));
  // VAD-cut utterances come out differently from the whole file (the same words on x64 and arm64), but in words
  if (!/(\w+ ){5}/.test(live)) throw new InstallError(`live turn: ${JSON.stringify(live)}`);
  return { transcript: transcripts[0] ?? '', spoken, live };
}
