import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { describe, it, type TestContext } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { defaultHubCacheDir, HubClient, HubError, type HubErrorKind, type HubOptions } from '../../src/services/hub.js';
import { gitBlobId, heldUntilEnd, HubDouble, type HubDoubleOptions } from '../helpers/hub-double.js';
import { SILERO_V6 } from '../helpers/paths.js';

const REPO = 'ggml-org/whisper-vad';
const FILE = 'ggml-silero-v6.2.0.bin';
/** A small file in a subfolder: not LFS, so served by the hub itself with a git-blob ETag. */
const SMALL_FILE = 'config/vad.json';
const SMALL_CONTENT = Buffer.from('{"threshold":0.5}\n');
const SILERO = fs.readFileSync(SILERO_V6);
const SILERO_SHA256 = createHash('sha256').update(SILERO).digest('hex');

interface Setup {
  double: HubDouble;
  commit: string;
  cacheDir: string;
  repoDir: string;
  infoLogs: string[];
  warnLogs: string[];
  client(overrides?: Partial<HubOptions>): HubClient;
}

/** A hub double serving REPO, a fresh cache dir, and a client factory; all cleaned up after the test. */
async function setup(t: TestContext, doubleOptions: HubDoubleOptions = {}): Promise<Setup> {
  const double = await HubDouble.start(doubleOptions);
  const commit = double.addRepo(REPO, { files: { [FILE]: SILERO_V6, [SMALL_FILE]: SMALL_CONTENT } });
  const cacheDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'voxd-hub-test-'));
  const infoLogs: string[] = [];
  const warnLogs: string[] = [];
  const logger = { info: (_fields: object, msg = '') => void infoLogs.push(msg), warn: (_fields: object, msg = '') => void warnLogs.push(msg) };
  t.after(async () => {
    await double.close();
    await fsp.rm(cacheDir, { recursive: true, force: true });
  });
  return {
    double,
    commit,
    cacheDir,
    repoDir: path.join(cacheDir, 'models--ggml-org--whisper-vad'),
    infoLogs,
    warnLogs,
    client: (overrides = {}) => new HubClient({ endpoint: double.endpoint, cacheDir, offline: false, logger, ...overrides }),
  };
}

async function rejectsWith(promise: Promise<unknown>, kind: HubErrorKind, message: RegExp): Promise<HubError> {
  let caught: unknown;
  await assert.rejects(promise, (error) => ((caught = error), true));
  assert.ok(caught instanceof HubError, `expected a HubError, got ${String(caught)}`);
  assert.equal(caught.kind, kind, caught.message);
  assert.match(caught.message, message);
  return caught;
}

/** `promise`, or a failure once it is still pending after `ms`: a hang fails the test instead of stalling the suite. */
async function within<T>(ms: number, promise: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const expiry = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what}: still pending after ${ms} ms`)), ms)));
  try {
    return await Promise.race([promise, expiry]);
  } finally {
    clearTimeout(timer);
  }
}

/** Nothing in the cache may look like a valid copy of FILE: no blob, no snapshot entry. */
function assertNothingValidCached(s: Setup, client: HubClient): void {
  assert.equal(client.cachedFile(REPO, FILE), null);
  assert.equal(fs.existsSync(path.join(s.repoDir, 'blobs', SILERO_SHA256)), false);
  assert.equal(fs.existsSync(path.join(s.repoDir, 'snapshots', s.commit, FILE)), false);
}

describe('hub client', () => {
  it('downloads into the Hugging Face cache layout: blobs, relative snapshot links, refs', async (t) => {
    const s = await setup(t);
    const client = s.client();
    const filePath = await client.downloadFile(REPO, FILE);

    assert.equal(filePath, path.join(s.repoDir, 'snapshots', s.commit, FILE));
    assert.deepEqual(await fsp.readFile(filePath), SILERO);
    assert.ok((await fsp.lstat(filePath)).isSymbolicLink());
    assert.equal(await fsp.readlink(filePath), path.join('..', '..', 'blobs', SILERO_SHA256));
    assert.equal(await fsp.readFile(path.join(s.repoDir, 'refs', 'main'), 'utf8'), s.commit);

    const smallPath = await client.downloadFile(REPO, SMALL_FILE);
    assert.deepEqual(await fsp.readFile(smallPath), SMALL_CONTENT);
    const smallLink = await fsp.readlink(smallPath);
    assert.match(smallLink, /^\.\.\/\.\.\/\.\.\/blobs\/[0-9a-f]{40}$/, 'a non-LFS blob is named by its git ETag');

    assert.equal((await fsp.readdir(path.join(s.repoDir, 'blobs'))).length, 2, 'no .incomplete left');
    assert.equal(s.double.contentTransfers(REPO, FILE).length, 1);
    assert.ok(s.infoLogs.includes(`downloading ${REPO}/${FILE} (885.1 kB)`), s.infoLogs.join('\n'));
    assert.ok(s.infoLogs.some((line) => line.startsWith(`downloaded ${REPO}/${FILE} (885.1 kB, `)));
  });

  it('a cache hit does not download the blob again, even under a new commit', async (t) => {
    const s = await setup(t);
    const client = s.client();
    const first = await client.downloadFile(REPO, FILE);
    assert.equal(await client.downloadFile(REPO, FILE), first);

    const newCommit = s.double.addRepo(REPO, { files: { [FILE]: SILERO_V6 } });
    const second = await client.downloadFile(REPO, FILE);
    assert.equal(second, path.join(s.repoDir, 'snapshots', newCommit, FILE));
    assert.equal(await fsp.readFile(path.join(s.repoDir, 'refs', 'main'), 'utf8'), newCommit);
    assert.deepEqual(await fsp.readFile(second), SILERO);
    assert.equal(s.double.contentTransfers(REPO, FILE).length, 1);
  });

  it('offline: a hit makes no request at all, a miss says how to get the file', async (t) => {
    const s = await setup(t);
    const cachedPath = await s.client().downloadFile(REPO, FILE);
    const requestsBefore = s.double.requests.length;

    const offline = s.client({ offline: true });
    assert.equal(await offline.downloadFile(REPO, FILE), cachedPath);
    assert.equal(offline.cachedFile(REPO, FILE), cachedPath);
    await rejectsWith(offline.downloadFile(REPO, SMALL_FILE), 'offline', /config\/vad\.json is not in the Hugging Face cache .*HF_HUB_OFFLINE=1 or --offline/);
    await rejectsWith(offline.downloadFile('acme/absent', FILE), 'offline', /acme\/absent/);
    assert.equal(s.double.requests.length, requestsBefore);
  });

  it('unknown repos and files are not_found errors that name them', async (t) => {
    const s = await setup(t);
    const client = s.client();
    const repoError = await rejectsWith(client.downloadFile('ggml-org/nope', FILE), 'not_found', /repository ggml-org\/nope not found/);
    assert.equal(repoError.status, 404);
    await rejectsWith(client.downloadFile(REPO, 'missing.bin'), 'not_found', /file missing\.bin not found in repository ggml-org\/whisper-vad/);
    await rejectsWith(client.listFiles('ggml-org/nope'), 'not_found', /ggml-org\/nope/);
    await rejectsWith(client.downloadFile(REPO, FILE, { revision: 'v9' }), 'not_found', /revision v9 not found/);
    await rejectsWith(client.downloadFile(REPO, '../../escape.bin'), 'not_found', /invalid file path/);
    assert.equal(fs.existsSync(s.repoDir), false);
  });

  it('a private repo needs HF_TOKEN, which never reaches the CDN on another host', async (t) => {
    const s = await setup(t);
    s.double.addRepo('acme/private', { files: { [FILE]: SILERO_V6 }, token: 'hf_secret' });

    const anonymous = await rejectsWith(s.client().downloadFile('acme/private', FILE), 'unauthorized', /acme\/private .*set HF_TOKEN/);
    assert.equal(anonymous.status, 401);
    await rejectsWith(s.client({ token: 'hf_wrong' }).downloadFile('acme/private', FILE), 'unauthorized', /HF_TOKEN is set but does not grant access/);

    const filePath = await s.client({ token: 'hf_secret' }).downloadFile('acme/private', FILE);
    assert.deepEqual(await fsp.readFile(filePath), SILERO);
    const authorized = s.double.requests.filter((r) => r.file === `acme/private/${FILE}` && r.authorization === 'Bearer hf_secret');
    const cdn = s.double.requests.filter((r) => r.server === 'cdn');
    assert.ok(authorized.some((r) => r.server === 'hub' && r.method === 'HEAD'));
    assert.equal(cdn.length, 1, 'the GET goes straight to the CDN the HEAD pointed at');
    assert.equal(cdn[0]?.authorization, undefined);
  });

  it('follows an LFS redirect to another path on the same host, keeping the token there', async (t) => {
    const s = await setup(t, { lfsRedirect: 'same-host' });
    s.double.addRepo('acme/private', { files: { [FILE]: SILERO_V6 }, token: 'hf_secret' });
    const filePath = await s.client({ token: 'hf_secret' }).downloadFile('acme/private', FILE);
    assert.deepEqual(await fsp.readFile(filePath), SILERO);
    const [transfer, ...others] = s.double.contentTransfers('acme/private', FILE);
    assert.equal(others.length, 0);
    assert.equal(transfer?.server, 'hub');
    assert.match(transfer?.path ?? '', /^\/cdn-lfs\//);
    assert.equal(transfer?.authorization, 'Bearer hf_secret');
  });

  it('a truncated transfer fails clearly, leaves nothing valid, and the retry resumes it', async (t) => {
    const s = await setup(t);
    s.double.setFaults(REPO, FILE, { truncateAfterBytes: 300_000 });
    const client = s.client();
    await rejectsWith(client.downloadFile(REPO, FILE), 'network', /interrupted after \d+ of 885098 bytes.*next attempt resumes/);
    assertNothingValidCached(s, client);
    const partialSize = (await fsp.stat(path.join(s.repoDir, 'blobs', `${SILERO_SHA256}.incomplete`))).size;
    assert.ok(partialSize > 0 && partialSize <= 300_000, `partial size ${partialSize}`);

    const filePath = await client.downloadFile(REPO, FILE);
    assert.deepEqual(await fsp.readFile(filePath), SILERO);
    const transfers = s.double.contentTransfers(REPO, FILE);
    assert.equal(transfers.length, 2);
    assert.equal(transfers[1]?.range, `bytes=${partialSize}-`);
    assert.equal(transfers[1]?.status, 206);
    assert.ok(s.infoLogs.some((line) => line.includes('resuming at')));
    assert.deepEqual(await fsp.readdir(path.join(s.repoDir, 'blobs')), [SILERO_SHA256]);
  });

  it('starts over when the server answers a Range request with the whole file', async (t) => {
    const s = await setup(t);
    s.double.setFaults(REPO, FILE, { truncateAfterBytes: 300_000, ignoreRange: true });
    const client = s.client();
    await rejectsWith(client.downloadFile(REPO, FILE), 'network', /interrupted/);
    const filePath = await client.downloadFile(REPO, FILE);
    assert.deepEqual(await fsp.readFile(filePath), SILERO);
    const retry = s.double.contentTransfers(REPO, FILE)[1];
    assert.match(retry?.range ?? '', /^bytes=\d+-$/);
    assert.equal(retry?.status, 200);
  });

  it('two concurrent downloads of one file make one GET', async (t) => {
    const s = await setup(t);
    s.double.setFaults(REPO, FILE, { chunkDelayMs: 5 });
    const client = s.client();
    const [a, b] = await Promise.all([client.downloadFile(REPO, FILE), client.downloadFile(REPO, FILE)]);
    assert.equal(a, b);
    assert.deepEqual(await fsp.readFile(a), SILERO);
    assert.equal(s.double.contentTransfers(REPO, FILE).length, 1);
  });

  it('a sha256 mismatch is an integrity error and nothing is left in the cache', async (t) => {
    const s = await setup(t);
    s.double.setFaults(REPO, FILE, { corruptByteAt: 1000 });
    const client = s.client();
    await rejectsWith(client.downloadFile(REPO, FILE), 'integrity', new RegExp(`corrupt \\(sha256 [0-9a-f]{64} instead of the ${SILERO_SHA256}`));
    assertNothingValidCached(s, client);
    assert.deepEqual(await fsp.readdir(path.join(s.repoDir, 'blobs')), [], 'no blob, no .incomplete');
  });

  it('a file outside LFS is checked against its git blob id: other bytes of the right size are refused', async (t) => {
    const s = await setup(t);
    s.double.setFaults(REPO, SMALL_FILE, { corruptByteAt: 3 });
    const client = s.client();
    const gitOid = gitBlobId(SMALL_CONTENT);
    await rejectsWith(client.downloadFile(REPO, SMALL_FILE), 'integrity', new RegExp(`corrupt \\(git blob sha1 [0-9a-f]{40} instead of the ${gitOid} `));
    assert.equal(client.cachedFile(REPO, SMALL_FILE), null);
    assert.deepEqual(await fsp.readdir(path.join(s.repoDir, 'blobs')), [], 'no blob, no .incomplete');

    s.double.setFaults(REPO, SMALL_FILE, {});
    assert.deepEqual(await fsp.readFile(await client.downloadFile(REPO, SMALL_FILE)), SMALL_CONTENT);
    assert.deepEqual(await fsp.readdir(path.join(s.repoDir, 'blobs')), [gitOid]);
  });

  it('discardIfCorrupt deletes a cached blob that no longer matches its hash, and nothing else', async (t) => {
    const s = await setup(t);
    const client = s.client();
    const [lfsPath, smallPath] = [await client.downloadFile(REPO, FILE), await client.downloadFile(REPO, SMALL_FILE)];
    assert.equal(await client.discardIfCorrupt(lfsPath), null, 'an intact LFS blob stays');
    assert.equal(await client.discardIfCorrupt(smallPath), null, 'an intact git blob stays');
    assert.equal(await client.discardIfCorrupt(SILERO_V6), null, 'a file outside the cache is not touched');
    assert.ok(fs.existsSync(SILERO_V6));

    // other bytes of the same size, as a bad copy left in the cache would be
    for (const file of [lfsPath, smallPath]) await fsp.writeFile(await fsp.realpath(file), Buffer.alloc((await fsp.stat(file)).size, 0x20));
    assert.match((await client.discardIfCorrupt(lfsPath)) ?? '', new RegExp(`^sha256 [0-9a-f]{64} instead of the ${SILERO_SHA256} `));
    assert.match((await client.discardIfCorrupt(smallPath)) ?? '', new RegExp(`^git blob sha1 [0-9a-f]{40} instead of the ${gitBlobId(SMALL_CONTENT)} `));
    assert.deepEqual(await fsp.readdir(path.join(s.repoDir, 'blobs')), []);
    assert.equal(client.cachedFile(REPO, FILE), null);
    assert.ok(s.warnLogs.some((line) => line.includes('is corrupt') && line.includes('the next request downloads it again')));

    assert.deepEqual(await fsp.readFile(await client.downloadFile(REPO, FILE)), SILERO, 'downloaded again');
    assert.equal(s.double.contentTransfers(REPO, FILE).length, 2);
  });

  it('a transfer the hub stops sending is ended by the inactivity timeout, logged, and resumed later', async (t) => {
    const s = await setup(t);
    s.double.setFaults(REPO, FILE, { pauseAt: { bytes: 300_000, until: heldUntilEnd(t).held } });
    const client = s.client({ inactivityTimeoutMs: 500 });
    const [first, joined] = [client.downloadFile(REPO, FILE), client.downloadFile(REPO, FILE)];
    const stalled =
      /download of ggml-org\/whisper-vad\/ggml-silero-v6\.2\.0\.bin stalled after \d+ of 885098 bytes \(nothing arrived for 0\.5 s \(--download-timeout-s\)\); the partial file is kept and the next attempt resumes/;
    await rejectsWith(within(15_000, first, 'the stalled download'), 'network', stalled);
    await rejectsWith(within(15_000, joined, 'the request that joined it'), 'network', stalled);
    assert.equal(s.warnLogs.filter((line) => stalled.test(line)).length, 1, `one line for the one transfer: ${s.warnLogs.join('\n')}`);
    assertNothingValidCached(s, client);
    const partialSize = (await fsp.stat(path.join(s.repoDir, 'blobs', `${SILERO_SHA256}.incomplete`))).size;
    assert.ok(partialSize > 0 && partialSize <= 300_000, `partial size ${partialSize}`);

    s.double.setFaults(REPO, FILE, {});
    assert.deepEqual(await fsp.readFile(await client.downloadFile(REPO, FILE)), SILERO);
    const transfers = s.double.contentTransfers(REPO, FILE);
    assert.equal(transfers.length, 2);
    assert.equal(transfers[1]?.range, `bytes=${partialSize}-`, 'resumed');
  });

  it('a hub that never answers fails after the inactivity timeout, or falls back to the cache', async (t) => {
    const s = await setup(t);
    const cachedPath = await s.client().downloadFile(REPO, FILE);
    const silent = http.createServer(() => undefined); // takes every request, answers none
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    t.after(() => {
      silent.closeAllConnections();
      silent.close();
    });
    const client = s.client({ endpoint: `http://127.0.0.1:${(silent.address() as AddressInfo).port}`, inactivityTimeoutMs: 300 });
    assert.equal(await within(15_000, client.downloadFile(REPO, FILE), 'a cached file'), cachedPath);
    assert.ok(s.warnLogs.some((line) => line.includes(`hub unreachable, using the cached copy of ${REPO}/${FILE}`)));
    await rejectsWith(
      within(15_000, client.downloadFile(REPO, SMALL_FILE), 'an uncached file'),
      'network',
      /failed: nothing arrived for 0\.3 s \(--download-timeout-s\)/,
    );
    await rejectsWith(within(15_000, client.listFiles('acme/absent'), 'a listing'), 'network', /nothing arrived for 0\.3 s/);
  });

  it('listFiles lists the repo recursively across pages, and from the cache when offline', async (t) => {
    const s = await setup(t, { treePageSize: 1 });
    const client = s.client();
    const files = await client.listFiles(REPO);
    assert.deepEqual(files, [
      { path: SMALL_FILE, size: SMALL_CONTENT.length },
      { path: FILE, size: SILERO.length, lfs: { oid: SILERO_SHA256, size: SILERO.length } },
    ]);
    assert.ok(s.double.requests.filter((r) => r.path.startsWith(`/api/models/${REPO}/tree/`)).length >= 3, 'followed the Link pages');

    await client.downloadFile(REPO, FILE);
    assert.deepEqual(await s.client({ offline: true }).listFiles(REPO), [
      { path: FILE, size: SILERO.length, lfs: { oid: SILERO_SHA256, size: SILERO.length } },
    ]);
    await rejectsWith(s.client({ offline: true }).listFiles('acme/absent'), 'offline', /acme\/absent is not in the Hugging Face cache/);
  });

  it('cachedRepos lists each cached repo with the files of its newest snapshot', async (t) => {
    const s = await setup(t);
    const client = s.client();
    assert.deepEqual(client.cachedRepos(), []);
    s.double.addRepo('acme/other', { files: { 'nested/model.bin': SILERO_V6 } });
    await client.downloadFile(REPO, FILE);
    await client.downloadFile(REPO, SMALL_FILE);
    await client.downloadFile('acme/other', 'nested/model.bin');
    assert.deepEqual(client.cachedRepos(), [
      { repo: 'acme/other', files: ['nested/model.bin'] },
      { repo: REPO, files: [SMALL_FILE, FILE] },
    ]);
    assert.deepEqual(new HubClient({ endpoint: s.double.endpoint, cacheDir: path.join(s.cacheDir, 'absent'), offline: true }).cachedRepos(), []);
  });

  it('abort stops a download for its caller only; alone, it leaves a resumable partial file', async (t) => {
    const s = await setup(t);
    s.double.setFaults(REPO, FILE, { chunkDelayMs: 20 });
    const client = s.client();

    const controller = new AbortController();
    const aborted = client.downloadFile(REPO, FILE, { signal: controller.signal });
    const other = client.downloadFile(REPO, FILE);
    await sleep(60);
    controller.abort();
    await rejectsWith(aborted, 'aborted', /was aborted/);
    assert.deepEqual(await fsp.readFile(await other), SILERO);
    assert.equal(s.double.contentTransfers(REPO, FILE).length, 1);

    const alone = new AbortController();
    const snapshotPath = path.join(s.repoDir, 'snapshots', s.commit, FILE);
    await fsp.rm(s.repoDir, { recursive: true });
    const download = client.downloadFile(REPO, FILE, { signal: alone.signal });
    await sleep(60);
    alone.abort();
    await rejectsWith(download, 'aborted', /was aborted/);
    assertNothingValidCached(s, client);
    assert.equal(await client.downloadFile(REPO, FILE), snapshotPath);
    assert.deepEqual(await fsp.readFile(snapshotPath), SILERO);
    assert.match(s.double.contentTransfers(REPO, FILE)[2]?.range ?? '', /^bytes=\d+-$/, 'the retry resumed the partial file');
    assert.ok(
      s.warnLogs.some((line) => /^download of .* was cancelled after \d+ of 885098 bytes \(no request waits for it\); the partial file is kept/.test(line)),
      `the cancelled transfer is logged: ${s.warnLogs.join('\n')}`,
    );
  });

  it('an unreachable hub falls back to the cache with a warning, else fails as a network error', async (t) => {
    const s = await setup(t);
    const cachedPath = await s.client().downloadFile(REPO, FILE);
    await s.double.close();
    const client = s.client();
    assert.equal(await client.downloadFile(REPO, FILE), cachedPath);
    assert.ok(s.warnLogs.some((line) => line.includes(`using the cached copy of ${REPO}/${FILE}`)));
    await rejectsWith(client.downloadFile(REPO, SMALL_FILE), 'network', /request to http:\/\/127\.0\.0\.1:\d+ for .*vad\.json failed/);
  });

  it('defaultHubCacheDir follows HF_HUB_CACHE, then HF_HOME, then ~/.cache/huggingface', () => {
    assert.equal(defaultHubCacheDir({ HF_HUB_CACHE: '/c/hub', HF_HOME: '/h' }), '/c/hub');
    assert.equal(defaultHubCacheDir({ HF_HOME: '/h' }), path.join('/h', 'hub'));
    assert.equal(defaultHubCacheDir({}), path.join(os.homedir(), '.cache', 'huggingface', 'hub'));
  });
});
