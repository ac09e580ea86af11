/**
 * Where files live in the Hugging Face cache, in the layout the Python tools share: `models--owner--name/` holds
 * `blobs/{etag}` (the content), `snapshots/{commit}/{path}` (relative links into blobs/) and `refs/{revision}` (the
 * commit a branch or tag pointed to when last resolved). Reads answer from the file system alone; writes make each
 * link and ref under a temporary name and rename it into place, so readers never see one half made.
 */
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { isNotFound } from '../file-lock.js';
import { HubError, type Subject } from './errors.js';
import type { HubCachedRepo, HubFile } from './types.js';
import { replaceAtomically } from '../atomic-file.js';

/** HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub (as huggingface_hub resolves it). */
export function defaultHubCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env.HF_HUB_CACHE) return env.HF_HUB_CACHE;
  return path.join(env.HF_HOME || path.join(os.homedir(), '.cache', 'huggingface'), 'hub');
}

const REPO_FOLDER_PREFIX = 'models--';
/** Commit ids, and git blob ids: the ETag of a file that is not in LFS. */
export const SHA1_HEX = /^[0-9a-f]{40}$/;
/** The ETag of an LFS file: the sha256 of its content. */
export const SHA256_HEX = /^[0-9a-f]{64}$/;
/** Hub answers (commit, ETag) become file names in the cache: allow nothing that could escape it. */
export const SAFE_FILE_NAME = /^[\w-][\w.-]*$/;

export class HubCacheLayout {
  constructor(readonly cacheDir: string) {}

  /** Where the blob of a repo's file with this ETag lives (downloaded or not). */
  blobPath(repo: string, etag: string): string {
    return path.join(this.repoDir(repo), 'blobs', etag);
  }

  /**
   * Makes the file of `subject` at `commit` the downloaded blob: its snapshot link, and the ref from the revision
   * asked for to that commit. Returns the snapshot path.
   */
  async addToSnapshot(subject: Subject & { file: string }, commit: string, blobPath: string): Promise<string> {
    const repoDir = this.repoDir(subject.repo);
    const snapshotPath = path.join(repoDir, 'snapshots', commit, ...subject.file.split('/'));
    await linkSnapshot(snapshotPath, blobPath);
    if (subject.revision !== commit) await writeRef(repoDir, subject.revision, commit);
    return snapshotPath;
  }

  /** The cached path of a file if it is fully in the cache, else null. */
  cachedFile(subject: Subject & { file: string }): string | null {
    const snapshotDir = this.snapshotDir(subject);
    if (snapshotDir === null) return null;
    const filePath = path.join(snapshotDir, ...subject.file.split('/'));
    // existsSync follows the link: a snapshot entry whose blob is missing is not a cached file
    return fs.existsSync(filePath) ? filePath : null;
  }

  /** The files of a revision's cached snapshot, as the hub would list them; null when there is none. */
  cachedListing(subject: Subject): HubFile[] | null {
    const snapshotDir = this.snapshotDir(subject);
    if (snapshotDir === null) return null;
    return listSnapshotFiles(snapshotDir).map((relative) => {
      const filePath = path.join(snapshotDir, ...relative.split('/'));
      const size = fs.statSync(filePath).size;
      const blobName = path.basename(fs.realpathSync(filePath));
      return SHA256_HEX.test(blobName) ? { path: relative, size, lfs: { oid: blobName, size } } : { path: relative, size };
    });
  }

  /** Every repo in the cache with the files of its newest snapshot. */
  cachedRepos(): HubCachedRepo[] {
    return readdirOrEmpty(this.cacheDir)
      .filter((folder) => folder.startsWith(REPO_FOLDER_PREFIX))
      .flatMap((folder) => {
        const snapshotsDir = path.join(this.cacheDir, folder, 'snapshots');
        const newest = readdirOrEmpty(snapshotsDir)
          .map((commit) => ({ dir: path.join(snapshotsDir, commit), mtime: fs.statSync(path.join(snapshotsDir, commit)).mtimeMs }))
          .sort((a, b) => b.mtime - a.mtime)[0];
        const files = newest ? listSnapshotFiles(newest.dir) : [];
        return files.length > 0 ? [{ repo: folder.slice(REPO_FOLDER_PREFIX.length).split('--').join('/'), files }] : [];
      })
      .sort((a, b) => a.repo.localeCompare(b.repo));
  }

  /**
   * Deletes `file` from every snapshot of the repo, then the blobs those links named that no other link names (a
   * transfer under way keeps its `.incomplete`); the bytes freed, or null when no snapshot had the file.
   */
  async removeFile(repo: string, file: string): Promise<number | null> {
    const snapshotsDir = path.join(this.repoDir(repo), 'snapshots');
    const snapshots = readdirOrEmpty(snapshotsDir).map((commit) => path.join(snapshotsDir, commit));
    const links: string[] = [];
    const named = new Set<string>();
    for (const snapshot of snapshots) {
      const link = path.join(snapshot, ...file.split('/'));
      if (!(await fsp.lstat(link).catch(() => null))) continue;
      links.push(link);
      const blob = await fsp.realpath(link).catch(() => null);
      if (blob) named.add(blob);
    }
    if (links.length === 0) return null;
    // a download holding a blob's lock is writing beside it (a new revision's, a resumed one): leave the file alone
    const busy = [...named].find((blob) => fs.existsSync(`${blob}.lock`));
    if (busy) throw new HubError('busy', `${repo}/${file} is being downloaded (${busy}.lock is held); remove it once that is done`);
    for (const link of links) await fsp.rm(link, { force: true });
    const stillNamed = new Set(snapshots.flatMap((snapshot) => listSnapshotFiles(snapshot).map((relative) => fs.realpathSync(path.join(snapshot, relative)))));
    let freed = 0;
    for (const blob of named) {
      if (stillNamed.has(blob)) continue;
      freed += (await fsp.stat(blob)).size;
      await fsp.rm(blob, { force: true });
    }
    return freed;
  }

  /** The blob a path resolves to when it is a blob of this cache (a snapshot link or the blob itself), else null. */
  async blobOf(filePath: string): Promise<string | null> {
    const [blobPath, cacheDir] = await Promise.all([fsp.realpath(filePath).catch(() => null), fsp.realpath(this.cacheDir).catch(() => null)]);
    if (blobPath === null || cacheDir === null || !blobPath.startsWith(cacheDir + path.sep) || path.basename(path.dirname(blobPath)) !== 'blobs') {
      return null;
    }
    return blobPath;
  }

  private repoDir(repo: string): string {
    return path.join(this.cacheDir, REPO_FOLDER_PREFIX + repo.split('/').join('--'));
  }

  /** The snapshot folder a revision points to (a commit sha directly, a branch or tag through refs/), if cached. */
  private snapshotDir({ repo, revision }: Subject): string | null {
    const repoDir = this.repoDir(repo);
    const commit = SHA1_HEX.test(revision) ? revision : readRef(repoDir, revision);
    if (commit === null || !SAFE_FILE_NAME.test(commit)) return null;
    const dir = path.join(repoDir, 'snapshots', commit);
    return fs.existsSync(dir) ? dir : null;
  }
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

/** Relative ('/'-separated) paths of the files in a snapshot whose blob is present. */
function listSnapshotFiles(snapshotDir: string): string[] {
  return fs
    .readdirSync(snapshotDir, { recursive: true, encoding: 'utf8' })
    .filter((relative) => fs.statSync(path.join(snapshotDir, relative), { throwIfNoEntry: false })?.isFile() ?? false)
    .map((relative) => relative.split(path.sep).join('/'))
    .sort();
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
