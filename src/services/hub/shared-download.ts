/**
 * Each blob is downloaded once: one transfer per process however many requests (and clients on the same cache) want
 * it, and one process at a time among those sharing the cache (pods on one volume included), under the file lock
 * `{etag}.lock`. A process that waited for the lock finds the blob complete, or downloads it itself, resuming what a
 * failed or crashed owner left.
 */
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import type { HubApi } from './api.js';
import { acquireFileLock, type LockOwner } from '../file-lock.js';
import { SharedWork } from '../shared-work.js';
import { downloadBlob, type BlobDownload } from './download.js';
import { causeMessage, HubError, subjectName, type Subject } from './errors.js';
import type { ProgressOptions } from './progress.js';

/** Transfers under way in this process, by blob path: shared by every client on the same cache. */
const inFlightDownloads = new Map<string, SharedWork<void>>();

export class SharedDownloads {
  constructor(
    private readonly api: HubApi,
    private readonly options: ProgressOptions,
  ) {}

  /** Joins the transfer of this blob already under way in this process, or starts it. */
  download(download: BlobDownload, signal: AbortSignal | undefined): Promise<void> {
    let shared = inFlightDownloads.get(download.blobPath);
    if (shared === undefined || shared.abandoned) {
      // A transfer every caller gave up on may still be winding down: start after it, never two writers on one .incomplete
      const previous = shared?.promise.catch(() => undefined) ?? Promise.resolve();
      const work: SharedWork<void> = new SharedWork((workSignal) =>
        previous
          .then(() => this.downloadUnderLock(download, workSignal))
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

  /** The transfer under the blob's file lock, unless another process completed the blob meanwhile. */
  private async downloadUnderLock(download: BlobDownload, signal: AbortSignal): Promise<void> {
    // only a verified blob is renamed into place
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
        await downloadBlob(this.api, this.options, download, AbortSignal.any([signal, lock.lost]));
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
}
