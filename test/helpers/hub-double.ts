/**
 * A local stand-in for the Hugging Face hub, serving repos registered from local files with the hub's public URL and
 * header layout: `/{repo}/resolve/{rev}/{path}` (HEAD/GET, ranges), LFS files redirected to a CDN (another path, or a
 * second server on another port, so another origin), `/api/models/{repo}[/revision/{rev}]` and `/api/models/{repo}/tree/{rev}`.
 * It records every request and injects faults (truncated transfers, ignored ranges, corrupt bytes, slow chunks, a
 * transfer held in the middle).
 */
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as delay } from 'node:timers/promises';

export interface HubDoubleOptions {
  /** Where GETs of LFS files are redirected: a second server (another origin, like the hub's CDN; default) or a path on this one. */
  lfsRedirect?: 'other-host' | 'same-host';
  /** Files of at least this many bytes are LFS files (default 1024). */
  lfsMinBytes?: number;
  /** File content is written in chunks of this size (default 64 KiB). */
  chunkSize?: number;
  /** Entries per page of the tree API, linked with `Link: <...>; rel="next"` (default: one page). */
  treePageSize?: number;
}

/** A file the repo lists at this size but never serves: a real repository's listing, its content out of reach. */
export interface ListedOnly {
  listedSize: number;
}

export interface RepoSpec {
  /** Path in the repo → a local file to read, the content itself, or a size the listing gives (ListedOnly). */
  files: Record<string, string | Buffer | ListedOnly>;
  /** Default: a random 40-hex sha. */
  commit?: string;
  /** Makes the repo private: every hub request for it needs `Authorization: Bearer {token}`, else 401. */
  token?: string;
}

export interface FileFaults {
  /** Close the socket after this many body bytes of a GET ... */
  truncateAfterBytes?: number;
  /** ... for this many GETs (default 1). */
  truncateTimes?: number;
  /** Answer 200 with the whole file to `Range` requests. */
  ignoreRange?: boolean;
  /** Serve the content with this byte flipped (headers still announce the true hashes). */
  corruptByteAt?: number;
  /** Pause between chunks of content. */
  chunkDelayMs?: number;
  /** After this many body bytes of each GET, wait for `until` before sending the rest: a transfer caught in the middle. */
  pauseAt?: { bytes: number; until: Promise<unknown> };
}

export interface RecordedRequest {
  server: 'hub' | 'cdn';
  method: string;
  path: string;
  /** `repo/path` when the request is about one file. */
  file?: string;
  authorization?: string;
  range?: string;
  status?: number;
  /** A GET that sent (some of) the file's content. */
  content: boolean;
  /** The connection closed before the whole answer went out: the client left, or a fault cut it. */
  endedEarly?: boolean;
}

interface DoubleFile {
  path: string;
  content: Buffer;
  /** The content's size; for a ListedOnly file (content empty, never served), the size listed. */
  size: number;
  listedOnly: boolean;
  sha256: string;
  /** git blob id: of the content, or for an LFS file of its pointer file. */
  gitOid: string;
  lfs: boolean;
  /** Size of the git object: the content, or the LFS pointer file. */
  gitSize: number;
}

interface DoubleRepo {
  id: string;
  commit: string;
  token?: string;
  files: Map<string, DoubleFile>;
}

const CDN_PREFIX = 'cdn-lfs';
const DEFAULT_CHUNK_SIZE = 64 * 1024;

export class HubDouble {
  readonly requests: RecordedRequest[] = [];
  private readonly repos = new Map<string, DoubleRepo>();
  private readonly faults = new Map<string, FileFaults>();

  private constructor(
    private readonly options: HubDoubleOptions,
    private readonly hubServer: http.Server,
    private readonly cdnServer: http.Server,
    /** HF_ENDPOINT for the client. */
    readonly endpoint: string,
    private readonly cdnBase: string,
  ) {
    hubServer.on('request', (req, res) => void this.handle('hub', req, res));
    cdnServer.on('request', (req, res) => void this.handle('cdn', req, res));
  }

  static async start(options: HubDoubleOptions = {}): Promise<HubDouble> {
    const [hub, cdn] = await Promise.all([listen(), listen()]);
    return new HubDouble(options, hub.server, cdn.server, hub.url, cdn.url);
  }

  /** Registers (or replaces, as a new commit) a repo; returns its commit sha. */
  addRepo(id: string, spec: RepoSpec): string {
    const files = new Map<string, DoubleFile>();
    for (const [filePath, source] of Object.entries(spec.files)) {
      const listedOnly = typeof source === 'object' && !Buffer.isBuffer(source);
      const content = listedOnly ? Buffer.alloc(0) : typeof source === 'string' ? fs.readFileSync(source) : source;
      const size = listedOnly ? source.listedSize : content.length;
      // a listed-only file's hash stands for content no one reads
      const sha256 = createHash('sha256')
        .update(listedOnly ? `${filePath}:${size}` : content)
        .digest('hex');
      const lfs = size >= (this.options.lfsMinBytes ?? 1024);
      const gitContent = lfs ? Buffer.from(`version https://git-lfs.github.com/spec/v1\noid sha256:${sha256}\nsize ${size}\n`) : content;
      files.set(filePath, { path: filePath, content, size, listedOnly, sha256, gitOid: gitBlobId(gitContent), lfs, gitSize: gitContent.length });
    }
    const commit = spec.commit ?? randomBytes(20).toString('hex');
    this.repos.set(id, { id, commit, files, ...(spec.token !== undefined ? { token: spec.token } : {}) });
    return commit;
  }

  setFaults(repo: string, file: string, faults: FileFaults): void {
    this.faults.set(`${repo}/${file}`, faults);
  }

  /** The GETs that sent (some of) a file's content, wherever served (hub or CDN). */
  contentTransfers(repo: string, file: string): RecordedRequest[] {
    return this.requests.filter((r) => r.content && r.file === `${repo}/${file}`);
  }

  async close(): Promise<void> {
    for (const server of [this.hubServer, this.cdnServer]) {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  }

  private async handle(server: 'hub' | 'cdn', req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://double');
    const record: RecordedRequest = {
      server,
      method: req.method ?? 'GET',
      path: url.pathname,
      content: false,
      ...(req.headers.authorization !== undefined ? { authorization: req.headers.authorization } : {}),
      ...(req.headers.range !== undefined ? { range: req.headers.range } : {}),
    };
    this.requests.push(record);
    res.on('finish', () => (record.status = res.statusCode));
    res.on('close', () => {
      record.status ??= res.statusCode;
      if (!res.writableFinished) record.endedEarly = true;
    });
    // Segments stay encoded until split: a revision like refs/pr/1 arrives as refs%2Fpr%2F1
    const segments = url.pathname.split('/').slice(1).map(decodeURIComponent);
    try {
      if (segments[0] === CDN_PREFIX && (server === 'cdn' || this.options.lfsRedirect === 'same-host')) {
        return await this.serveCdn(segments.slice(1), req, res, record);
      }
      if (server === 'hub' && segments[0] === 'api' && segments[1] === 'models') return this.serveApi(segments.slice(2), url, req, res);
      if (server === 'hub' && segments[2] === 'resolve') return await this.serveResolve(segments, req, res, record);
      sendError(res, 404, 'NotFound', 'Sorry, we cannot find the page you are looking for.');
    } catch (error) {
      if (!res.headersSent) sendError(res, 500, 'InternalError', String(error));
      else res.destroy();
    }
  }

  /** `/{owner}/{name}/resolve/{rev}/{path...}` */
  private async serveResolve(segments: string[], req: http.IncomingMessage, res: http.ServerResponse, record: RecordedRequest): Promise<void> {
    const repo = this.authorizedRepo(`${segments[0]}/${segments[1]}`, req, res);
    if (!repo || !checkRevision(repo, segments[3] ?? '', res)) return;
    const filePath = segments.slice(4).join('/');
    record.file = `${repo.id}/${filePath}`;
    const file = repo.files.get(filePath);
    if (!file || file.listedOnly) return sendError(res, 404, 'EntryNotFound', `Entry not found: ${filePath}`);
    if (file.lfs) {
      const cdnBase = this.options.lfsRedirect === 'same-host' ? this.endpoint : this.cdnBase;
      res.writeHead(302, {
        Location: `${cdnBase}/${CDN_PREFIX}/${repo.id}/${file.sha256}?X-Amz-Signature=double`,
        'X-Repo-Commit': repo.commit,
        'X-Linked-Etag': `"${file.sha256}"`,
        'X-Linked-Size': String(file.content.length),
        ETag: `"${file.gitOid}"`,
        'Content-Length': '0',
      });
      res.end();
      return;
    }
    await this.serveContent(file, repo, req, res, record, { 'X-Repo-Commit': repo.commit, ETag: `"${file.gitOid}"` });
  }

  /** `/cdn-lfs/{owner}/{name}/{sha256}`: signed-URL storage, no Authorization needed. */
  private async serveCdn(segments: string[], req: http.IncomingMessage, res: http.ServerResponse, record: RecordedRequest): Promise<void> {
    const repo = this.repos.get(`${segments[0]}/${segments[1]}`);
    const file = repo && [...repo.files.values()].find((f) => f.lfs && f.sha256 === segments[2]);
    if (!repo || !file) return sendError(res, 404, 'NotFound', 'NoSuchKey');
    record.file = `${repo.id}/${file.path}`;
    await this.serveContent(file, repo, req, res, record, { ETag: `"${file.sha256}"` });
  }

  private async serveContent(
    file: DoubleFile,
    repo: DoubleRepo,
    req: http.IncomingMessage,
    res: http.ServerResponse,
    record: RecordedRequest,
    headers: Record<string, string>,
  ): Promise<void> {
    const faults = this.faults.get(`${repo.id}/${file.path}`) ?? {};
    const content = Buffer.from(file.content);
    if (faults.corruptByteAt !== undefined) content[faults.corruptByteAt] = (content[faults.corruptByteAt] ?? 0) ^ 0xff;

    const rangeStart = /^bytes=(\d+)-$/.exec(req.headers.range ?? '')?.[1];
    const start = rangeStart !== undefined && !faults.ignoreRange ? Number(rangeStart) : 0;
    if (start > 0 && start >= content.length) {
      res.writeHead(416, { 'Content-Range': `bytes */${content.length}` });
      res.end();
      return;
    }
    res.writeHead(start > 0 ? 206 : 200, {
      ...headers,
      'Content-Type': 'application/octet-stream',
      'Content-Length': String(content.length - start),
      'Accept-Ranges': 'bytes',
      ...(start > 0 ? { 'Content-Range': `bytes ${start}-${content.length - 1}/${content.length}` } : {}),
    });
    if (req.method === 'HEAD') {
      res.end();
      return;
    }

    record.content = true;
    const body = content.subarray(start);
    const truncateTimes = faults.truncateTimes ?? 1;
    const cutAt = faults.truncateAfterBytes !== undefined && truncateTimes > 0 ? faults.truncateAfterBytes : body.length;
    if (cutAt < body.length) faults.truncateTimes = truncateTimes - 1;
    const chunkSize = this.options.chunkSize ?? DEFAULT_CHUNK_SIZE;
    const { pauseAt } = faults;
    for (let offset = 0; offset < Math.min(cutAt, body.length) && !res.destroyed;) {
      // A chunk ends where the transfer pauses, if it pauses inside it
      const pauseEnd = pauseAt !== undefined && pauseAt.bytes > offset ? pauseAt.bytes : Infinity;
      const end = Math.min(offset + chunkSize, cutAt, pauseEnd);
      // The callback runs once the bytes are handed to the socket, so a truncation still delivers them
      await new Promise<void>((resolve) => res.write(body.subarray(offset, end), () => resolve()));
      offset = end;
      if (offset === pauseAt?.bytes) await pauseAt.until;
      if (faults.chunkDelayMs) await delay(faults.chunkDelayMs);
    }
    if (cutAt < body.length) res.socket?.destroy();
    else res.end();
  }

  /** `/api/models/{owner}/{name}[/revision/{rev} | /tree/{rev}[/{path}]]` */
  private serveApi(segments: string[], url: URL, req: http.IncomingMessage, res: http.ServerResponse): void {
    const repo = this.authorizedRepo(`${segments[0]}/${segments[1]}`, req, res);
    if (!repo) return;
    const [kind, revision, ...folder] = segments.slice(2);
    if (kind === undefined || kind === 'revision') {
      if (!checkRevision(repo, revision ?? 'main', res)) return;
      return sendJson(res, {
        _id: repo.commit.slice(0, 24),
        id: repo.id,
        modelId: repo.id,
        sha: repo.commit,
        private: repo.token !== undefined,
        gated: false,
        siblings: [...repo.files.keys()].sort().map((rfilename) => ({ rfilename })),
      });
    }
    if (kind !== 'tree') return sendError(res, 404, 'NotFound', 'Sorry, we cannot find the page you are looking for.');
    if (!checkRevision(repo, revision ?? '', res)) return;
    const entries = treeEntries(repo, folder.join('/'), ['true', 'True', '1'].includes(url.searchParams.get('recursive') ?? ''));
    const pageSize = this.options.treePageSize ?? entries.length;
    const cursor = Number(url.searchParams.get('cursor') ?? 0);
    const nextCursor = cursor + pageSize;
    if (nextCursor < entries.length) {
      const next = new URL(url.pathname + url.search, this.endpoint);
      next.searchParams.set('cursor', String(nextCursor));
      res.setHeader('Link', `<${next.href}>; rel="next"`);
    }
    sendJson(res, entries.slice(cursor, nextCursor));
  }

  /** The repo, or null after answering 404 (unknown) / 401 (private without the right token), as the hub does. */
  private authorizedRepo(id: string, req: http.IncomingMessage, res: http.ServerResponse): DoubleRepo | null {
    const repo = this.repos.get(id);
    if (!repo) {
      sendError(res, 404, 'RepoNotFound', 'Repository not found');
      return null;
    }
    if (repo.token !== undefined && req.headers.authorization !== `Bearer ${repo.token}`) {
      sendError(res, 401, 'RepoNotFound', 'Invalid username or password.');
      return null;
    }
    return repo;
  }
}

/** For `pauseAt`: a promise held until the test ends, or until `release` is called. */
export function heldUntilEnd(scope: { after(fn: () => void): void }): { held: Promise<void>; release: () => void } {
  let release!: () => void;
  const held = new Promise<void>((resolve) => (release = resolve));
  scope.after(() => release());
  return { held, release };
}

/** A server on an ephemeral port of 127.0.0.1; each one is its own origin. */
async function listen(): Promise<{ server: http.Server; url: string }> {
  const server = http.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

/** The git blob id: the ETag the hub gives a file outside LFS. */
export function gitBlobId(content: Buffer): string {
  return createHash('sha1').update(`blob ${content.length}\0`).update(content).digest('hex');
}

function checkRevision(repo: DoubleRepo, revision: string, res: http.ServerResponse): boolean {
  if (revision === 'main' || revision === repo.commit) return true;
  sendError(res, 404, 'RevisionNotFound', `Invalid rev id: ${revision}`);
  return false;
}

function sendError(res: http.ServerResponse, status: number, code: string, message: string): void {
  res.writeHead(status, { 'Content-Type': 'application/json', 'X-Error-Code': code, 'X-Error-Message': message });
  res.end(JSON.stringify({ error: message }));
}

function sendJson(res: http.ServerResponse, value: unknown): void {
  res.writeHead(200, { 'Content-Type': 'application/json' });
  res.end(JSON.stringify(value));
}

/** Tree API entries under `folder` ('' = root): its direct children, or with `recursive` everything below it. */
function treeEntries(repo: DoubleRepo, folder: string, recursive: boolean): object[] {
  const prefix = folder === '' ? '' : `${folder}/`;
  const directories = new Set<string>();
  for (const filePath of repo.files.keys()) {
    const parts = filePath.split('/');
    for (let depth = 1; depth < parts.length; depth++) directories.add(parts.slice(0, depth).join('/'));
  }
  const isListed = (entryPath: string): boolean => entryPath.startsWith(prefix) && (recursive || !entryPath.slice(prefix.length).includes('/'));
  const directoryEntries = [...directories]
    .filter(isListed)
    .map((dirPath) => ({ type: 'directory', oid: gitBlobId(Buffer.from(dirPath)), size: 0, path: dirPath }));
  const fileEntries = [...repo.files.values()]
    .filter((file) => isListed(file.path))
    .map((file) => ({
      type: 'file',
      oid: file.gitOid,
      size: file.size,
      path: file.path,
      ...(file.lfs ? { lfs: { oid: file.sha256, size: file.size, pointerSize: file.gitSize } } : {}),
    }));
  return [...directoryEntries, ...fileEntries].sort((a, b) => a.path.localeCompare(b.path));
}
