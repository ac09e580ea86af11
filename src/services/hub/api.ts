/**
 * The hub's HTTP API as this client uses it: a file's metadata (HEAD on its resolve URL), a revision's file list
 * (/api/models/{repo}/tree/{rev}), and the one request function every fetch goes through: redirects followed by
 * hand so that HF_TOKEN only ever goes to the endpoint's origin, HTTP errors as HubErrors, and the inactivity
 * timeout. Only Node built-ins (global fetch).
 */
import { SAFE_FILE_NAME } from './cache-layout.js';
import { causeMessage, HubError, subjectName, type Subject } from './errors.js';
import { chunksOf, InactivityTimeout } from './inactivity-timeout.js';
import type { HubFile } from './types.js';

const REDIRECT_STATUSES = new Set([301, 302, 303, 307, 308]);
const MAX_REDIRECTS = 10;

export interface FileMetadata {
  commit: string;
  etag: string;
  size: number;
  /** The LFS redirect target (CDN) when the hub gave one, else the resolve URL. */
  downloadUrl: string;
}

export interface HubRequest {
  method: 'GET' | 'HEAD';
  headers?: Record<string, string>;
  signal: AbortSignal | undefined;
  /** Ends the request when the hub sends nothing for too long; the caller goes on touching it while it reads the body. */
  stall: InactivityTimeout;
  followRedirect?: (response: Response) => boolean;
}

interface TreeEntry {
  type: string;
  path: string;
  size: number;
  lfs?: { oid: string; size: number };
}

export class HubApi {
  readonly endpoint: string;
  private readonly endpointOrigin: string;

  constructor(
    endpoint: string,
    private readonly token: string | undefined,
    /** A request that receives nothing for this long fails. */
    private readonly inactivityTimeoutMs: number,
  ) {
    this.endpoint = endpoint.replace(/\/+$/, '');
    this.endpointOrigin = new URL(this.endpoint).origin;
  }

  /** A fresh inactivity timeout for one request and the reading of its body. */
  stallTimeout(): InactivityTimeout {
    return new InactivityTimeout(this.inactivityTimeoutMs);
  }

  async fileMetadata(subject: Subject, signal: AbortSignal | undefined): Promise<FileMetadata> {
    const file = subject.file ?? '';
    const resolveUrl = `${this.endpoint}/${subject.repo}/resolve/${encodeURIComponent(subject.revision)}/${file.split('/').map(encodeURIComponent).join('/')}`;
    // Stop at the hub's own answer (it carries X-Repo-Commit): the CDN an LFS redirect points to knows nothing of the repo.
    using stall = this.stallTimeout();
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

  /** The files of a revision, all pages of the recursive listing. */
  async listFiles(subject: Subject, signal: AbortSignal | undefined): Promise<HubFile[]> {
    const files: HubFile[] = [];
    let pageUrl: string | null = `${this.endpoint}/api/models/${subject.repo}/tree/${encodeURIComponent(subject.revision)}?recursive=true`;
    while (pageUrl !== null) {
      using stall = this.stallTimeout();
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
  async request(url: string, init: HubRequest, subject: Subject): Promise<{ response: Response; url: string }> {
    let current = url;
    for (let redirects = 0; ; redirects++) {
      const sameOrigin = new URL(current).origin === this.endpointOrigin;
      const headers: Record<string, string> = {
        'User-Agent': 'voxd',
        // Sizes and hashes are those of the raw bytes
        'Accept-Encoding': 'identity',
        ...init.headers,
        ...(this.token && sameOrigin ? { Authorization: `Bearer ${this.token}` } : {}),
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
      const advice = this.token ? 'HF_TOKEN is set but does not grant access to it' : 'set HF_TOKEN to a token that can read it';
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
}
