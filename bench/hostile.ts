/**
 * The hostile-client repros (`npm run bench:hostile`): starts a real server (`node dist/src/cli.js serve`) and
 * runs, against it, what once crashed, hung, filled memory or failed it, printing what it saw for each. The
 * assertions live in test/server/robustness.test.ts; this is the same set of probes (test/helpers/hostile.ts) run by hand,
 * with the heavy ones (a 590 s separation, several concurrent FIFO references, 1500 held connections per transport)
 * the test suite leaves out.
 * The memory of live sessions has a soak of its own: `npm run bench:soak`.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath, pathToFileURL } from 'node:url';
import {
  conflictingContentLength,
  expectContinue,
  healthy,
  heldConnections,
  longSpeechText,
  oversizedUpload,
  pausedSpeechStream,
  pipelinedBehindSlow,
  postJson,
  rawExchange,
  RealtimeProbe,
  statusLines,
  UNUSUAL_REQUESTS,
  wsUpgrade,
} from '../test/helpers/hostile.js';
import { interleavedWavBytes } from '../test/helpers/wav.js';
import { startCliServer, stopCliServer } from './cli-server.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'voxd-hostile-'));
const lines: string[] = [];

function report(defect: string, sent: string, saw: string): void {
  const line = `${defect.padEnd(34)} ${sent.padEnd(58)} ${saw}`;
  lines.push(line);
  console.log(line);
}

function openFiles(pid: number): number {
  return fs.readdirSync(`/proc/${pid}/fd`).length;
}

function peakRssMiB(pid: number): number {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  return Math.round(Number(/VmHWM:\s+(\d+)/.exec(status)?.[1] ?? 0) / 1024);
}

const server = await startCliServer(scratch, ['--allowed-origins', 'http://good.test', '--max-input-chars', '20000']);
const { base } = server;
console.log(`voxd on ${base} (pid ${server.pid}), scratch ${scratch}\n`);

// 1. text that crashed libflite
for (const [name, input] of [
  ['Hello world + 400 "!"', `Hello world${'!'.repeat(400)}`],
  ['320 dots', '.'.repeat(320)],
  ['"x" x 4096', 'x'.repeat(4096)],
] as const) {
  for (const stream of [false, true]) {
    const reply = await postJson(base, '/v1/audio/speech', { model: 'tts-1', input, response_format: 'wav', stream });
    report(
      '1 flite input',
      `${name}${stream ? ', streamed' : ''}`,
      `${reply.status}, ${reply.bytes} bytes, ${Math.round(reply.ms)} ms, alive ${await healthy(base)}`,
    );
  }
}

// 2. ref_audio that never ends or never opens (a cloning model: the random-weight Pocket TTS test model)
const { makeTtsTestModel } = (await import(pathToFileURL(path.join(root, 'scripts', 'make-tts-test-model.mjs')).href)) as {
  makeTtsTestModel(options: { arch: string; size: string }): Promise<{ dir: string }>;
};
const pocket = (await makeTtsTestModel({ arch: 'pockettts', size: 'tiny' })).dir;
const fifo = path.join(scratch, 'fifo');
execFileSync('mkfifo', [fifo]);
for (const ref of ['/dev/zero', fifo]) {
  const replies = await Promise.all(
    Array.from({ length: 9 }, () => postJson(base, '/v1/audio/speech', { model: pocket, input: 'Hello.', ref_audio: ref, max_tokens: 4 })),
  );
  const worst = Math.max(...replies.map((r) => r.ms));
  report(
    '2 ref_audio',
    `${ref === fifo ? 'a FIFO' : ref}, 9 at once`,
    `${[...new Set(replies.map((r) => `${r.status} ${r.code}`))].join(', ')}, slowest ${Math.round(worst)} ms`,
  );
}
const after = await postJson(base, '/v1/audio/speech', { model: pocket, input: 'Still speaking.', max_tokens: 4, response_format: 'pcm' });
report('2 ref_audio', 'then a plain request to the same model', `${after.status}, ${Math.round(after.ms)} ms; server RSS peak ${peakRssMiB(server.pid)} MiB`);

// 4. admission per request
const hundred = await postJson(base, '/v1/audio/speech', { model: 'tts-1', input: 'Yes. '.repeat(100), response_format: 'pcm' });
report('4 TTS admission', '"Yes. " x 100 on an idle server', `${hundred.status}`);
const sixtyFour = Array.from({ length: 64 }, (_, i) => `Sentence ${i}.`).join(' ');
const counts: Record<string, number> = {};
const until = performance.now() + 20_000;
const loop = async (input: string, who: string): Promise<void> => {
  while (performance.now() < until) {
    const reply = await postJson(base, '/v1/audio/speech', { model: 'tts-1', input, response_format: 'pcm' });
    counts[`${who} ${reply.status}`] = (counts[`${who} ${reply.status}`] ?? 0) + 1;
  }
};
await Promise.all([loop(sixtyFour, 'client A'), loop(sixtyFour, 'client B'), loop('A bystander speaks.', 'bystander')]);
report('4 TTS admission', '2 clients x 64 sentences + a bystander, 20 s', JSON.stringify(counts));

// 6. a long separation
const long = interleavedWavBytes(
  Float32Array.from({ length: 590 * 44100 * 2 }, (_, i) => 0.2 * Math.sin(i * 0.01) + 0.05 * Math.sin(i * 0.37)),
  2,
  44100,
);
{
  const form = new FormData();
  form.append('file', new Blob([new Uint8Array(long)]), 'long.wav');
  form.append('description', 'vocals');
  const started = performance.now();
  const response = await fetch(`${base}/v1/audio/separations`, { method: 'POST', body: form });
  let bytes = 0;
  for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) bytes += chunk.byteLength;
  report(
    '6 long separation',
    `590 s stereo 44.1 kHz (${Math.round(long.length / 1048576)} MiB)`,
    `${response.status}, ${Math.round(bytes / 1048576)} MiB of JSON in ${Math.round((performance.now() - started) / 1000)} s; RSS peak ${peakRssMiB(server.pid)} MiB`,
  );
}

// 7. a paused stream
const text = longSpeechText();
const straight = await pausedSpeechStream(base, text, 0);
const paused = await pausedSpeechStream(base, text, 20);
report(
  '7 paused stream',
  'client stops reading for 20 s',
  `${paused.body.length} of ${straight.body.length} bytes, whole ${paused.whole}, identical ${paused.body.equals(straight.body)}`,
);

// 8. WebSocket origins
for (const origin of ['http://evil.test', 'http://good.test', undefined]) {
  const upgrade = await wsUpgrade(`${base.replace('http', 'ws')}/v1/realtime?model=sphinx`, origin ? { origin } : {});
  report('8 WebSocket origin', `--allowed-origins http://good.test, Origin ${origin ?? 'none'}`, `${upgrade.status}${upgrade.code ? ` ${upgrade.code}` : ''}`);
}

// 9. conflicting Content-Length
const smuggled = await conflictingContentLength(base);
report(
  '9 duplicate Content-Length',
  'lengths 18 and 54, a GET hidden behind',
  `responses [${smuggled.statuses.join(', ')}], connection closed ${smuggled.closed}`,
);

// 10. model IDs no file system can name
for (const [name, id] of [
  ['5000 x "m"', 'm'.repeat(5000)],
  ['owner/ + 300 x "r"', `owner/${'r'.repeat(300)}`],
] as const) {
  const reply = await postJson(base, '/v1/audio/speech', { model: id, input: 'hi' });
  const live = new RealtimeProbe(`${base.replace('http', 'ws')}/v1/realtime?model=${id}`);
  await live.send({ type: 'input_audio_buffer.append', audio: Buffer.alloc(3200).toString('base64') });
  const error = ((await live.next('error')).error as { code: string }).code;
  live.close();
  report('10 model ID', name, `speech ${reply.status} ${reply.code}; realtime error ${error}`);
}

// 11. the smaller ones
{
  const live = new RealtimeProbe(`${base.replace('http', 'ws')}/v1/realtime?model=sphinx`);
  await live.send({ type: 'input_audio_buffer.append', audio: '@@not base64@@' });
  const bad = ((await live.next('error')).error as { code: string }).code;
  await live.send({ type: 'input_audio_buffer.append', audio: Buffer.alloc(5).toString('base64') });
  const odd = ((await live.next('error')).error as { code: string }).code;
  await live.send('x'.repeat(24 * 1024 * 1024));
  const big = ((await live.next('error')).error as { code: string }).code;
  live.close();
  report('11 realtime audio', 'bad base64, 5 bytes of PCM16, a 24 MiB message', `${bad}, ${odd}, ${big}`);
  const form = new FormData();
  form.append('file', new Blob([new Uint8Array(interleavedWavBytes(new Float32Array(40 * 8000).fill(0.1), 40, 8000))]), 'wide.wav');
  form.append('description', 'vocals');
  report('11 separation channels', '40 channels without positions', `${(await fetch(`${base}/v1/audio/separations`, { method: 'POST', body: form })).status}`);
  const outcomes: Record<string, number> = {};
  for (let i = 0; i < 20; i++) {
    const outcome = await oversizedUpload(base, 150, i % 2 === 0);
    outcomes[outcome] = (outcomes[outcome] ?? 0) + 1;
  }
  report('11 oversized uploads', '20 x 150 MiB (limit 100), half chunked', JSON.stringify(outcomes));
  const headers = (await fetch(`${base}/healthz`)).headers;
  report('11 transport header', 'any response', `uWebSockets header ${headers.get('uwebsockets') ?? 'absent'}`);
}

// 12 to 14. connections, the wire and Expect, on each transport (a server of its own each, default limits)
for (const transport of ['uws', 'node'] as const) {
  const own = await startCliServer(scratch, ['--transport', transport]);
  const before = openFiles(own.pid);
  for (const dribble of [false, true]) {
    let most = before;
    const sampler = setInterval(() => (most = Math.max(most, openFiles(own.pid))), 500);
    const held = await heldConnections(own.base, 1500, dribble, 20);
    clearInterval(sampler);
    await sleep(2000); // for the server to see the last closes
    report(
      `12 held connections (${transport})`,
      `1500 ${dribble ? 'sending a header line every 2 s' : 'sending nothing'}`,
      `${held.closed} closed within 20 s (last ${Math.round(held.slowestCloseMs)} ms), answers ${JSON.stringify(held.answers)}; ` +
        `server fds ${before}, at most ${most}, ${openFiles(own.pid)} 2 s after; healthy ${await healthy(own.base)}`,
    );
  }
  for (const [name, { request }] of Object.entries(UNUSUAL_REQUESTS)) {
    const { text, closed, closedAfterMs } = await rawExchange(own.base, request, 15_000);
    report(
      `13 the wire (${transport})`,
      name,
      `[${statusLines(text).join(', ')}], ${closed ? `closed after ${Math.round(closedAfterMs)} ms` : 'open after 15 s'}`,
    );
  }
  const speech = JSON.stringify({ model: 'tts-1', input: 'Hello there.', response_format: 'wav' });
  const pipelined = await rawExchange(
    own.base,
    pipelinedBehindSlow(`POST /v1/audio/speech HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${speech.length}\r\n\r\n${speech}`),
    15_000,
  );
  report(`13 the wire (${transport})`, 'GET /healthz pipelined behind a speech request', `[${statusLines(pipelined.text).join(', ')}]`);
  const head = await rawExchange(own.base, 'HEAD /v1/models HTTP/1.1\r\nHost: x\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
  report(`13 the wire (${transport})`, 'HEAD /v1/models, then GET /healthz', `[${statusLines(head.text).join(', ')}], ${head.text.length} bytes`);
  const expected = await expectContinue(own.base, '/v1/audio/speech', '', 900_000_000);
  report(`14 Expect (${transport})`, '100-continue, Content-Length 900 MB to speech', `[${expected.statuses.join(', ')}], closed ${expected.closed}`);
  await stopCliServer(own);
}

// 5. the second signal, while a native job runs
{
  const form = new FormData();
  form.append('file', new Blob([new Uint8Array(long)]), 'long.wav');
  form.append('description', 'vocals');
  const reply = fetch(`${base}/v1/audio/separations`, { method: 'POST', body: form }).then(
    (r) => r.status,
    (e: Error) => e.message,
  );
  await sleep(3000);
  const exited = new Promise<number | null>((resolve) => server.child.once('exit', (code) => resolve(code)));
  server.child.kill('SIGTERM');
  await sleep(500);
  const second = performance.now();
  server.child.kill('SIGTERM');
  const code = await exited;
  report('5 second SIGTERM', 'during a 590 s separation', `exit ${code} after ${Math.round(performance.now() - second)} ms; the client saw ${await reply}`);
}

console.log(`\n${lines.length} probes; scratch ${scratch}`);
fs.rmSync(scratch, { recursive: true, force: true });
