/**
 * Cross-process file locks that also hold across hosts on a shared volume (NFS, a Kubernetes volume mounted by several
 * pods): the lock is a file created with O_EXCL that names its owner, and whose mtime the owner refreshes as a
 * heartbeat. A waiter takes a lock over when its owner is a dead process of the same host, or when its heartbeat has
 * stood still for `staleMs`, timed on the waiter's own clock (so clock skew between hosts cannot make a live lock look
 * stale). Only Node built-ins.
 */
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import os from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';

/** What a lock file holds (JSON). */
export interface LockOwner {
  pid: number;
  hostname: string;
  /** Linux: the owner's pid namespace. Containers of one pod share a hostname, not their pids. */
  pidNamespace?: string;
  acquiredAt: string;
}

export interface FileLockTimings {
  /** How often the owner refreshes the lock file's mtime. */
  heartbeatMs: number;
  /** A lock whose heartbeat a waiter has seen stand still this long is abandoned. */
  staleMs: number;
  /** Waiters poll the lock this often at first, doubling up to `pollMaxMs`. */
  pollMinMs: number;
  pollMaxMs: number;
}

export const DEFAULT_LOCK_TIMINGS: FileLockTimings = { heartbeatMs: 5000, staleMs: 30_000, pollMinMs: 50, pollMaxMs: 1000 };

export interface FileLock {
  /** Aborted when another process took the lock over (this one's heartbeat stalled): stop working on what it guards. */
  readonly lost: AbortSignal;
  /** Stops the heartbeat and removes the lock file if it is still this lock's. Never throws. */
  release(): Promise<void>;
}

export interface AcquireOptions {
  /** Stops waiting (rejecting with its reason). */
  signal?: AbortSignal;
  /** Checked before each try: once true, resolve null without the lock (the owner did the work it guards). */
  isDone?: () => boolean;
  /**
   * Called at most once, when the lock is first found held by an owner that looks alive. A file that names no owner is
   * most often one its owner is still writing: the call waits one poll for the name, then passes null if there is
   * still none.
   */
  onWait?: (owner: LockOwner | null) => void;
  timings?: Partial<FileLockTimings>;
}

/** A lock file as a waiter saw it: a heartbeat moves mtimeNs, a new owner changes ino and content. */
interface LockSnapshot {
  ino: bigint;
  mtimeNs: bigint;
  content: string;
  owner: LockOwner | null;
}

const PID_NAMESPACE = readPidNamespace();

/** Takes the lock at `lockPath`, waiting while an owner that looks alive holds it. */
export async function acquireFileLock(lockPath: string, options: AcquireOptions = {}): Promise<FileLock | null> {
  const timings = { ...DEFAULT_LOCK_TIMINGS, ...options.timings };
  let pollMs = timings.pollMinMs;
  let watched: { snapshot: LockSnapshot; unchangedSince: number } | null = null;
  let announced = false;
  let sawUnnamed = false;
  for (;;) {
    options.signal?.throwIfAborted();
    if (options.isDone?.()) return null;
    const lock = await tryCreateLock(lockPath, timings.heartbeatMs);
    if (lock !== null) return lock;
    const current = await readLock(lockPath);
    if (current === null) continue; // released between the two calls: try again at once
    if (watched === null || !isSameLock(watched.snapshot, current)) watched = { snapshot: current, unchangedSince: performance.now() };
    if (isDeadOwnerOfThisHost(current.owner) || performance.now() - watched.unchangedSince >= timings.staleMs) {
      await removeAbandonedLock(lockPath, current);
      continue;
    }
    if (!announced && (current.owner !== null || sawUnnamed)) {
      announced = true;
      options.onWait?.(current.owner);
    }
    sawUnnamed ||= current.owner === null;
    await sleep(pollMs, undefined, { signal: options.signal });
    pollMs = Math.min(pollMs * 2, timings.pollMaxMs);
  }
}

async function tryCreateLock(lockPath: string, heartbeatMs: number): Promise<FileLock | null> {
  let handle: fsp.FileHandle;
  try {
    handle = await fsp.open(lockPath, 'wx');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return null;
    throw error;
  }
  try {
    const owner: LockOwner = { pid: process.pid, hostname: os.hostname(), pidNamespace: PID_NAMESPACE, acquiredAt: new Date().toISOString() };
    await handle.writeFile(JSON.stringify(owner));
    // A network volume may keep writes on this host until close or sync: waiters elsewhere must see the owner
    await handle.datasync();
    const { ino } = await handle.stat({ bigint: true });
    return new HeldLock(lockPath, handle, ino, heartbeatMs);
  } catch (error) {
    await handle.close();
    await fsp.rm(lockPath, { force: true });
    throw error;
  }
}

class HeldLock implements FileLock {
  private readonly lostController = new AbortController();
  private timer: NodeJS.Timeout | undefined;
  private beating: Promise<void> = Promise.resolve();
  private released = false;

  constructor(
    private readonly lockPath: string,
    private readonly handle: fsp.FileHandle,
    private readonly ino: bigint,
    private readonly heartbeatMs: number,
  ) {
    this.scheduleHeartbeat();
  }

  get lost(): AbortSignal {
    return this.lostController.signal;
  }

  async release(): Promise<void> {
    if (this.released) return;
    this.released = true;
    clearTimeout(this.timer);
    await this.beating;
    try {
      if (!this.lost.aborted && (await this.isStillInPlace())) await fsp.unlink(this.lockPath);
    } catch {
      // A lock file left behind is taken over like a crashed owner's: not worth failing the work it guarded
    } finally {
      await this.handle.close().catch(() => undefined);
    }
  }

  /** One heartbeat at a time, each after the previous one ended (a slow volume must not pile them up). */
  private scheduleHeartbeat(): void {
    this.timer = setTimeout(() => {
      this.beating = this.beat().then(() => {
        if (!this.released && !this.lost.aborted) this.scheduleHeartbeat();
      });
    }, this.heartbeatMs);
    // The work the lock guards keeps the process alive, not the lock
    this.timer.unref();
  }

  private async beat(): Promise<void> {
    try {
      // Through the open handle: the owner's own file, wherever a takeover moved it
      const now = new Date();
      await this.handle.utimes(now, now);
      if (!(await this.isStillInPlace())) this.lostController.abort();
    } catch {
      // A volume hiccup: the next beat tries again (should it last, a waiter takes the lock over, and a beat sees that)
    }
  }

  private async isStillInPlace(): Promise<boolean> {
    try {
      // The open handle keeps this lock's inode from being reused, so the number identifies it
      return (await fsp.stat(this.lockPath, { bigint: true })).ino === this.ino;
    } catch (error) {
      if (isNotFound(error)) return false;
      throw error;
    }
  }
}

/** The lock file's state, or null when there is none. Opening it makes a network volume fetch fresh attributes. */
async function readLock(lockPath: string): Promise<LockSnapshot | null> {
  let handle: fsp.FileHandle;
  try {
    handle = await fsp.open(lockPath, 'r');
  } catch (error) {
    if (isNotFound(error)) return null;
    throw error;
  }
  try {
    const [{ ino, mtimeNs }, content] = await Promise.all([handle.stat({ bigint: true }), handle.readFile('utf8')]);
    return { ino, mtimeNs, content, owner: parseOwner(content) };
  } finally {
    await handle.close();
  }
}

/** The owner a lock file names; null while its owner has not written it yet (or it is not ours to read). */
function parseOwner(content: string): LockOwner | null {
  let value: unknown;
  try {
    value = JSON.parse(content);
  } catch {
    return null;
  }
  if (typeof value !== 'object' || value === null) return null;
  const { pid, hostname, pidNamespace } = value as Partial<LockOwner>;
  // pid 0 and negative pids would signal process groups
  const valid = Number.isSafeInteger(pid) && Number(pid) > 0 && typeof hostname === 'string' && ['string', 'undefined'].includes(typeof pidNamespace);
  return valid ? (value as LockOwner) : null;
}

function isSameLock(a: LockSnapshot, b: LockSnapshot): boolean {
  return a.ino === b.ino && a.mtimeNs === b.mtimeNs && a.content === b.content;
}

/** Pids only mean something on the owner's host and in its pid namespace; anywhere else only the heartbeat tells. */
function isDeadOwnerOfThisHost(owner: LockOwner | null): boolean {
  if (owner === null || owner.hostname !== os.hostname() || owner.pidNamespace !== PID_NAMESPACE) return false;
  try {
    process.kill(owner.pid, 0);
    return false;
  } catch (error) {
    // EPERM: it exists, under another user
    return (error as NodeJS.ErrnoException).code === 'ESRCH';
  }
}

/**
 * Moves the abandoned lock aside, then checks that what moved is the lock judged abandoned: another waiter may have
 * taken it over first, and this moved that waiter's fresh lock, which goes back unless a third process has made one
 * meanwhile (its owner then sees at its next heartbeat that it lost the lock).
 */
async function removeAbandonedLock(lockPath: string, abandoned: LockSnapshot): Promise<void> {
  const asidePath = `${lockPath}.${randomUUID()}.abandoned`;
  try {
    await fsp.rename(lockPath, asidePath);
  } catch (error) {
    if (isNotFound(error)) return;
    throw error;
  }
  const moved = await readLock(asidePath);
  if (moved !== null && !isSameLock(moved, abandoned)) await fsp.link(asidePath, lockPath).catch(() => undefined);
  await fsp.rm(asidePath, { force: true });
}

export function isNotFound(error: unknown): boolean {
  return (error as NodeJS.ErrnoException | undefined)?.code === 'ENOENT';
}

function readPidNamespace(): string | undefined {
  try {
    return fs.readlinkSync('/proc/self/ns/pid');
  } catch {
    return undefined;
  }
}
