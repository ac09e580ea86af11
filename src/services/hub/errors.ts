/** The hub client's one error type, and what a request was about, for its messages. */

export type HubErrorKind = 'not_found' | 'unauthorized' | 'offline' | 'network' | 'integrity' | 'aborted' | 'disk_full' | 'busy';

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

export const DEFAULT_REVISION = 'main';
const REPO_ID = /^[A-Za-z0-9][\w.-]*\/[A-Za-z0-9][\w.-]*$/;

/** What a request is about, for error messages. */
export interface Subject {
  repo: string;
  file?: string;
  revision: string;
}

export function validateSubject(subject: Subject): void {
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

export function subjectName(subject: Subject): string {
  const name = subject.file === undefined ? subject.repo : `${subject.repo}/${subject.file}`;
  return subject.revision === DEFAULT_REVISION ? name : `${name}@${subject.revision}`;
}

export function causeMessage(error: unknown): string {
  const cause = error instanceof Error && error.cause instanceof Error ? error.cause : error;
  return cause instanceof Error ? cause.message : String(cause);
}
