/** The hub client's public types, shared by its modules. */

export interface HubLogger {
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
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
