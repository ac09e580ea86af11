/**
 * Kokoro benchmark (`npm run bench:tts-kokoro`) on the full-size random-weight checkpoint (scripts/
 * make-kokoro-test-model.mjs --size full: the released shapes and voice packs; written into build/test-models on
 * first use). Random weights speak noise, but every stage does the real model's arithmetic on the real shapes, and a
 * phoneme's duration is near the released model's (about 3.5 frames). Side by side, in one run:
 *  1. one sentence (its phonemes given, so both sides get the same tokens): voxd's engine in process against the
 *     upstream model (hexgrad/kokoro's own code, ../shared/reference/kokoro, on Debian's python3-torch) at the same
 *     thread count, median of RUNS after a warm-up; skipped, saying so, where /usr/bin/python3 has no torch;
 *  2. 8 requests over HTTP (a sentence each, distinct texts, WAV): all at once (the fixed-window batch) against one
 *     after another, RUNS times each alternately;
 *  3. a streamed 5-sentence text over HTTP: time to the first audio byte against the whole text's time;
 *  4. seconds of audio per second of wall time: one request alone, and the 8 of part 2.
 * The engine's stage timings (text, prosody, harmonic source, decoder and generator, inverse STFT) show where the time
 * goes.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { pino } from 'pino';
import { resolveConfig } from '../src/config.js';
import type { NativeKokoroInput, NativeKokoroTimings } from '../src/native/addon.js';
import { loadNative } from '../src/native/load.js';
import { startServer } from '../src/server.js';
import { median, timed } from './stats.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const REFERENCE = path.join(root, '..', 'shared', 'reference', 'kokoro');
const RATE = 24000;
const RUNS = 3;
const THREADS = Math.min(8, Math.max(1, os.availableParallelism()));
/** "The quick brown fox jumps over the lazy dog." in Kokoro's phonemes */
const PHONEMES = 'ðə kwˈɪk bɹˈWn fˈɑks ʤˈʌmps ˈOvəɹ ðə lˈAzi dˈɔɡ.';
const SENTENCES = [
  'The quick brown fox jumps over the lazy dog.',
  'A second sentence follows the first one.',
  'Here is a third sentence with a few more words.',
  'The fourth sentence is short.',
  'And this is the fifth and final sentence.',
  'Six people walked along the river at dawn.',
  'Seven small boats waited in the harbour.',
  'Eight notes rang out from the old church bell.',
];

interface KokoroPaths {
  dir: string;
  checkpoint: string;
  config: string;
  voices: string;
}

function stageLine(before: NativeKokoroTimings, after: NativeKokoroTimings, calls: number): string {
  const per = (key: keyof NativeKokoroTimings): string => ((after[key] - before[key]) / calls).toFixed(0);
  return `text ${per('textMs')} ms, prosody ${per('prosodyMs')} ms, source ${per('sourceMs')} ms, decoder+generator ${per('decoderMs')} ms, iSTFT ${per('istftMs')} ms per call`;
}

const generator = (await import(pathToFileURL(path.join(root, 'scripts', 'make-kokoro-test-model.mjs')).href)) as {
  makeKokoroTestModel(options: { size: 'full'; seed: number }): Promise<KokoroPaths>;
};
const model = await generator.makeKokoroTestModel({ size: 'full', seed: 1 });
const config = JSON.parse(fs.readFileSync(model.config, 'utf8')) as { vocab: Record<string, number> };
const ids = [0, ...[...PHONEMES].flatMap((p) => (p in config.vocab ? [config.vocab[p] as number] : [])), 0];
const pack = (await loadNative().readTorchTensor(path.join(model.voices, 'af_heart.pt'), '')).data;
const row = [...PHONEMES].length - 1;
const style = pack.slice(row * 256, (row + 1) * 256);

console.log(`voxd Kokoro benchmark on ${os.availableParallelism()} cores (${os.cpus()[0]?.model ?? 'unknown CPU'}), ${THREADS} threads`);

// ---- 1. one sentence, in process, against PyTorch ----
{
  const native = await loadNative().KokoroModel.load({ checkpoint: model.checkpoint, threads: THREADS });
  const input: NativeKokoroInput = { ids: Int32Array.from(ids), style, speed: 1, seed: 1, noise: true };
  const [first] = await native.synthesize([input]);
  const seconds = (first?.audio.length ?? 0) / RATE;
  const before = native.timings();
  const runs: number[] = [];
  for (let i = 0; i < RUNS; i++) runs.push(await timed(() => native.synthesize([input])));
  const ms = median(runs);
  console.log(`1. one sentence (${ids.length} tokens, ${seconds.toFixed(2)} s of audio): voxd ${ms.toFixed(0)} ms (RTF ${(ms / 1000 / seconds).toFixed(3)})`);
  console.log(`   voxd stages: ${stageLine(before, native.timings(), RUNS)}`);
  native.release();
  const hasTorch = spawnSync('/usr/bin/python3', ['-c', 'import torch'], { stdio: 'ignore' }).status === 0;
  if (!hasTorch) {
    console.log('   PyTorch: skipped (/usr/bin/python3 has no torch: apt-get install python3-torch)');
  } else {
    const inputs = path.join(os.tmpdir(), `voxd-kokoro-bench-${process.pid}.json`);
    fs.writeFileSync(inputs, JSON.stringify([{ input_ids: ids, style: Array.from(style) }]));
    const run = spawnSync('/usr/bin/python3', [path.join(root, 'bench', 'kokoro_torch.py'), REFERENCE, model.dir, String(THREADS), String(RUNS), inputs], {
      encoding: 'utf8',
    });
    fs.rmSync(inputs, { force: true });
    if (run.status !== 0) throw new Error(`the PyTorch run failed: ${run.stderr}`);
    const torch = JSON.parse(run.stdout.trim().split('\n').at(-1) as string) as { seconds: number[] };
    const torchMs = median(torch.seconds) * 1000;
    console.log(
      `   upstream PyTorch ${torchMs.toFixed(0)} ms (RTF ${(torchMs / 1000 / seconds).toFixed(3)}) -> voxd ${(torchMs / ms).toFixed(2)}x faster (target >= 3x)`,
    );
  }
}

// ---- 2-4. over HTTP ----
const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'voxd-bench-kokoro-'));
const serverConfig = resolveConfig({ host: '127.0.0.1', port: 0, logDir: path.join(scratch, 'logs'), ttsMaxBatchSize: 8 }, {});
const server = await startServer(serverConfig, pino({ level: 'silent' }), { HF_ENDPOINT: 'http://127.0.0.1:9', HF_HUB_CACHE: path.join(scratch, 'hub') });
const speech = (body: Record<string, unknown>): Promise<Response> =>
  fetch(`http://127.0.0.1:${server.port}/v1/audio/speech`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: model.dir, voice: 'af_heart', response_format: 'wav', ...body }),
  });
/** Seconds of audio in a WAV answer (16-bit mono at 24 kHz, a 44-byte header). */
const wavSeconds = async (response: Response): Promise<number> => ((await response.arrayBuffer()).byteLength - 44) / 2 / RATE;
try {
  await wavSeconds(await speech({ input: SENTENCES[0] })); // load and warm up
  const serialMs: number[] = [];
  const batchedMs: number[] = [];
  let audioSeconds = 0;
  for (let i = 0; i < RUNS; i++) {
    serialMs.push(
      await timed(async () => {
        audioSeconds = 0;
        for (const input of SENTENCES) audioSeconds += await wavSeconds(await speech({ input }));
      }),
    );
    batchedMs.push(await timed(() => Promise.all(SENTENCES.map(async (input) => wavSeconds(await speech({ input }))))));
  }
  const serial = median(serialMs);
  const batched = median(batchedMs);
  console.log(
    `2. ${SENTENCES.length} requests: one after another ${(serial / 1000).toFixed(2)} s, all at once ${(batched / 1000).toFixed(2)} s -> ${(serial / batched).toFixed(2)}x (target >= 2x)`,
  );
  const long = SENTENCES.slice(0, 5).join(' ');
  const firstByte: number[] = [];
  const whole: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const start = performance.now();
    const response = await speech({ input: long, stream: true });
    const reader = (response.body as ReadableStream<Uint8Array>).getReader();
    await reader.read();
    firstByte.push(performance.now() - start);
    while (!(await reader.read()).done);
    whole.push(performance.now() - start);
  }
  console.log(`3. a streamed 5-sentence text: first audio after ${median(firstByte).toFixed(0)} ms, all of it after ${median(whole).toFixed(0)} ms`);
  let aloneSeconds = 0;
  const aloneMs = await timed(async () => {
    aloneSeconds = await wavSeconds(await speech({ input: SENTENCES[0] }));
  });
  console.log(
    `4. seconds of audio per second: one request ${(aloneSeconds / (aloneMs / 1000)).toFixed(2)}, ${SENTENCES.length} at once ${(audioSeconds / (batched / 1000)).toFixed(2)}`,
  );
} finally {
  await server.close();
  fs.rmSync(scratch, { recursive: true, force: true });
}
