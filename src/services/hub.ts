/**
 * Hugging Face hub client: downloads repository files into the cache layout the Python tools share
 * (`models--owner--name/{blobs,snapshots,refs}`), resumes partial files, verifies sizes and the hashes the hub's ETags give,
 * honours HF_TOKEN and offline mode, and reports progress. A hub that stops sending ends the request after the
 * inactivity timeout. Processes sharing the cache (pods on one volume included) download each blob once, under a file
 * lock per blob. Only Node built-ins (global fetch).
 */
import { createHash, randomUUID } from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { acquireFileLock, isNotFound, type LockOwner } from './file-lock.js';
import { SharedWork } from './shared-work.js';

export interface HubLogger {
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
}

export interface HubOptions {
  /** HF_ENDPOINT, default https://huggingface.co */
  endpoint: string;
  /** HF_TOKEN: sent as `Authorization: Bearer` to the endpoint's origin only, never to a redirect target elsewhere. */
  token?: string;
  /** See defaultHubCacheDir. */
  cacheDir: string;
  /** HF_HUB_OFFLINE=1 or --offline: cache only, no network at all. */
  offline: boolean;
  logger?: HubLogger;
  /** Draw a progress bar on stderr when it is a TTY. */
  progressBar?: boolean;
  /** A request to the hub (or its CDN) that receives nothing for this long fails; DEFAULT_DOWNLOAD_TIMEOUT_S when unset. */
  inactivityTimeoutMs?: number;
}

export interface HubFile {
  path: string;
  size: number;
  lfs?: { oid: string; size: number };
}

export interface HubCachedRepo {
  repo: string;
  /** Relative paths of the files fully present in the repo's newest snapshot. */
  files: string[];
}

export type HubErrorKind = 'not_found' | 'unauthorized' | 'offline' | 'network' | 'integrity' | 'aborted';

export class HubError extends Error {
  readonly kind: HubErrorKind;
  readonly status?: number;

  constructor(kind: HubErrorKind, message: string, options: { status?: number; cause?: unknown } = {}) {
    super(message, { cause: options.cause });
    this.name = 'HubError';
    this.kind = kind;
    if (options.status !== undefined) this.status = options.status;
  }
}

/** HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub (as huggingface_hub resolves it). */
export function defaultHubCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env.HF_HUB_CACHE) return env.HF_HUB_CACHE;
  return path.join(env.HF_HOME || path.join(os.homedir(), '.cache', 'huggingface'), 'hub');
}

/** `--download-timeout-s`'s default: far below undici's own 300 s, far above a hub's pauses between chunks. */
export const DEFAULT_DOWNLOAD_TIMEOUT_S = 30;

const DEFAULT_REVISION = 'main';
const REPO_FOLDER_PREFIX = 'models--';
/** Commit ids, and git blob ids: the ETag of a file that is not in LFS. */
const SHA1_HEX = /^[0-9a-f]{40}$/;
/** The ETag of an LFS file: the sha256 of its content. */
const SHA256_HEX = /^[0-9a-f]{64}$/;
const REPO_ID = /^[A-Za-z0-9][\w.-]*\/[A-Za-z0-9][\w.-]*$/;
/** Hub answers (commit, ETag) become file names in the cache: allow nothing that could escape it. */
const SAFE_FILE_NAME = /^[\w-][\w.-]*$/;
const REDIRECT_STATUSES = new Set([301, 302, 303, 307, 308]);
const MAX_REDIRECTS = 10;
const PROGRESS_LOG_INTERVAL_MS = 2000;
const PROGRESS_BAR_INTERVAL_MS = 100;
const PROGRESS_BAR_WIDTH = 30;

/** What a request is about, for error messages. */
interface Subject {
  repo: string;
  file?: string;
  revision: string;
}

interface FileMetadata {
  commit: string;
  etag: string;
  size: number;
  /** The LFS redirect target (CDN) when the hub gave one, else the resolve URL. */
  downloadUrl: string;
}

interface BlobDownload {
  subject: Subject;
  url: string;
  blobPath: string;
  size: number;
  /** What the content must hash to, from the ETag (null when the ETag is no hash this client knows). */
  hash: BlobHash | null;
}

/**
 * A blob's hash as its ETag (and so its name in blobs/) gives it: the sha256 of an LFS file's content, or for any
 * other file its git blob id, the sha1 of `blob <size>\0` followed by the content.
 */
interface BlobHash {
  algorithm: 'sha256' | 'git blob sha1';
  digest: string;
}

interface TreeEntry {
  type: string;
  path: string;
  size: number;
  lfs?: { oid: string; size: number };
}

/** Transfers under way in this process, by blob path: shared by every client on the same cache. */
const inFlightDownloads = new Map<string, SharedWork<void>>();

export class HubClient {
  private readonly endpoint: string;
  private readonly endpointOrigin: string;
  private readonly inactivityTimeoutMs: number;
  /** Blobs `discardIfCorrupt` found intact, by path, with the size and mtime they had: hashing GBs again is for a changed file only. */
  private readonly intactBlobs = new Map<string, string>();

  constructor(private readonly options: HubOptions) {
    this.endpoint = options.endpoint.replace(/\/+$/, '');
    this.endpointOrigin = new URL(this.endpoint).origin;
    this.inactivityTimeoutMs = options.inactivityTimeoutMs ?? DEFAULT_DOWNLOAD_TIMEOUT_S * 1000;
  }

  /** Local path (snapshot symlink path) of one file of a repo, downloading it if needed. */
  async downloadFile(repo: string, file: string, opts: { revision?: string; signal?: AbortSignal } = {}): Promise<string> {
    const subject: Subject = { repo, file, revision: opts.revision ?? DEFAULT_REVISION };
    validateSubject(subject);
    const cached = (): string | null => this.cachedFile(repo, file, subject.revision);
    if (this.options.offline) return cached() ?? this.throwOfflineMiss(subject);

    let metadata: FileMetadata;
    try {
      metadata = await this.fetchFileMetadata(subject, opts.signal);
    } catch (error) {
      return this.fallBackToCache(error, cached(), subject);
    }
    const repoDir = this.repoDir(repo);
    const blobPath = path.join(repoDir, 'blobs', metadata.etag);
    await this.shareDownload({ subject, url: metadata.downloadUrl, blobPath, size: metadata.size, hash: blobHashOf(metadata.etag) }, opts.signal);
    const snapshotPath = path.join(repoDir, 'snapshots', metadata.commit, ...file.split('/'));
    await linkSnapshot(snapshotPath, blobPath);
    if (subject.revision !== metadata.commit) await writeRef(repoDir, subject.revision, metadata.commit);
    return snapshotPath;
  }

  /** Files of a repo at a revision (from /api/models/{repo}/tree/{rev}, recursive). In offline mode, from the cached snapshot. */
  async listFiles(repo: string, opts: { revision?: string; signal?: AbortSignal } = {}): Promise<HubFile[]> {
    const subject: Subject = { repo, revision: opts.revision ?? DEFAULT_REVISION };
    validateSubject(subject);
    const cached = (): HubFile[] | null => this.cachedListing(subject);
    if (this.options.offline) return cached() ?? this.throwOfflineMiss(subject);
    try {
      return await this.fetchTree(subject, opts.signal);
    } catch (error) {
      return this.fallBackToCache(error, cached(), subject);
    }
  }

  /** The cached path of a file if it is fully in the cache (no network), else null. */
  cachedFile(repo: string, file: string, revision: string = DEFAULT_REVISION): string | null {
    validateSubject({ repo, file, revision });
    const snapshotDir = this.snapshotDir(repo, revision);
    if (snapshotDir === null) return null;
    const filePath = path.join(snapshotDir, ...file.split('/'));
    // existsSync follows the link: a snapshot entry whose blob is missing is not a cached file
    return fs.existsSync(filePath) ? filePath : null;
  }

  /** Every repo in the cache with the files of its newest snapshot. */
  cachedRepos(): HubCachedRepo[] {
    return readdirOrEmpty(this.options.cacheDir)
      .filter((folder) => folder.startsWith(REPO_FOLDER_PREFIX))
      .flatMap((folder) => {
        const snapshotsDir = path.join(this.options.cacheDir, folder, 'snapshots');
        const newest = readdirOrEmpty(snapshotsDir)
          .map((commit) => ({ dir: path.join(snapshotsDir, commit), mtime: fs.statSync(path.join(snapshotsDir, commit)).mtimeMs }))
          .sort((a, b) => b.mtime - a.mtime)[0];
        const files = newest ? listSnapshotFiles(newest.dir) : [];
        return files.length > 0 ? [{ repo: folder.slice(REPO_FOLDER_PREFIX.length).split('--').join('/'), files }] : [];
      })
      .sort((a, b) => a.repo.localeCompare(b.repo));
  }

  /**
   * Checks a file of this cache against the hash its blob is named by, and deletes the blob when it does not match,
   * so that the next download fetches it again. For a file that failed to load: a blob that an older client, another
   * tool or a failing disk left wrong would otherwise fail every load for good. Returns how it differed (null when
   * it matches, or the file is no blob of this cache). A blob found intact is not hashed again while its size and
   * mtime stay the same: a file that is valid but unusable fails every load, and each would hash it whole.
   */
  async discardIfCorrupt(filePath: string): Promise<string | null> {
    const [blobPath, cacheDir] = await Promise.all([fsp.realpath(filePath).catch(() => null), fsp.realpath(this.options.cacheDir).catch(() => null)]);
    if (blobPath === null || cacheDir === null || !blobPath.startsWith(cacheDir + path.sep) || path.basename(path.dirname(blobPath)) !== 'blobs') {
      return null;
    }
    // the version is read before hashing: a change while it hashes makes the next call hash it again
    const { size, mtimeMs } = await fsp.stat(blobPath);
    const version = `${size}:${mtimeMs}`;
    if (this.intactBlobs.get(blobPath) === version) return null;
    const mismatch = await hashMismatch(blobPath, blobHashOf(path.basename(blobPath)));
    if (mismatch === null) {
      this.intactBlobs.set(blobPath, version);
    } else {
      await fsp.rm(blobPath, { force: true });
      this.options.logger?.warn(
        { path: filePath, blob: blobPath },
        `cached ${filePath} is corrupt (${mismatch}); deleted it, the next request downloads it again`,
      );
    }
    return mismatch;
  }

  private repoDir(repo: string): string {
    return path.join(this.options.cacheDir, REPO_FOLDER_PREFIX + repo.split('/').join('--'));
  }

  /** The snapshot folder a revision points to (a commit sha directly, a branch or tag through refs/), if cached. */
  private snapshotDir(repo: string, revision: string): string | null {
    const repoDir = this.repoDir(repo);
    const commit = SHA1_HEX.test(revision) ? revision : readRef(repoDir, revision);
    if (commit === null || !SAFE_FILE_NAME.test(commit)) return null;
    const dir = path.join(repoDir, 'snapshots', commit);
    return fs.existsSync(dir) ? dir : null;
  }

  private cachedListing(subject: Subject): HubFile[] | null {
    const snapshotDir = this.snapshotDir(subject.repo, subject.revision);
    if (snapshotDir === null) return null;
    return listSnapshotFiles(snapshotDir).map((relative) => {
      const filePath = path.join(snapshotDir, ...relative.split('/'));
      const size = fs.statSync(filePath).size;
      const blobName = path.basename(fs.realpathSync(filePath));
      return SHA256_HEX.test(blobName) ? { path: relative, size, lfs: { oid: blobName, size } } : { path: relative, size };
    });
  }

  private throwOfflineMiss(subject: Subject): never {
    throw new HubError(
      'offline',
      `${subjectName(subject)} is not in the Hugging Face cache (${this.options.cacheDir}) and offline mode is on (HF_HUB_OFFLINE=1 or --offline): ` +
        'run once without offline mode to download it, or point HF_HUB_CACHE/HF_HOME at a cache that has it',
    );
  }

  /** Like the Python tools: when the hub cannot be reached, a cached copy is still good enough. */
  private fallBackToCache<T>(error: unknown, cached: T | null, subject: Subject): T {
    if (!(error instanceof HubError) || error.kind !== 'network' || cached === null) throw error;
    this.options.logger?.warn(
      { repo: subject.repo, file: subject.file, reason: error.message },
      `hub unreachable, using the cached copy of ${subjectName(subject)}`,
    );
    return cached;
  }

  private async fetchFileMetadata(subject: Subject, signal: AbortSignal | undefined): Promise<FileMetadata> {
    const file = subject.file ?? '';
    const resolveUrl = `${this.endpoint}/${subject.repo}/resolve/${encodeURIComponent(subject.revision)}/${file.split('/').map(encodeURIComponent).join('/')}`;
    // Stop at the hub's own answer (it carries X-Repo-Commit): the CDN an LFS redirect points to knows nothing of the repo.
    using stall = new InactivityTimeout(this.inactivityTimeoutMs);
    const { response, url } = await this.request(
      resolveUrl,
      { method: 'HEAD', signal, stall, followRedirect: (r) => !r.headers.has('x-repo-commit') },
      subject,
    );
    const headers = response.headers;
    const commit = headers.get('x-repo-commit');
    const etag = (headers.get('x-linked-etag') ?? headers.get('etag'))?.replace(/^W\//, '').replace(/^"(.*)"$/, '$1');
    const size = Number(headers.get('x-linked-size') ?? headers.get('content-length') ?? Number.NaN);
    if (!commit || !SAFE_FILE_NAME.test(commit) || !etag || !SAFE_FILE_NAME.test(etag) || !Number.isSafeInteger(size) || size < 0) {
      throw new HubError(
        'network',
        `${this.endpoint} did not answer like a Hugging Face hub for ${subjectName(subject)} (no usable X-Repo-Commit, ETag or size)`,
      );
    }
    const location = headers.get('location');
    return { commit, etag, size, downloadUrl: location ? new URL(location, url).href : url };
  }

  private async fetchTree(subject: Subject, signal: AbortSignal | undefined): Promise<HubFile[]> {
    const files: HubFile[] = [];
    let pageUrl: string | null = `${this.endpoint}/api/models/${subject.repo}/tree/${encodeURIComponent(subject.revision)}?recursive=true`;
    while (pageUrl !== null) {
      using stall = new InactivityTimeout(this.inactivityTimeoutMs);
      const { response } = await this.request(pageUrl, { method: 'GET', signal, stall }, subject);
      let entries: unknown;
      try {
        const chunks: Uint8Array[] = [];
        for await (const chunk of chunksOf(response, stall)) chunks.push(chunk);
        entries = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      } catch (error) {
        throw this.toHubError(error, signal, subject, stall);
      }
      if (!Array.isArray(entries))
        throw new HubError('network', `${this.endpoint} answered the file list of ${subjectName(subject)} with something other than a list`);
      for (const entry of entries as TreeEntry[]) {
        if (entry.type === 'file')
          files.push({ path: entry.path, size: entry.size, ...(entry.lfs ? { lfs: { oid: entry.lfs.oid, size: entry.lfs.size } } : {}) });
      }
      // Large repos are paginated: `Link: <...>; rel="next"`
      const next = /<([^>]+)>;\s*rel="next"/.exec(response.headers.get('link') ?? '')?.[1];
      pageUrl = next ? new URL(next, pageUrl).href : null;
    }
    return files;
  }

  /**
   * fetch with redirects followed by hand so that the token only ever goes to the endpoint's origin.
   * HTTP errors become HubErrors; the answer is a 2xx, or a redirect that `followRedirect` declined.
   */
  private async request(
    url: string,
    init: {
      method: 'GET' | 'HEAD';
      headers?: Record<string, string>;
      signal: AbortSignal | undefined;
      /** Ends the request when the hub sends nothing for too long; the caller goes on touching it while it reads the body. */
      stall: InactivityTimeout;
      followRedirect?: (response: Response) => boolean;
    },
    subject: Subject,
  ): Promise<{ response: Response; url: string }> {
    let current = url;
    for (let redirects = 0; ; redirects++) {
      const sameOrigin = new URL(current).origin === this.endpointOrigin;
      const headers: Record<string, string> = {
        'User-Agent': 'voxd',
        // Sizes and hashes are those of the raw bytes
        'Accept-Encoding': 'identity',
        ...init.headers,
        ...(this.options.token && sameOrigin ? { Authorization: `Bearer ${this.options.token}` } : {}),
      };
      let response: Response;
      try {
        const signal = init.signal ? AbortSignal.any([init.signal, init.stall.signal]) : init.stall.signal;
        response = await fetch(current, { method: init.method, headers, redirect: 'manual', signal });
      } catch (error) {
        throw this.toHubError(error, init.signal, subject, init.stall);
      }
      init.stall.touch();
      const location = response.headers.get('location');
      if (REDIRECT_STATUSES.has(response.status) && location && (init.followRedirect?.(response) ?? true)) {
        await response.body?.cancel();
        if (redirects === MAX_REDIRECTS) throw new HubError('network', `too many redirects fetching ${subjectName(subject)} from ${this.endpoint}`);
        current = new URL(location, current).href;
        continue;
      }
      if (response.status >= 400) {
        await response.body?.cancel();
        throw this.statusError(response, subject);
      }
      return { response, url: current };
    }
  }

  private statusError(response: Response, subject: Subject): HubError {
    const { status } = response;
    const hubMessage = response.headers.get('x-error-message');
    const detail = hubMessage ? ` (hub: ${hubMessage})` : '';
    if (status === 401 || status === 403) {
      const advice = this.options.token ? 'HF_TOKEN is set but does not grant access to it' : 'set HF_TOKEN to a token that can read it';
      return new HubError(
        'unauthorized',
        `access to ${subject.repo} on ${this.endpoint} was refused (${status}): the repository is private or gated, or does not exist; ${advice}${detail}`,
        { status },
      );
    }
    if (status === 404) {
      const message: Record<string, string> = {
        RepoNotFound: `repository ${subject.repo} not found on ${this.endpoint}`,
        EntryNotFound: `file ${subject.file ?? ''} not found in repository ${subject.repo} at revision ${subject.revision}`,
        RevisionNotFound: `revision ${subject.revision} not found in repository ${subject.repo}`,
      };
      const code = response.headers.get('x-error-code') ?? '';
      return new HubError('not_found', `${message[code] ?? `${subjectName(subject)} not found on ${this.endpoint}`}${detail}`, { status });
    }
    return new HubError('network', `${this.endpoint} answered ${status} for ${subjectName(subject)}${detail}`, { status });
  }

  private toHubError(error: unknown, signal: AbortSignal | undefined, subject: Subject, stall: InactivityTimeout): HubError {
    if (error instanceof HubError) return error;
    if (signal?.aborted) return new HubError('aborted', `download of ${subjectName(subject)} was aborted`, { cause: error });
    const reason = stall.fired ? stall.description : causeMessage(error);
    return new HubError('network', `request to ${this.endpoint} for ${subjectName(subject)} failed: ${reason}`, { cause: error });
  }

  /** Joins the transfer of this blob already under way in this process, or starts it. */
  private shareDownload(download: BlobDownload, signal: AbortSignal | undefined): Promise<void> {
    let shared = inFlightDownloads.get(download.blobPath);
    if (shared === undefined || shared.abandoned) {
      // A transfer every caller gave up on may still be winding down: start after it, never two writers on one .incomplete
      const previous = shared?.promise.catch(() => undefined) ?? Promise.resolve();
      const work: SharedWork<void> = new SharedWork((workSignal) =>
        previous
          .then(() => this.downloadBlob(download, workSignal))
          .catch((error: unknown) => {
            this.logFailure(download.subject, error, workSignal.aborted);
            throw error;
          })
          .finally(() => {
            if (inFlightDownloads.get(download.blobPath) === work) inFlightDownloads.delete(download.blobPath);
          }),
      );
      inFlightDownloads.set(download.blobPath, work);
      shared = work;
    }
    return shared.wait(signal, () => new HubError('aborted', `download of ${subjectName(download.subject)} was aborted`));
  }

  /** How a download that did not succeed ended, once per transfer however many waited (DownloadProgress logs a success). */
  private logFailure(subject: Subject, error: unknown, cancelled: boolean): void {
    const outcome = cancelled ? 'cancelled' : error instanceof HubError ? error.kind : 'failed';
    const message =
      error instanceof HubError
        ? error.message
        : `download of ${subjectName(subject)} ${cancelled ? 'was cancelled: no request waits for it' : `failed: ${causeMessage(error)}`}`;
    this.options.logger?.warn({ repo: subject.repo, file: subject.file, outcome }, message);
  }

  /**
   * Downloads the blob once across the processes sharing the cache: under the file lock `{etag}.lock`, so that one
   * that waited for it finds the blob complete, or downloads it itself (resuming what a failed or crashed owner left).
   */
  private async downloadBlob(download: BlobDownload, signal: AbortSignal): Promise<void> {
    const isComplete = (): boolean => fs.existsSync(download.blobPath);
    if (isComplete()) return;
    await fsp.mkdir(path.dirname(download.blobPath), { recursive: true });
    for (;;) {
      const lock = await acquireFileLock(`${download.blobPath}.lock`, {
        signal,
        isDone: isComplete,
        onWait: (owner) => this.logWaiting(download.subject, owner),
      });
      if (lock === null) return;
      try {
        if (isComplete()) return;
        await this.downloadUnderLock(download, AbortSignal.any([signal, lock.lost]));
        return;
      } catch (error) {
        if (!lock.lost.aborted || signal.aborted) throw error;
        this.options.logger?.warn(
          { repo: download.subject.repo, file: download.subject.file },
          `another process took over the download of ${subjectName(download.subject)} (this one stalled); waiting for it`,
        );
      } finally {
        await lock.release();
      }
    }
  }

  private logWaiting(subject: Subject, owner: LockOwner | null): void {
    const who = owner === null ? 'another process' : `pid ${owner.pid} on ${owner.hostname}`;
    this.options.logger?.info({ repo: subject.repo, file: subject.file, owner }, `waiting for ${who} to finish downloading ${subjectName(subject)}`);
  }

  /** Downloads into `{etag}.incomplete` (resuming what is there), verifies, then renames into place. */
  private async downloadUnderLock(download: BlobDownload, signal: AbortSignal): Promise<void> {
    const incompletePath = `${download.blobPath}.incomplete`;
    const partialSize = await sizeOf(incompletePath);
    if (partialSize !== download.size) {
      // A partial file longer than the blob cannot be a prefix of it: start over
      const offset = partialSize !== null && partialSize < download.size ? partialSize : 0;
      await this.transfer(download, incompletePath, offset, signal);
    }
    await verifyDownload(download, incompletePath);
    await fsp.rename(incompletePath, download.blobPath);
  }

  private async transfer(download: BlobDownload, incompletePath: string, offset: number, signal: AbortSignal): Promise<void> {
    const { subject } = download;
    using stall = new InactivityTimeout(this.inactivityTimeoutMs);
    const { response } = await this.request(download.url, { method: 'GET', signal, stall, headers: offset > 0 ? { Range: `bytes=${offset}-` } : {} }, subject);
    // A server that ignores Range answers 200 with the whole file: start over
    const resumeFrom = response.status === 206 ? offset : 0;
    const progress = new DownloadProgress(this.options, download, resumeFrom);
    // Writes at explicit offsets: an owner wrongly taken for dead that writes on until it notices writes the same bytes
    // at the same offsets as its successor, never any at a wrong place
    const handle = await fsp.open(incompletePath, resumeFrom > 0 ? 'r+' : 'w');
    let written = resumeFrom;
    try {
      for await (const chunk of chunksOf(response, stall)) {
        await handle.write(chunk, 0, chunk.byteLength, written);
        written += chunk.byteLength;
        if (written > download.size) break; // verifyDownload rejects it; no need to take in more
        progress.update(written);
      }
      await handle.sync();
      progress.finish(written);
    } catch (error) {
      const [name, partial] = [subjectName(subject), `after ${written} of ${download.size} bytes`];
      const kept = 'the partial file is kept and the next attempt resumes from there';
      if (signal.aborted) throw new HubError('aborted', `download of ${name} was cancelled ${partial} (no request waits for it); ${kept}`, { cause: error });
      const [what, reason] = stall.fired ? ['stalled', stall.description] : ['was interrupted', causeMessage(error)];
      throw new HubError('network', `download of ${name} ${what} ${partial} (${reason}); ${kept}`, { cause: error });
    } finally {
      progress.clearBar();
      await handle.close();
    }
  }
}

function validateSubject(subject: Subject): void {
  if (!REPO_ID.test(subject.repo) || subject.repo.includes('--') || subject.repo.includes('..')) {
    throw new HubError('not_found', `invalid repository id ${JSON.stringify(subject.repo)}: expected owner/name`);
  }
  for (const [what, value] of [
    ['file path', subject.file],
    ['revision', subject.revision],
  ] as const) {
    // Both become paths inside the cache (snapshots/, refs/)
    if (value !== undefined && !value.split('/').every((segment) => segment !== '' && segment !== '.' && segment !== '..' && !/[\\\0]/.test(segment))) {
      throw new HubError('not_found', `invalid ${what} ${JSON.stringify(value)} in repository ${subject.repo}`);
    }
  }
}

function subjectName(subject: Subject): string {
  const name = subject.file === undefined ? subject.repo : `${subject.repo}/${subject.file}`;
  return subject.revision === DEFAULT_REVISION ? name : `${name}@${subject.revision}`;
}

function causeMessage(error: unknown): string {
  const cause = error instanceof Error && error.cause instanceof Error ? error.cause : error;
  return cause instanceof Error ? cause.message : String(cause);
}

function readdirOrEmpty(dir: string): string[] {
  try {
    return fs.readdirSync(dir);
  } catch (error) {
    if (isNotFound(error)) return [];
    throw error;
  }
}

function readRef(repoDir: string, revision: string): string | null {
  try {
    return fs.readFileSync(path.join(repoDir, 'refs', ...revision.split('/')), 'utf8').trim();
  } catch (error) {
    if (isNotFound(error)) return null;
    throw error;
  }
}

async function sizeOf(file: string): Promise<number | null> {
  try {
    return (await fsp.stat(file)).size;
  } catch (error) {
    if (isNotFound(error)) return null;
    throw error;
  }
}

/** Relative ('/'-separated) paths of the files in a snapshot whose blob is present. */
function listSnapshotFiles(snapshotDir: string): string[] {
  return fs
    .readdirSync(snapshotDir, { recursive: true, encoding: 'utf8' })
    .filter((relative) => fs.statSync(path.join(snapshotDir, relative), { throwIfNoEntry: false })?.isFile() ?? false)
    .map((relative) => relative.split(path.sep).join('/'))
    .sort();
}

/** Creates `target` under a temporary name, then renames it into place: readers never see it half made. */
async function replaceAtomically(target: string, write: (temporary: string) => Promise<void>): Promise<void> {
  await fsp.mkdir(path.dirname(target), { recursive: true });
  const temporary = `${target}.${randomUUID()}.tmp`;
  try {
    await write(temporary);
    await fsp.rename(temporary, target);
  } catch (error) {
    await fsp.rm(temporary, { force: true });
    throw error;
  }
}

/** snapshots/{commit}/{path} → a relative link into blobs/, as the Python tools make it. */
async function linkSnapshot(snapshotPath: string, blobPath: string): Promise<void> {
  const target = path.relative(path.dirname(snapshotPath), blobPath);
  const existing = await fsp.readlink(snapshotPath).catch(() => null);
  if (existing !== target) await replaceAtomically(snapshotPath, (temporary) => fsp.symlink(target, temporary));
}

async function writeRef(repoDir: string, revision: string, commit: string): Promise<void> {
  if (readRef(repoDir, revision) !== commit) {
    await replaceAtomically(path.join(repoDir, 'refs', ...revision.split('/')), (temporary) => fsp.writeFile(temporary, commit));
  }
}

/** Size then hash against what the hub announced; a mismatching file is deleted, it would never become valid. */
async function verifyDownload(download: BlobDownload, incompletePath: string): Promise<void> {
  const size = (await sizeOf(incompletePath)) ?? 0;
  if (size < download.size) {
    throw new HubError(
      'network',
      `download of ${subjectName(download.subject)} ended after ${size} of ${download.size} bytes; the partial file is kept and the next attempt resumes from there`,
    );
  }
  const mismatch = size > download.size ? `${size} bytes instead of the ${download.size} the hub announced` : await hashMismatch(incompletePath, download.hash);
  if (mismatch !== null) {
    await fsp.rm(incompletePath, { force: true });
    throw new HubError('integrity', `downloaded ${subjectName(download.subject)} is corrupt (${mismatch}); it was deleted, try again`);
  }
}

function blobHashOf(etag: string): BlobHash | null {
  if (SHA256_HEX.test(etag)) return { algorithm: 'sha256', digest: etag };
  if (SHA1_HEX.test(etag)) return { algorithm: 'git blob sha1', digest: etag };
  return null;
}

/** How `file` differs from `expected` (null when it matches, or nothing is expected). */
async function hashMismatch(file: string, expected: BlobHash | null): Promise<string | null> {
  if (expected === null) return null;
  const hash = createHash(expected.algorithm === 'sha256' ? 'sha256' : 'sha1');
  if (expected.algorithm === 'git blob sha1') hash.update(`blob ${(await fsp.stat(file)).size}\0`);
  for await (const chunk of fs.createReadStream(file)) hash.update(chunk as Buffer);
  const actual = hash.digest('hex');
  return actual === expected.digest ? null : `${expected.algorithm} ${actual} instead of the ${expected.digest} the hub announced`;
}

/**
 * Aborts its signal once `ms` pass without `touch()`: a hub that stops sending ends the request instead of holding
 * it (and every request waiting for the model) until undici's own 300 s timeouts.
 */
class InactivityTimeout implements Disposable {
  private readonly controller = new AbortController();
  private readonly timer: NodeJS.Timeout;

  constructor(private readonly ms: number) {
    this.timer = setTimeout(() => this.controller.abort(), ms);
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  get fired(): boolean {
    return this.controller.signal.aborted;
  }

  /** What happened once it fired, for messages. */
  get description(): string {
    return `nothing arrived for ${this.ms / 1000} s (--download-timeout-s)`;
  }

  touch(): void {
    this.timer.refresh();
  }

  [Symbol.dispose](): void {
    clearTimeout(this.timer);
  }
}

/** A response body's chunks. `stall` restarts at each one and once the caller is done with it (writing it out is no silence). */
async function* chunksOf(response: Response, stall: InactivityTimeout): AsyncGenerator<Uint8Array> {
  stall.touch();
  for await (const chunk of response.body ?? []) {
    stall.touch();
    yield chunk;
    stall.touch();
  }
}

function formatBytes(bytes: number): string {
  const units = ['B', 'kB', 'MB', 'GB', 'TB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1000 && unit < units.length - 1) {
    value /= 1000;
    unit++;
  }
  return `${unit === 0 ? Math.round(value) : value.toFixed(1)} ${units[unit]}`;
}

/** Log lines at start, every ~2 s and at the end; a bar on stderr when asked for and stderr is a terminal. */
class DownloadProgress {
  private readonly logger: HubLogger | undefined;
  private readonly drawBar: boolean;
  private readonly fields: { repo: string; file: string | undefined };
  private readonly label: string;
  private readonly startedAt = Date.now();
  private lastLogAt = this.startedAt;
  private lastDrawAt = 0;
  private barDrawn = false;

  constructor(
    options: HubOptions,
    private readonly download: BlobDownload,
    private readonly resumeFrom: number,
  ) {
    this.logger = options.logger;
    this.drawBar = options.progressBar === true && process.stderr.isTTY === true;
    this.fields = { repo: download.subject.repo, file: download.subject.file };
    this.label = subjectName(download.subject);
    const resuming = resumeFrom > 0 ? `, resuming at ${formatBytes(resumeFrom)}` : '';
    this.logger?.info({ ...this.fields, bytes: download.size, resumeFrom }, `downloading ${this.label} (${formatBytes(download.size)}${resuming})`);
  }

  update(received: number): void {
    const now = Date.now();
    const percent = this.download.size > 0 ? Math.floor((received * 100) / this.download.size) : 100;
    if (now - this.lastLogAt >= PROGRESS_LOG_INTERVAL_MS) {
      this.lastLogAt = now;
      this.logger?.info(
        { ...this.fields, received, bytes: this.download.size, percent },
        `downloading ${this.label}: ${percent}% (${formatBytes(received)} of ${formatBytes(this.download.size)})`,
      );
    }
    if (this.drawBar && now - this.lastDrawAt >= PROGRESS_BAR_INTERVAL_MS) {
      this.lastDrawAt = now;
      this.barDrawn = true;
      const filled = Math.round((percent / 100) * PROGRESS_BAR_WIDTH);
      const bar = '#'.repeat(filled) + '.'.repeat(PROGRESS_BAR_WIDTH - filled);
      process.stderr.write(
        `\r\x1b[K${this.label} [${bar}] ${percent}% ${formatBytes(received)}/${formatBytes(this.download.size)} ${this.rate(received, now)}`,
      );
    }
  }

  finish(received: number): void {
    const now = Date.now();
    this.logger?.info(
      { ...this.fields, bytes: received, seconds: (now - this.startedAt) / 1000 },
      `downloaded ${this.label} (${formatBytes(received)}, ${this.rate(received, now)})`,
    );
  }

  clearBar(): void {
    if (this.barDrawn) process.stderr.write('\r\x1b[K');
  }

  private rate(received: number, now: number): string {
    const seconds = Math.max((now - this.startedAt) / 1000, 0.001);
    return `${formatBytes((received - this.resumeFrom) / seconds)}/s`;
  }
}
