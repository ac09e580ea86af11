/**
 * The catalog of recommended models (docs/models.md, "Catalog"): short names such as `parakeet-v3` for hub models,
 * accepted wherever a model ID is, with what a person needs to choose one (task, languages, download size, memory,
 * licence, what it is good at). The entries are data, in catalog-models.ts, each citing the model card its facts
 * come from.
 */
import type { ModelTask } from '../engines/types.js';
import type { HubClient } from './hub.js';

export interface CatalogEntry {
  /** The short name: lower-case letters, digits, dots, dashes and underscores. */
  name: string;
  /** The model ID it stands for (docs/models.md, "Model IDs"): a hub file, or a repository with a quantisation tag. */
  id: string;
  /** The hub repository its files are in. */
  repo: string;
  /** The files that ID downloads, with their sizes in bytes as the hub lists them. */
  files: readonly { path: string; bytes: number }[];
  task: ModelTask;
  /** The engine that runs it (docs/models.md, "Engines"). */
  engine: string;
  /** The languages it handles, in words. */
  languages: string;
  /** How much memory it takes loaded, in bytes, where its card or runtime says (else its files' size stands for it). */
  memoryBytes?: number;
  /** SPDX identifier, or the licence's name. */
  license: string;
  /** What it is good at, in one line. */
  note: string;
  /** The model card (or listing) its facts come from. */
  source: string;
}

export class Catalog {
  private readonly byName: Map<string, CatalogEntry>;

  constructor(
    readonly entries: readonly CatalogEntry[],
    private readonly hub: HubClient,
  ) {
    this.byName = new Map(entries.map((entry) => [entry.name, entry]));
  }

  /** The entry of a short name (in any case), or null. */
  find(name: string): CatalogEntry | null {
    return this.byName.get(name.toLowerCase()) ?? null;
  }

  /** Its download, in bytes. */
  downloadBytes(entry: CatalogEntry): number {
    return entry.files.reduce((sum, file) => sum + file.bytes, 0);
  }

  /** The memory it takes loaded: its card's figure, else at least its weights (its files' size). */
  memoryBytes(entry: CatalogEntry): number {
    return entry.memoryBytes ?? this.downloadBytes(entry);
  }

  /** The memory its card gives for the model ID an entry stands for, or null (no entry, or no figure). */
  memoryBytesOf(modelId: string): number | null {
    return this.entries.find((entry) => entry.id === modelId)?.memoryBytes ?? null;
  }

  /** Whether every file of it is in the hub cache (no network). */
  isCached(entry: CatalogEntry): boolean {
    return entry.files.every((file) => this.hub.cachedFile(entry.repo, file.path) !== null);
  }
}
