/**
 * The model catalog and downloads a person can follow (docs/models.md, "Catalog"), against the hub double: each
 * catalog ID picks exactly its files from its repository's listing; a short name pulled over POST /v1/models with
 * progress events in order and the file verified; GET /v1/models/{id} during the download; two pulls at once fetch
 * once; a cancelled download resumed; a download that would not fit on the cache's disk (a small tmpfs) and a model
 * that would not fit in memory refused with their numbers.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it, type TestContext } from 'node:test';
import { pino } from 'pino';
import { Catalog } from '../../src/services/catalog.js';
import { CATALOG_MODELS } from '../../src/services/catalog-models.js';
import { HubClient } from '../../src/services/hub.js';
import { pickRepoFiles } from '../../src/services/model-files.js';
import { parseModelId } from '../../src/services/model-id.js';
import { HubDouble, type ListedOnly } from '../helpers/hub-double.js';
import { CLI, ROOT, SHARED } from '../helpers/paths.js';
import { cliEnv, runCli, tempDir } from '../helpers/process.js';
import { expectEnvelope, startTestServer, type TestServer } from '../helpers/server.js';

const SILERO = path.join(SHARED, 'models', 'silero', 'ggml-silero-v6.2.0.bin');
const SILERO_REPO = 'ggml-org/whisper-vad';
const SILERO_FILE = 'ggml-silero-v6.2.0.bin';
const SILERO_ID = `${SILERO_REPO}/${SILERO_FILE}`;
const SILERO_SHA256 = '2aa269b785eeb53a82983a20501ddf7c1d9c48e33ab63a41391ac6c9f7fb6987';

/**
 * Files the real repositories hold beside the catalog's (from the same pages the catalog cites), so that picking by
 * quantisation tag meets the choices it meets on the hub.
 */
const NEIGHBOURS: Record<string, Record<string, number>> = {
  'ggml-org/parakeet-GGUF': {
    'ggml-parakeet-tdt-0.6b-v3-f32.bin': 2_508_463_079,
    'ggml-parakeet-tdt-0.6b-v3-f16.bin': 1_255_897_319,
    'ggml-parakeet-tdt-0.6b-v3-q4_0.bin': 355_615_679,
    'ggml-parakeet-tdt-0.6b-v3-q4_k.bin': 415_611_879,
  },
  'ggml-org/Qwen3-ASR-1.7B-GGUF': { 'mmproj-Qwen3-ASR-1.7B-bf16.gguf': 700_000_000 },
  'ggml-org/Qwen3-TTS-12Hz-1.7B-Base-GGUF': { 'Qwen3-TTS-12Hz-1.7B-Base-Q4_K_M.gguf': 1_035_965_280 },
  'ggerganov/whisper.cpp': { 'ggml-medium.bin': 1_533_763_059 },
  'ggml-org/whisper-vad': { 'ggml-silero-v5.1.2.bin': 885_098 },
  // Kokoro's voices come with its checkpoint
  'hexgrad/Kokoro-82M': { 'voices/af_heart.pt': 523_425, 'voices/am_michael.pt': 523_435, 'README.md': 3_000 },
};

interface LoadEvent {
  type?: string;
  state?: string;
  bytes?: number;
  total?: number;
  eta?: number | null;
  model?: { id: string; loaded: boolean };
  error?: { code: string; message: string };
}

/** POST /v1/models asking for progress events; every event once the stream ends. */
async function pullWithEvents(base: string, name: string, signal?: AbortSignal): Promise<LoadEvent[]> {
  const response = await fetch(`${base}/v1/models?model_name=${encodeURIComponent(name)}`, {
    method: 'POST',
    headers: { accept: 'text/event-stream' },
    ...(signal ? { signal } : {}),
  });
  assert.equal(response.status, 200);
  assert.match(response.headers.get('content-type') ?? '', /^text\/event-stream/);
  const text = await response.text();
  return text
    .split('\n\n')
    .filter((frame) => frame.startsWith('data: '))
    .map((frame) => JSON.parse(frame.slice('data: '.length)) as LoadEvent);
}

/** GET /v1/models/{id} until it answers what `wanted` looks for (30 s at most); that answer. */
async function described(base: string, id: string, wanted: (info: Record<string, unknown>) => boolean): Promise<Record<string, unknown>> {
  const deadline = performance.now() + 30_000;
  for (;;) {
    const info = (await (await fetch(`${base}/v1/models/${id}`)).json()) as Record<string, unknown>;
    if (wanted(info)) return info;
    assert.ok(performance.now() < deadline, `GET /v1/models/${id} never answered as awaited; last: ${JSON.stringify(info)}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

function sha256Of(file: string): string {
  return createHash('sha256').update(fs.readFileSync(file)).digest('hex');
}

describe('the model catalog', () => {
  it('names each model by an ID that picks exactly its files, at the sizes it gives, from its repository', async (t) => {
    const double = await HubDouble.start();
    t.after(() => double.close());
    const repos = new Map<string, Record<string, ListedOnly>>();
    for (const entry of CATALOG_MODELS) {
      const files = repos.get(entry.repo) ?? {};
      for (const file of entry.files) files[file.path] = { listedSize: file.bytes };
      for (const [file, size] of Object.entries(NEIGHBOURS[entry.repo] ?? {})) files[file] = { listedSize: size };
      repos.set(entry.repo, files);
    }
    for (const [repo, files] of repos) double.addRepo(repo, { files });
    const hub = new HubClient({ endpoint: double.endpoint, cacheDir: await fsp.mkdtemp(path.join(os.tmpdir(), 'voxd-catalog-')), offline: false });
    const names = new Set<string>();
    const modelsDoc = fs.readFileSync(path.join(ROOT, 'docs', 'models.md'), 'utf8');
    for (const entry of CATALOG_MODELS) {
      assert.match(entry.name, /^[a-z0-9][a-z0-9._-]*$/, entry.name);
      assert.ok(!names.has(entry.name), `${entry.name} once`);
      names.add(entry.name);
      assert.match(entry.source, /^https:\/\//, `${entry.name} cites its source`);
      assert.ok(modelsDoc.includes(`| \`${entry.name}\``), `docs/models.md's catalog table has ${entry.name}`);
      const listing = await hub.listFiles(entry.repo);
      const ref = parseModelId(entry.id, []);
      assert.ok(ref && ref.kind !== 'local' && ref.repo === entry.repo, `${entry.name}: ${entry.id} is in ${entry.repo}`);
      const picked =
        ref.kind === 'hub-file'
          ? [ref.file]
          : (({ model, projector, companions }) => [model, ...(projector ? [projector] : []), ...companions])(pickRepoFiles(entry.repo, listing, ref.quant));
      const named = entry.files.map((f) => f.path);
      assert.deepEqual(
        picked.filter((file) => !file.startsWith('voices/')),
        named,
        `${entry.name}: ${entry.id} downloads what the catalog says`,
      );
      for (const file of entry.files) assert.equal(listing.find((f) => f.path === file.path)?.lfs?.size, file.bytes, `${entry.name}: ${file.path}'s size`);
    }
  });

  it('lists its models with their size, memory and whether they are cached, and takes their names as model IDs', async (t) => {
    const server = await startTestServer(t, {});
    const listed = (await (await fetch(`${server.base}/v1/models?available=true`)).json()) as { data: Record<string, unknown>[] };
    const parakeet = listed.data.find((m) => m.id === 'parakeet-v3');
    assert.deepEqual(
      {
        target: parakeet?.target,
        task: parakeet?.task,
        engine: parakeet?.engine,
        cached: parakeet?.cached,
        size: parakeet?.size_bytes,
        license: parakeet?.license,
      },
      {
        target: 'ggml-org/parakeet-GGUF/ggml-parakeet-tdt-0.6b-v3-q8_0.bin',
        task: 'stt',
        engine: 'parakeet',
        cached: false,
        size: 668_757_119,
        license: 'CC-BY-4.0',
      },
    );
    assert.equal(typeof parakeet?.memory_bytes, 'number');
    assert.ok(listed.data.filter((m) => typeof m.cached === 'boolean').length === CATALOG_MODELS.length, 'every catalog model is listed');
    const described = (await (await fetch(`${server.base}/v1/models/whisper-base.en`)).json()) as Record<string, unknown>;
    assert.equal(described.target, 'ggerganov/whisper.cpp/ggml-base.en.bin');
    // a name is a model ID: the hub (out of reach here) is asked for its files
    await expectEnvelope(
      await fetch(`${server.base}/v1/audio/transcriptions`, { method: 'POST', body: speechForm('whisper-base.en') }),
      502,
      'model_download_failed',
    );
  });
});

function speechForm(model: string): FormData {
  const form = new FormData();
  form.append('model', model);
  form.append('file', new Blob([fs.readFileSync(path.join(SHARED, 'audio', 'speech', 'jfk.wav'))]), 'jfk.wav');
  return form;
}

describe('downloads over the API', () => {
  let double: HubDouble;
  before(async () => {
    double = await HubDouble.start({ chunkSize: 32 * 1024 });
    double.addRepo(SILERO_REPO, { files: { [SILERO_FILE]: SILERO } });
  });
  after(() => double.close());

  /** A server whose hub is the double, with a cache of its own. */
  const serverOnDouble = (t: TestContext, env: NodeJS.ProcessEnv = {}): Promise<TestServer> => startTestServer(t, {}, { HF_ENDPOINT: double.endpoint, ...env });

  it('pulls a model by its catalog name with progress events in order, shown by GET /v1/models too, and verifies it', async (t) => {
    const server = await serverOnDouble(t);
    double.setFaults(SILERO_REPO, SILERO_FILE, { chunkDelayMs: 60 });
    t.after(() => double.setFaults(SILERO_REPO, SILERO_FILE, {}));
    const events = pullWithEvents(server.base, 'silero-vad');
    // while it downloads, the model's entry and the list say how far it got
    const seen = await described(server.base, 'silero-vad', (info) => info.state === 'downloading' && (info.bytes as number) > 0);
    assert.equal(seen.total, 885_098);
    assert.equal(seen.target, SILERO_ID);
    const list = (await (await fetch(`${server.base}/v1/models`)).json()) as { data: { id: string; state?: string; loaded: boolean }[] };
    // (its download may have ended meanwhile on a slow machine: then it is loading)
    const listed = list.data.filter((m) => m.id === SILERO_ID);
    assert.equal(listed.length, 1);
    assert.match(listed[0]?.state ?? '', /^(downloading|loading)$/);
    assert.equal(listed[0]?.loaded, false);

    const all = await events;
    const progress = all.filter((e) => e.type === 'model.progress');
    const downloading = progress.filter((e) => e.state === 'downloading');
    for (const [i, event] of downloading.entries()) {
      if (i > 0) assert.ok((event.bytes as number) >= (downloading[i - 1]?.bytes as number), 'bytes never go back');
    }
    // the total is known once the file's size is (its HEAD request)
    const sized = downloading.filter((e) => (e.total as number) > 0);
    assert.ok(sized.length >= 2, `${sized.length} progress events with a total while it downloaded`);
    for (const event of sized) assert.equal(event.total, 885_098);
    assert.ok(
      downloading.some((e) => typeof e.eta === 'number'),
      'a time left once there is a rate',
    );
    const last = all.at(-1);
    assert.equal(last?.type, 'model.loaded');
    assert.deepEqual([last?.model?.id, last?.model?.loaded], [SILERO_ID, true]);
    const cached = path.join(server.hubCache, 'models--ggml-org--whisper-vad', 'snapshots');
    const [commit] = fs.readdirSync(cached);
    assert.equal(sha256Of(path.join(cached, commit as string, SILERO_FILE)), SILERO_SHA256);
    const available = (await (await fetch(`${server.base}/v1/models?available=true`)).json()) as { data: { id: string; cached?: boolean }[] };
    assert.equal(available.data.find((m) => m.id === 'silero-vad')?.cached, true);
  });

  it('answers an ID that names no model with its 4xx, even when progress events were asked for', async (t) => {
    const server = await serverOnDouble(t);
    for (const accept of ['text/event-stream', 'application/json']) {
      const response = await fetch(`${server.base}/v1/models?model_name=no-such-model`, { method: 'POST', headers: { accept } });
      await expectEnvelope(response, 404, 'model_not_found');
    }
  });

  it('refuses a model larger than any disk before a byte of it is fetched, without root', async (t) => {
    const server = await serverOnDouble(t);
    const repo = 'voxd-test/enormous-GGUF';
    double.addRepo(repo, { files: { 'enormous-Q8_0.gguf': { listedSize: 2 ** 50 } } });
    const response = await fetch(`${server.base}/v1/models?model_name=${repo}`, { method: 'POST' });
    assert.equal(response.status, 507);
    const { error } = (await response.json()) as { error: { code: string; message: string } };
    assert.equal(error.code, 'insufficient_storage');
    assert.match(error.message, /^model voxd-test\/enormous-GGUF needs 1125\.9 TB more on disk, and the disk that holds .* has [\d.]+ [kMGT]?B free/);
    assert.deepEqual(
      double.requests.filter((r) => r.file?.startsWith(repo)),
      [],
      'not even a HEAD: the listing said it all',
    );
  });

  it('downloads once for two pulls at once', async (t) => {
    const server = await serverOnDouble(t);
    const before = double.contentTransfers(SILERO_REPO, SILERO_FILE).length;
    const [streamed, plain] = await Promise.all([
      pullWithEvents(server.base, 'silero-vad'),
      fetch(`${server.base}/v1/models`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model_name: SILERO_ID }) }),
    ]);
    assert.equal(plain.status, 200);
    assert.equal(streamed.at(-1)?.type, 'model.loaded');
    assert.equal(double.contentTransfers(SILERO_REPO, SILERO_FILE).length - before, 1);
  });

  it('cancels a download with DELETE /v1/models, keeps what came, and resumes from there', async (t) => {
    const server = await serverOnDouble(t);
    let release = (): void => undefined;
    const held = new Promise<void>((resolve) => (release = resolve));
    double.setFaults(SILERO_REPO, SILERO_FILE, { pauseAt: { bytes: 400_000, until: held } });
    t.after(() => {
      release();
      double.setFaults(SILERO_REPO, SILERO_FILE, {});
    });
    const events = pullWithEvents(server.base, 'silero-vad');
    await described(server.base, 'silero-vad', (info) => ((info.bytes as number | undefined) ?? 0) >= 400_000);
    const cancel = await fetch(`${server.base}/v1/models?model_name=silero-vad`, { method: 'DELETE' });
    assert.equal(cancel.status, 204, await cancel.text());
    const ended = await events;
    assert.equal(ended.at(-1)?.error?.code, 'download_cancelled');
    const afterCancel = (await (await fetch(`${server.base}/v1/models/silero-vad`)).json()) as { state?: string };
    assert.equal(afterCancel.state, undefined, 'no download under way');
    release();
    double.setFaults(SILERO_REPO, SILERO_FILE, {});
    const resumed = await pullWithEvents(server.base, 'silero-vad');
    assert.equal(resumed.at(-1)?.type, 'model.loaded');
    const ranges = double.contentTransfers(SILERO_REPO, SILERO_FILE).map((r) => r.range);
    assert.match(ranges.at(-1) ?? '', /^bytes=4\d{5}-$/, 'the second transfer resumed where the first stopped');
  });

  it('refuses a download that would not fit on the cache disk, before it starts, with the numbers', async (t) => {
    const mountPoint = await fsp.mkdtemp(path.join(os.tmpdir(), 'voxd-small-disk-'));
    try {
      execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=40m', 'tmpfs', mountPoint], { stdio: 'ignore' });
    } catch {
      await fsp.rm(mountPoint, { recursive: true, force: true });
      return t.skip('mounting a small tmpfs needs root (CAP_SYS_ADMIN)');
    }
    t.after(async () => {
      execFileSync('umount', [mountPoint]);
      await fsp.rm(mountPoint, { recursive: true, force: true });
    });
    const big = 'voxd-test/big-model';
    double.addRepo(big, { files: { 'model.bin': Buffer.alloc(12 * 1024 * 1024, 7) } });
    const server = await serverOnDouble(t, { HF_HUB_CACHE: path.join(mountPoint, 'hub') });
    const response = await fetch(`${server.base}/v1/models?model_name=${big}/model.bin`, { method: 'POST' });
    assert.equal(response.status, 507);
    const { error } = (await response.json()) as { error: { code: string; message: string } };
    assert.equal(error.code, 'insufficient_storage');
    assert.match(error.message, /needs 12\.6 MB more on disk, and the disk that holds .* has [\d.]+ MB free/);
    assert.deepEqual(double.contentTransfers(big, 'model.bin'), [], 'no byte of it was fetched');
  });

  it('refuses a model that would not fit in memory before loading it, with the numbers', async (t) => {
    const server = await serverOnDouble(t);
    const dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'voxd-huge-model-'));
    t.after(() => fsp.rm(dir, { recursive: true, force: true }));
    // sparse: twice the machine's memory, and no disk
    const huge = path.join(dir, 'ggml-huge.bin');
    await fsp.writeFile(huge, 'lmgg');
    await fsp.truncate(huge, os.totalmem() * 2);
    const response = await fetch(`${server.base}/v1/models?model_name=${encodeURIComponent(huge)}`, { method: 'POST' });
    assert.equal(response.status, 507);
    const { error } = (await response.json()) as { error: { code: string; message: string } };
    assert.equal(error.code, 'insufficient_memory');
    assert.match(error.message, /needs about [\d.]+ GB of memory, and [\d.]+ [kMG]?B is available/);
  });
});

describe('voxd pull, voxd models and voxd rm', () => {
  let double: HubDouble;
  before(async () => {
    double = await HubDouble.start({ chunkSize: 16 * 1024 });
    double.addRepo(SILERO_REPO, { files: { [SILERO_FILE]: SILERO } });
  });
  after(() => double.close());

  it('pulls by catalog name with plain progress lines, lists it as cached, and removes it', async (t) => {
    const scratch = await tempDir(t, 'voxd-pull-');
    const env = cliEnv(scratch, { HF_ENDPOINT: double.endpoint });
    const pulled = await runCli(t, ['pull', 'silero-vad'], env, 30_000);
    assert.equal(pulled.code, 0, pulled.stderr);
    assert.match(pulled.stderr, /^downloading ggml-org\/whisper-vad\/ggml-silero-v6\.2\.0\.bin \(885\.1 kB\)$/m, 'plain lines, no bar, off a terminal');
    assert.ok(!pulled.stderr.includes('\r') && !pulled.stderr.includes('\u001b'), 'no carriage return or escape sequence');
    const line = /^silero-vad \(ggml-org\/whisper-vad\/ggml-silero-v6\.2\.0\.bin\): (\S+) \(885\.1 kB\)$/m.exec(pulled.stdout);
    assert.ok(line, `ends with the path and size: ${pulled.stdout}`);
    assert.equal(sha256Of(line[1] as string), SILERO_SHA256);

    const listed = await runCli(t, ['models', '--api-url', 'http://127.0.0.1:9'], env);
    assert.equal(listed.code, 0, listed.stderr);
    assert.match(listed.stdout, /^ {2}cached +silero-vad +vad +885\.1 kB {2}The voice activity detector/m);
    assert.match(listed.stdout, /^ {13}parakeet-v3 +stt +668\.8 MB/m, 'what is not cached is listed too');
    assert.match(listed.stdout, /no voxd server answers at http:\/\/127\.0\.0\.1:9/);

    const removed = await runCli(t, ['rm', 'silero-vad'], env);
    assert.equal(removed.code, 0, removed.stderr);
    assert.equal(removed.stdout, 'removed ggml-org/whisper-vad/ggml-silero-v6.2.0.bin (885.1 kB freed)\n');
    assert.equal(fs.existsSync(line[1] as string), false);
    assert.equal((await runCli(t, ['rm', 'silero-vad'], env)).stdout, 'ggml-org/whisper-vad/ggml-silero-v6.2.0.bin is not in the hub cache\n');
    const unknown = await runCli(t, ['pull', 'no-such-model'], env);
    assert.equal(unknown.code, 1);
    assert.match(unknown.stderr, /^voxd: no-such-model is neither a catalog name \(whisper-tiny\.en, /);
  });

  it("removes a model's own files, and an mmproj once no other model of its repository is cached", async (t) => {
    const scratch = await tempDir(t, 'voxd-rm-');
    const env = cliEnv(scratch, { HF_ENDPOINT: double.endpoint });
    const repo = 'voxd-test/pair-GGUF';
    double.addRepo(repo, {
      files: { 'pair-Q8_0.gguf': Buffer.alloc(3000, 1), 'pair-Q4_K_M.gguf': Buffer.alloc(2500, 2), 'mmproj-pair-f16.gguf': Buffer.alloc(2000, 3) },
    });
    for (const id of [repo, `${repo}:Q4_K_M`]) assert.equal((await runCli(t, ['pull', id], env, 30_000)).code, 0);
    const first = await runCli(t, ['rm', `${repo}:Q4_K_M`], env);
    assert.equal(first.stdout, `removed ${repo}:Q4_K_M (2.5 kB freed)\n`, 'the Q8_0 model still needs the mmproj');
    const second = await runCli(t, ['rm', repo], env);
    assert.equal(second.stdout, `removed ${repo} (5.0 kB freed)\n`);
  });

  it('draws a bar on a terminal (tmux), and a pull cut short resumes', async (t) => {
    try {
      execFileSync('tmux', ['-V'], { stdio: 'ignore' });
    } catch {
      return t.skip('tmux is not installed');
    }
    const scratch = await tempDir(t, 'voxd-pull-tty-');
    let release = (): void => undefined;
    const held = new Promise<void>((resolve) => (release = resolve));
    // slow enough that the bar (redrawn every 100 ms) shows the transfer near where it is held
    double.setFaults(SILERO_REPO, SILERO_FILE, { chunkDelayMs: 30, pauseAt: { bytes: 300_000, until: held } });
    t.after(() => {
      release();
      double.setFaults(SILERO_REPO, SILERO_FILE, {});
    });
    const session = `voxd-pull-${process.pid}`;
    const env = cliEnv(scratch, { HF_ENDPOINT: double.endpoint });
    const exports = Object.entries(env)
      .filter(([key]) => /^(HF_|VOXD_|PATH$|HOME$)/.test(key))
      .map(([key, value]) => `${key}=${JSON.stringify(value)}`)
      .join(' ');
    const out = path.join(scratch, 'out.txt');
    // an interactive shell, as a person's: Ctrl-C stops the command, and the shell keeps the screen
    execFileSync('tmux', ['new-session', '-d', '-s', session, '-x', '200', '-y', '30', 'bash --norc --noprofile']);
    t.after(() => execFileSync('tmux', ['kill-session', '-t', session], { stdio: 'ignore' }));
    execFileSync('tmux', ['send-keys', '-t', session, `env ${exports} ${process.execPath} ${CLI} pull silero-vad > ${out}`, 'Enter']);
    const screen = (): string => execFileSync('tmux', ['capture-pane', '-p', '-t', session], { encoding: 'utf8' });
    const deadline = performance.now() + 20_000;
    while (!/\[#+\.+\] [23]\d% /.test(screen())) {
      assert.ok(performance.now() < deadline, `no bar on the terminal: ${screen()}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    assert.match(screen(), /^ggml-org\/whisper-vad\/ggml-silero-v6\.2\.0\.bin \[#{6,10}\.{20,24}\] [23]\d% \d{3}\.\d kB\/885\.1 kB [\d.]+ [kM]B\/s$/m);
    // Ctrl-C: the transfer stops, its partial file stays; the next pull resumes it
    execFileSync('tmux', ['send-keys', '-t', session, 'C-c']);
    const stopped = performance.now() + 10_000;
    while (!/voxd: interrupted; `voxd pull silero-vad` again resumes the download/.test(screen())) {
      assert.ok(performance.now() < stopped, `Ctrl-C did not stop the pull: ${screen()}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    release();
    double.setFaults(SILERO_REPO, SILERO_FILE, {});
    const again = await runCli(t, ['pull', 'silero-vad'], env, 30_000);
    assert.equal(again.code, 0, again.stderr);
    // at what the first pull had written when it stopped (what the double sent, less what was still in flight)
    assert.match(again.stderr, /\(885\.1 kB, resuming at [1-9]\d{1,2}\.\d kB\)/);
    assert.match(again.stdout, /\(885\.1 kB\)$/m);
  });
});

// the catalog's own consistency, without a hub
it('reports a catalog model as cached only when every one of its files is', async () => {
  const cacheDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'voxd-catalog-cache-'));
  const catalog = new Catalog(CATALOG_MODELS, new HubClient({ endpoint: 'http://127.0.0.1:9', cacheDir, offline: true, logger: pino({ level: 'silent' }) }));
  const entry = catalog.find('SILERO-VAD');
  assert.equal(entry?.id, SILERO_ID);
  assert.equal(catalog.isCached(entry!), false);
  await fsp.rm(cacheDir, { recursive: true, force: true });
});
