/**
 * Processes sharing one hub cache (pods on one volume) download each blob once, under its file lock: separate Node
 * processes against one hub double, a downloader killed in the middle, abandoned locks, and waiters that give up.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, it, type TestContext } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { acquireFileLock, DEFAULT_LOCK_TIMINGS, type LockOwner } from '../../src/services/file-lock.js';
import { HubClient, HubError } from '../../src/services/hub.js';
import { HubDouble } from '../helpers/hub-double.js';
import { ROOT } from '../helpers/paths.js';

const CHILD_SCRIPT = path.join(ROOT, 'dist', 'test', 'helpers', 'hub-download-child.js');
const REPO = 'acme/shared-model';
const FILE = 'weights/model.bin';
const CONTENT = randomBytes(1_000_000);
const SHA256 = createHash('sha256').update(CONTENT).digest('hex');
/** Generous: child processes start slowly on a busy machine. */
const WAIT_MS = 20_000;

interface Setup {
  double: HubDouble;
  cacheDir: string;
  blobsDir: string;
  blobPath: string;
  lockPath: string;
  incompletePath: string;
  snapshotPath: string;
  infoLogs: string[];
  warnLogs: string[];
  client(options?: { offline?: boolean }): HubClient;
}

/** A hub double serving FILE, a fresh cache dir and an in-process client factory; all cleaned up after the test. */
async function setup(t: TestContext): Promise<Setup> {
  const double = await HubDouble.start();
  const commit = double.addRepo(REPO, { files: { [FILE]: CONTENT } });
  const cacheDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'voxd-hub-shared-'));
  t.after(async () => {
    await double.close();
    await fsp.rm(cacheDir, { recursive: true, force: true });
  });
  const repoDir = path.join(cacheDir, 'models--acme--shared-model');
  const blobPath = path.join(repoDir, 'blobs', SHA256);
  const infoLogs: string[] = [];
  const warnLogs: string[] = [];
  const logger = { info: (_fields: object, msg = '') => void infoLogs.push(msg), warn: (_fields: object, msg = '') => void warnLogs.push(msg) };
  return {
    double,
    cacheDir,
    blobsDir: path.dirname(blobPath),
    blobPath,
    lockPath: `${blobPath}.lock`,
    incompletePath: `${blobPath}.incomplete`,
    snapshotPath: path.join(repoDir, 'snapshots', commit, ...FILE.split('/')),
    infoLogs,
    warnLogs,
    client: ({ offline = false } = {}) => new HubClient({ endpoint: double.endpoint, cacheDir, offline, logger }),
  };
}

interface ChildExit {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

interface Downloader {
  child: ChildProcess;
  /** Its log (JSON lines) so far. */
  readonly stderr: string;
  done: Promise<ChildExit>;
}

/** test/helpers/hub-download-child.ts in a process of its own, downloading FILE into the setup's cache; killed after the test. */
function startDownloader(t: TestContext, s: Setup): Downloader {
  const child = spawn(process.execPath, [CHILD_SCRIPT, s.double.endpoint, s.cacheDir, REPO, FILE], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const done = new Promise<ChildExit>((resolve) => child.once('close', (code, signal) => resolve({ code, signal, stdout, stderr })));
  t.after(async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await done;
  });
  return {
    child,
    get stderr() {
      return stderr;
    },
    done,
  };
}

/** What a downloader that succeeded printed. */
function downloaded(exit: ChildExit): { path: string; sha256: string } {
  assert.equal(exit.code, 0, `the downloader failed:\n${exit.stderr}`);
  return JSON.parse(exit.stdout) as { path: string; sha256: string };
}

/** The owner a downloader said it waits for, if it waited. */
function ownerWaitedFor(downloader: Downloader): LockOwner | null {
  for (const line of downloader.stderr.split('\n')) {
    const entry = line === '' ? null : (JSON.parse(line) as { msg: string; owner?: LockOwner });
    if (entry?.msg.startsWith('waiting for ')) return entry.owner ?? null;
  }
  return null;
}

/** A promise the test resolves when it chooses (and resolved after the test in any case, so that nothing stays held). */
function gate(t: TestContext): { promise: Promise<void>; open(): void } {
  let open = (): void => undefined;
  const promise = new Promise<void>((resolve) => (open = resolve));
  t.after(() => open());
  return { promise, open: () => open() };
}

async function waitFor(condition: () => boolean, what: string, ms = WAIT_MS): Promise<void> {
  const deadline = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await sleep(10);
  }
}

/** The pid of a process that has exited (and been reaped): no process has it, barring reuse. */
async function deadPid(): Promise<number> {
  const child = spawn(process.execPath, ['-e', ''], { stdio: 'ignore' });
  await new Promise((resolve) => child.once('close', resolve));
  assert.ok(child.pid !== undefined);
  return child.pid;
}

/** A lock file as another process writes it. */
function lockFileContent(owner: Omit<LockOwner, 'acquiredAt'>): string {
  return JSON.stringify({ ...owner, acquiredAt: new Date().toISOString() });
}

function thisPidNamespace(): Pick<LockOwner, 'pidNamespace'> {
  return process.platform === 'linux' ? { pidNamespace: fs.readlinkSync('/proc/self/ns/pid') } : {};
}

function contentRequests(s: Setup): { heads: number; contentGets: number } {
  return {
    heads: s.double.requests.filter((r) => r.method === 'HEAD' && r.file === `${REPO}/${FILE}`).length,
    contentGets: s.double.contentTransfers(REPO, FILE).length,
  };
}

describe('shared hub cache', () => {
  it('three processes downloading one file at once: the hub serves it once, and all three get the same verified file', async (t) => {
    const s = await setup(t);
    const transfer = gate(t);
    s.double.setFaults(REPO, FILE, { pauseAt: { bytes: 100_000, until: transfer.promise } });
    const downloaders = [1, 2, 3].map(() => startDownloader(t, s));

    // The transfer is held until the other two wait on the lock: all three overlap
    await waitFor(() => downloaders.filter((d) => ownerWaitedFor(d) !== null).length === 2, 'two downloaders waiting for the third');
    const owner = downloaders.find((d) => ownerWaitedFor(d) === null);
    for (const waiter of downloaders.filter((d) => d !== owner)) {
      assert.deepEqual(
        { pid: ownerWaitedFor(waiter)?.pid, hostname: ownerWaitedFor(waiter)?.hostname },
        { pid: owner?.child.pid, hostname: os.hostname() },
        'the waiters name the downloading process',
      );
    }
    transfer.open();

    const results = await Promise.all(downloaders.map(async (d) => downloaded(await d.done)));
    for (const result of results) assert.deepEqual(result, { path: s.snapshotPath, sha256: SHA256 });
    assert.deepEqual(await fsp.readFile(s.snapshotPath), CONTENT);
    assert.deepEqual(contentRequests(s), { heads: 3, contentGets: 1 });
    assert.deepEqual(await fsp.readdir(s.blobsDir), [SHA256], 'no lock, no .incomplete left');
  });

  it('a downloader killed in the middle leaves nothing that looks complete, and the next process resumes its file at once', async (t) => {
    const s = await setup(t);
    const transfer = gate(t);
    s.double.setFaults(REPO, FILE, { pauseAt: { bytes: 300_000, until: transfer.promise } });
    const doomed = startDownloader(t, s);
    await waitFor(() => fs.statSync(s.incompletePath, { throwIfNoEntry: false })?.size === 300_000, 'the first 300 000 bytes on disk');
    doomed.child.kill('SIGKILL');
    assert.equal((await doomed.done).signal, 'SIGKILL');

    assert.deepEqual((await fsp.readdir(s.blobsDir)).sort(), [`${SHA256}.incomplete`, `${SHA256}.lock`], 'a partial file and a dead lock, no blob');
    assert.equal(fs.lstatSync(s.snapshotPath, { throwIfNoEntry: false }), undefined, 'no snapshot link');
    assert.equal(s.client({ offline: true }).cachedFile(REPO, FILE), null);

    s.double.setFaults(REPO, FILE, {});
    const started = performance.now();
    const successor = startDownloader(t, s);
    assert.deepEqual(downloaded(await successor.done), { path: s.snapshotPath, sha256: SHA256 });
    const seconds = (performance.now() - started) / 1000;
    assert.ok(seconds < DEFAULT_LOCK_TIMINGS.staleMs / 1000 / 3, `took ${seconds} s: it waited for the dead lock to go stale`);
    assert.equal(ownerWaitedFor(successor), null, 'the dead owner is seen as dead at once');

    const transfers = s.double.contentTransfers(REPO, FILE);
    assert.deepEqual(contentRequests(s), { heads: 2, contentGets: 2 });
    assert.equal(transfers[1]?.range, 'bytes=300000-', 'the successor resumed the partial file');
    assert.equal(transfers[1]?.status, 206);
    assert.deepEqual(await fsp.readdir(s.blobsDir), [SHA256]);
    assert.deepEqual(await fsp.readFile(s.snapshotPath), CONTENT);
  });

  it('takes over at once a lock whose owner is a process of this host that no longer exists', async (t) => {
    const s = await setup(t);
    await fsp.mkdir(s.blobsDir, { recursive: true });
    // A fresh heartbeat: only the dead pid tells that nobody downloads
    await fsp.writeFile(s.lockPath, lockFileContent({ pid: await deadPid(), hostname: os.hostname(), ...thisPidNamespace() }));

    const started = performance.now();
    assert.equal(await s.client().downloadFile(REPO, FILE), s.snapshotPath);
    const seconds = (performance.now() - started) / 1000;
    assert.ok(seconds < 5, `took ${seconds} s`);
    assert.equal(
      s.infoLogs.find((line) => line.startsWith('waiting for')),
      undefined,
    );
    assert.deepEqual(await fsp.readFile(s.snapshotPath), CONTENT);
    assert.deepEqual(contentRequests(s), { heads: 1, contentGets: 1 });
    assert.deepEqual(await fsp.readdir(s.blobsDir), [SHA256]);
  });

  it('a downloader whose lock was taken over stops at its next heartbeat, waits for the new owner, then resumes', async (t) => {
    const s = await setup(t);
    const transfer = gate(t);
    s.double.setFaults(REPO, FILE, { pauseAt: { bytes: 100_000, until: transfer.promise } });
    const download = s.client().downloadFile(REPO, FILE);
    await waitFor(() => fs.statSync(s.incompletePath, { throwIfNoEntry: false })?.size === 100_000, 'the first 100 000 bytes on disk');

    // What a process on another host does when it takes the lock for stale: moves it aside, makes its own, beats
    await fsp.rename(s.lockPath, `${s.lockPath}.aside`);
    await fsp.writeFile(s.lockPath, lockFileContent({ pid: 1, hostname: 'another-pod' }));
    const heartbeat = setInterval(() => {
      const now = new Date();
      fs.utimesSync(s.lockPath, now, now);
    }, 200);
    t.after(() => clearInterval(heartbeat));
    await waitFor(() => s.infoLogs.includes(`waiting for pid 1 on another-pod to finish downloading ${REPO}/${FILE}`), 'the downloader to wait');
    assert.ok(s.warnLogs.some((line) => line.startsWith(`another process took over the download of ${REPO}/${FILE}`)));

    // The other host goes away without finishing
    clearInterval(heartbeat);
    s.double.setFaults(REPO, FILE, {});
    await fsp.rm(s.lockPath);
    assert.equal(await download, s.snapshotPath);
    assert.deepEqual(await fsp.readFile(s.snapshotPath), CONTENT);
    const transfers = s.double.contentTransfers(REPO, FILE);
    assert.deepEqual(contentRequests(s), { heads: 1, contentGets: 2 });
    assert.equal(transfers[1]?.range, 'bytes=100000-');
    await fsp.rm(`${s.lockPath}.aside`);
    assert.deepEqual(await fsp.readdir(s.blobsDir), [SHA256]);
  });

  it('a waiter whose signal aborts stops waiting for the lock', async (t) => {
    const s = await setup(t);
    await fsp.mkdir(s.blobsDir, { recursive: true });
    const held = await acquireFileLock(s.lockPath);
    assert.ok(held !== null);
    t.after(() => held.release());

    const deadOwnerLock = lockFileContent({ pid: await deadPid(), hostname: os.hostname(), ...thisPidNamespace() });
    const controller = new AbortController();
    const download = s.client().downloadFile(REPO, FILE, { signal: controller.signal });
    await waitFor(() => s.infoLogs.includes(`waiting for pid ${process.pid} on ${os.hostname()} to finish downloading ${REPO}/${FILE}`), 'the waiter');
    controller.abort();
    await assert.rejects(download, (error) => error instanceof HubError && error.kind === 'aborted');

    // A lock that a waiter still polling would take over (its owner is dead), then remove when its download fails
    await held.release();
    await fsp.writeFile(s.lockPath, deadOwnerLock);
    await sleep(DEFAULT_LOCK_TIMINGS.pollMaxMs * 1.5);
    assert.equal(await fsp.readFile(s.lockPath, 'utf8'), deadOwnerLock, 'nobody polls the lock any more');
    assert.deepEqual(contentRequests(s), { heads: 1, contentGets: 0 });
  });
});

describe('file lock', () => {
  const timings = { heartbeatMs: 50, staleMs: 400, pollMinMs: 10, pollMaxMs: 50 };

  async function lockPathIn(t: TestContext): Promise<string> {
    const dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'voxd-file-lock-'));
    t.after(() => fsp.rm(dir, { recursive: true, force: true }));
    return path.join(dir, 'blob.lock');
  }

  it('a lock of another host is taken over once its heartbeat has stood still for staleMs, not while it beats', async (t) => {
    const lockPath = await lockPathIn(t);
    const content = lockFileContent({ pid: 1, hostname: 'another-pod' });
    await fsp.writeFile(lockPath, content);
    const heartbeat = setInterval(() => {
      const now = new Date();
      fs.utimesSync(lockPath, now, now);
    }, timings.heartbeatMs);
    t.after(() => clearInterval(heartbeat));

    const waitedFor: (LockOwner | null)[] = [];
    let acquiredAt: number | null = null;
    const acquiring = acquireFileLock(lockPath, { timings, onWait: (owner) => waitedFor.push(owner) });
    void acquiring.then(() => (acquiredAt = performance.now()));
    await sleep(timings.staleMs * 3);
    assert.equal(acquiredAt, null, 'a beating lock is not taken over, pid 1 or not');

    clearInterval(heartbeat);
    const stoppedAt = performance.now();
    const lock = await acquiring;
    assert.ok(lock !== null);
    const waitedMs = Number(acquiredAt) - stoppedAt;
    // The last beat came at most one heartbeat before the stop
    assert.ok(waitedMs >= timings.staleMs - timings.heartbeatMs, `taken over ${waitedMs} ms after the heartbeat stopped`);
    assert.deepEqual(waitedFor, [JSON.parse(content)], 'onWait once, with the owner');
    assert.equal((JSON.parse(await fsp.readFile(lockPath, 'utf8')) as LockOwner).pid, process.pid);
    await lock.release();
    assert.equal(fs.existsSync(lockPath), false);
  });

  it('an owner whose lock was taken over sees it lost at its next heartbeat, and its release leaves the new lock alone', async (t) => {
    const lockPath = await lockPathIn(t);
    const lock = await acquireFileLock(lockPath, { timings });
    assert.ok(lock !== null);
    // What a waiter that took it over does: move it aside, make its own
    await fsp.rename(lockPath, `${lockPath}.aside`);
    await fsp.writeFile(lockPath, lockFileContent({ pid: 1, hostname: 'another-pod' }));
    await waitFor(() => lock.lost.aborted, 'the loss to be noticed', timings.heartbeatMs * 20);
    await lock.release();
    assert.equal((JSON.parse(await fsp.readFile(lockPath, 'utf8')) as LockOwner).hostname, 'another-pod');
  });

  it('resolves null without the lock once the work it guards is done', async (t) => {
    const lockPath = await lockPathIn(t);
    const held = await acquireFileLock(lockPath, { timings });
    assert.ok(held !== null);
    let done = false;
    const waiting = acquireFileLock(lockPath, { timings, isDone: () => done });
    await sleep(timings.pollMaxMs * 2);
    done = true;
    assert.equal(await waiting, null);
    await held.release();
  });

  it('names the owner to waiters that first see its lock file still empty, and null for a file that never names one', async (t) => {
    // Long polls: the owner's write lands between a waiter's first and second look, however busy the machine
    const slowPolls = { ...timings, staleMs: 60_000, pollMinMs: 500, pollMaxMs: 500 };
    const namedPath = await lockPathIn(t);
    const unnamedPath = `${namedPath}.other`;
    await fsp.writeFile(namedPath, ''); // what an owner's open('wx') leaves before it writes
    await fsp.writeFile(unnamedPath, 'not a lock of ours');
    const waitedFor: { named: (LockOwner | null)[]; unnamed: (LockOwner | null)[] } = { named: [], unnamed: [] };
    const controller = new AbortController();
    t.after(() => controller.abort());
    const waiters = [
      acquireFileLock(namedPath, { timings: slowPolls, signal: controller.signal, onWait: (owner) => waitedFor.named.push(owner) }),
      acquireFileLock(unnamedPath, { timings: slowPolls, signal: controller.signal, onWait: (owner) => waitedFor.unnamed.push(owner) }),
    ];
    await sleep(250); // after the waiters' first look (at once), well before their second (500 ms later)
    const content = lockFileContent({ pid: 1, hostname: 'another-pod' });
    await fsp.writeFile(namedPath, content);
    await waitFor(() => waitedFor.named.length + waitedFor.unnamed.length === 2, 'both waiters to announce', slowPolls.pollMinMs * 10);
    assert.deepEqual(waitedFor, { named: [JSON.parse(content)], unnamed: [null] });
    controller.abort();
    for (const waiter of waiters) await assert.rejects(waiter);
  });
});
