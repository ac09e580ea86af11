/** How a download reports its progress: log lines at start, every ~2 s and at the end; a bar on stderr when asked for and stderr is a terminal. */
import { subjectName, type Subject } from './errors.js';
import type { HubLogger } from './types.js';

const PROGRESS_LOG_INTERVAL_MS = 2000;
const PROGRESS_BAR_INTERVAL_MS = 100;
const PROGRESS_BAR_WIDTH = 30;

export interface ProgressOptions {
  logger?: HubLogger | undefined;
  /** Draw a progress bar on stderr when it is a TTY. */
  progressBar?: boolean | undefined;
}

export class DownloadProgress {
  private readonly logger: HubLogger | undefined;
  private readonly drawBar: boolean;
  private readonly fields: { repo: string; file: string | undefined };
  private readonly label: string;
  private readonly startedAt = Date.now();
  private lastLogAt = this.startedAt;
  private lastDrawAt = 0;
  private barDrawn = false;

  constructor(
    options: ProgressOptions,
    subject: Subject,
    /** The blob's size in bytes. */
    private readonly size: number,
    private readonly resumeFrom: number,
  ) {
    this.logger = options.logger;
    this.drawBar = options.progressBar === true && process.stderr.isTTY === true;
    this.fields = { repo: subject.repo, file: subject.file };
    this.label = subjectName(subject);
    const resuming = resumeFrom > 0 ? `, resuming at ${formatBytes(resumeFrom)}` : '';
    this.logger?.info({ ...this.fields, bytes: size, resumeFrom }, `downloading ${this.label} (${formatBytes(size)}${resuming})`);
  }

  update(received: number): void {
    const now = Date.now();
    const percent = this.size > 0 ? Math.floor((received * 100) / this.size) : 100;
    if (now - this.lastLogAt >= PROGRESS_LOG_INTERVAL_MS) {
      this.lastLogAt = now;
      this.logger?.info(
        { ...this.fields, received, bytes: this.size, percent },
        `downloading ${this.label}: ${percent}% (${formatBytes(received)} of ${formatBytes(this.size)})`,
      );
    }
    if (this.drawBar && now - this.lastDrawAt >= PROGRESS_BAR_INTERVAL_MS) {
      this.lastDrawAt = now;
      this.barDrawn = true;
      const filled = Math.round((percent / 100) * PROGRESS_BAR_WIDTH);
      const bar = '#'.repeat(filled) + '.'.repeat(PROGRESS_BAR_WIDTH - filled);
      process.stderr.write(`\r\x1b[K${this.label} [${bar}] ${percent}% ${formatBytes(received)}/${formatBytes(this.size)} ${this.rate(received, now)}`);
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

export function formatBytes(bytes: number): string {
  const units = ['B', 'kB', 'MB', 'GB', 'TB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1000 && unit < units.length - 1) {
    value /= 1000;
    unit++;
  }
  return `${unit === 0 ? Math.round(value) : value.toFixed(1)} ${units[unit]}`;
}
