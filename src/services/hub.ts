/**
 * Hugging Face hub client: downloads repository files into the cache layout the Python tools share
 * (`models--owner--name/{blobs,snapshots,refs}`), resumes partial files, verifies sizes and the hashes the hub's ETags give,
 * honours HF_TOKEN and offline mode, and reports progress. A hub that stops sending ends the request after the
 * inactivity timeout. Processes sharing the cache (pods on one volume included) download each blob once, under a file
 * lock per blob. Only Node built-ins (global fetch).
 *
 * This module decides between cache and network; hub/ holds the pieces, one concern a file: where files live in the
 * cache (cache-layout.ts), the hub's HTTP API (api.ts), each blob downloaded once (shared-download.ts), one blob's
 * transfer (download.ts), its hash (integrity.ts), progress reports (progress.ts).
 */
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { HubApi, type FileMetadata } from './hub/api.js';
import { HubCacheLayout } from './hub/cache-layout.js';
import { ensureFreeSpace } from './hub/disk-space.js';
import { DEFAULT_REVISION, HubError, subjectName, validateSubject, type Subject } from './hub/errors.js';
import { blobHashOf, hashMismatch } from './hub/integrity.js';
import { SharedDownloads } from './hub/shared-download.js';
import type { DownloadTracker } from './hub/tracker.js';
import type { HubCachedRepo, HubFile, HubLogger } from './hub/types.js';

import { defaultHubCacheDir } from './hub/cache-layout.js';

export { defaultHubCacheDir };
export { HubError, type HubErrorKind } from './hub/errors.js';
export { DownloadTracker, type DownloadState } from './hub/tracker.js';
export type { HubCachedRepo, HubFile, HubLogger } from './hub/types.js';

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

/** `--download-timeout-s`'s default: far below undici's own 300 s, far above a hub's pauses between chunks. */
export const DEFAULT_DOWNLOAD_TIMEOUT_S = 30;

/**
 * The hub client of the server and of the model commands alike: the environment's hub (HF_ENDPOINT), token, cache and
 * offline mode, with voxd's own settings; a bar on stderr when it is a terminal.
 */
export function hubClientFromEnv(env: NodeJS.ProcessEnv, settings: { offline: boolean; downloadTimeoutS: number }, logger: HubLogger): HubClient {
  return new HubClient({
    endpoint: env.HF_ENDPOINT || 'https://huggingface.co',
    token: env.HF_TOKEN || undefined,
    cacheDir: defaultHubCacheDir(env),
    offline: settings.offline || env.HF_HUB_OFFLINE === '1',
    logger,
    progressBar: true,
    inactivityTimeoutMs: settings.downloadTimeoutS * 1000,
  });
}

export class HubClient {
  private readonly api: HubApi;
  private readonly cache: HubCacheLayout;
  private readonly downloads: SharedDownloads;
  /** Blobs `discardIfCorrupt` found intact, by path, with the size and mtime they had: hashing GBs again is for a changed file only. */
  private readonly intactBlobs = new Map<string, string>();

  constructor(private readonly options: HubOptions) {
    this.api = new HubApi(options.endpoint, options.token, options.inactivityTimeoutMs ?? DEFAULT_DOWNLOAD_TIMEOUT_S * 1000);
    this.cache = new HubCacheLayout(options.cacheDir);
    this.downloads = new SharedDownloads(this.api, options);
  }

  /** Local path (snapshot symlink path) of one file of a repo, downloading it if needed; `tracker` follows its bytes. */
  async downloadFile(repo: string, file: string, opts: { revision?: string; signal?: AbortSignal; tracker?: DownloadTracker } = {}): Promise<string> {
    const subject = { repo, file, revision: opts.revision ?? DEFAULT_REVISION };
    validateSubject(subject);
    const cached = (): string | null => this.cache.cachedFile(subject);
    if (this.options.offline) return cached() ?? this.throwOfflineMiss(subject);

    let metadata: FileMetadata;
    try {
      metadata = await this.api.fileMetadata(subject, opts.signal);
    } catch (error) {
      return this.fallBackToCache(error, cached(), subject);
    }
    const blobPath = this.cache.blobPath(repo, metadata.etag);
    opts.tracker?.add(blobPath, metadata.size);
    await this.downloads.download({ subject, url: metadata.downloadUrl, blobPath, size: metadata.size, hash: blobHashOf(metadata.etag) }, opts.signal);
    return this.cache.addToSnapshot(subject, metadata.commit, blobPath);
  }

  /** Files of a repo at a revision (from /api/models/{repo}/tree/{rev}, recursive). In offline mode, from the cached snapshot. */
  async listFiles(repo: string, opts: { revision?: string; signal?: AbortSignal } = {}): Promise<HubFile[]> {
    const subject: Subject = { repo, revision: opts.revision ?? DEFAULT_REVISION };
    validateSubject(subject);
    const cached = (): HubFile[] | null => this.cache.cachedListing(subject);
    if (this.options.offline) return cached() ?? this.throwOfflineMiss(subject);
    try {
      return await this.api.listFiles(subject, opts.signal);
    } catch (error) {
      return this.fallBackToCache(error, cached(), subject);
    }
  }

  /** What downloading a listed file still takes on disk: none when cached, its size less what an earlier transfer left. */
  bytesToFetch(repo: string, file: HubFile): number {
    if (this.cachedFile(repo, file.path) !== null) return 0;
    const size = file.lfs?.size ?? file.size;
    // an LFS file's blob is named by its sha256, which the listing gives; a small git file is fetched whole anyway
    const partial = file.lfs ? (fs.statSync(`${this.cache.blobPath(repo, file.lfs.oid)}.incomplete`, { throwIfNoEntry: false })?.size ?? 0) : 0;
    return Math.max(0, size - partial);
  }

  /** Refuses (HubError 'disk_full') before `bytes` more are downloaded into a cache whose disk cannot hold them. */
  ensureFreeSpace(bytes: number, what: string): Promise<void> {
    return ensureFreeSpace(this.options.cacheDir, bytes, what);
  }

  /** The cached path of a file if it is fully in the cache (no network), else null. */
  cachedFile(repo: string, file: string, revision: string = DEFAULT_REVISION): string | null {
    const subject = { repo, file, revision };
    validateSubject(subject);
    return this.cache.cachedFile(subject);
  }

  /** The files of a repository's cached snapshot (no network), or null when it has none. */
  cachedListing(repo: string, revision: string = DEFAULT_REVISION): HubFile[] | null {
    const subject = { repo, revision };
    validateSubject(subject);
    return this.cache.cachedListing(subject);
  }

  /** Deletes a file from every cached snapshot of its repository, and its blobs no other file uses; bytes freed, or null when it was not cached. */
  removeCachedFile(repo: string, file: string): Promise<number | null> {
    validateSubject({ repo, file, revision: DEFAULT_REVISION });
    return this.cache.removeFile(repo, file);
  }

  /** Every repo in the cache with the files of its newest snapshot. */
  cachedRepos(): HubCachedRepo[] {
    return this.cache.cachedRepos();
  }

  /**
   * Checks a file of this cache against the hash its blob is named by, and deletes the blob when it does not match,
   * so that the next download fetches it again. For a file that failed to load: a blob that an older client, another
   * tool or a failing disk left wrong would otherwise fail every load for good. Returns how it differed (null when
   * it matches, or the file is no blob of this cache). A blob found intact is not hashed again while its size and
   * mtime stay the same: a file that is valid but unusable fails every load, and each would hash it whole.
   */
  async discardIfCorrupt(filePath: string): Promise<string | null> {
    const blobPath = await this.cache.blobOf(filePath);
    if (blobPath === null) return null;
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
}
