/**
 * The model registry: turns model IDs into loaded models. It resolves vendor aliases, finds local files or
 * downloads from the hub, picks the engine from the file content, loads lazily with one load per model under
 * concurrency, hands out leases so a model in use is never freed, and bounds resident models (LRU, idle TTL).
 */
import fsp from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { ApiError } from '../errors.js';
import type { Engine, LoadedModel, ModelTask, ResolvedModel, SeparatorModel, SttModel } from '../engines/types.js';
import type { Logger } from '../logger.js';
import type { Catalog, CatalogEntry } from './catalog.js';
import { DownloadTracker } from './hub.js';
import { ensureMemoryFor } from './memory.js';
import type { Metrics } from './metrics.js';
import type { ModelFiles } from './model-files.js';
import { normaliseModelId, parseModelId } from './model-id.js';
import { Gauge } from './metrics.js';
import { SharedWork } from './shared-work.js';

/** The vendor's diarizing transcription model: --stt-model, with speakers (docs/api.md, "Diarized transcripts"). */
export const DIARIZING_ALIAS = 'gpt-4o-transcribe-diarize';
export const STT_ALIASES = ['whisper-1', 'gpt-4o-transcribe', 'gpt-4o-mini-transcribe', DIARIZING_ALIAS] as const;
export const TTS_ALIASES = ['tts-1', 'tts-1-hd', 'gpt-4o-mini-tts'] as const;

/** An entry of GET /v1/models. */
export interface ModelInfo {
  id: string;
  object: 'model';
  created: number;
  owned_by: 'voxd';
  loaded: boolean;
  task?: ModelTask;
  engine?: string;
  /** For an alias: the model it stands for. */
  target?: string;
  /** For a loaded separator: the sounds it extracts (canonical names a `description` may use). */
  targets?: string[];
  /** For a loaded STT model: whether it times words (`timestamp_granularities[]=word`) and translates. */
  word_timestamps?: boolean;
  translates?: boolean;
  /** For a loaded model with files: their size on disk, in bytes (built-in models have none); for a catalog model, its download. */
  size_bytes?: number;
  /** Where a model asked for stands: its files downloading, its engine loading, or loaded. */
  state?: 'downloading' | 'loading' | 'loaded';
  /** While it downloads: the bytes of its files on disk, their total, and the seconds left (null until there is a rate). */
  bytes?: number;
  total?: number;
  eta?: number | null;
  /** For a catalog model (docs/models.md, "Catalog"): what the catalog says of it, and whether its files are all in the cache. */
  cached?: boolean;
  memory_bytes?: number;
  languages?: string;
  license?: string;
  description?: string;
}

/** POST /v1/models's server-sent events: the load's progress, then the model loaded. */
export type LoadEvent =
  ({ type: 'model.progress'; id: string } & Pick<ModelInfo, 'state' | 'bytes' | 'total' | 'eta'>) | { type: 'model.loaded'; model: ModelInfo };

/** How often a load's progress is sent. */
const PROGRESS_INTERVAL_MS = 500;

/** A model held for one request or session; `using` releases it when the scope ends. Releasing twice is harmless. */
export interface ModelLease<M extends LoadedModel = LoadedModel> extends Disposable {
  readonly model: M;
  release(): void;
}

/** A model that ships with voxd under a short reserved ID: no file, no download. */
export interface BuiltinModel {
  task: ModelTask;
  engine: string;
  load(id: string): Promise<LoadedModel>;
}

export interface RegistryOptions {
  engines: Engine[];
  /** Finds (downloads) a model ID's files. */
  files: ModelFiles;
  /** Short names of recommended models, accepted wherever a model ID is. */
  catalog: Catalog;
  logger: Logger;
  metrics: Metrics;
  modelsDirs: string[];
  /** Models behind the vendor aliases, and the VAD model turn detection uses. */
  defaults: { stt: string | null; tts: string | null; vad: string };
  maxLoaded: number;
  idleTtlMs: number;
  /** Reserved IDs of built-in models (an existing local path of the same name still wins). */
  builtins?: Record<string, BuiltinModel>;
}

interface Entry {
  id: string;
  /** The load (a download first, for a hub model): shared by the requests that wait for it, cancelled when all left before the engine began. */
  loading: SharedWork<LoadedModel>;
  model: LoadedModel | null;
  created: number;
  refs: number;
  lastUsed: number;
  pinned: boolean;
  /** Unloaded by a client while in use: freed when the last lease is released. */
  retired: boolean;
  /** Position in load order (see `latestLoaded`). */
  loadOrder: number;
  /** Size of the model's files on disk; null for a built-in model. */
  bytes: number | null;
  /** Until loaded: its files downloading, then its engine loading. */
  phase: 'downloading' | 'loading';
  /** Its download's bytes so far. */
  tracker: DownloadTracker;
}

export class ModelRegistry {
  private readonly entries = new Map<string, Entry>();
  private loads = 0;
  /** Counts the changes to the loaded models (see `listVersion`). */
  private changes = 0;
  private readonly sweeper: NodeJS.Timeout | null;

  constructor(private readonly options: RegistryOptions) {
    const loaded = (): Entry[] => [...this.entries.values()].filter((e) => e.model);
    options.metrics.add(new Gauge('voxd_models_resident', 'Loaded models', () => [{ value: loaded().length }]));
    options.metrics.add(
      new Gauge('voxd_model_loaded', 'Loaded models, one series each (1), by task and engine', () =>
        loaded().map(({ id, model }) => ({ labels: { model: id, task: model?.task ?? '', engine: model?.engine ?? '' }, value: 1 })),
      ),
    );
    options.metrics.add(
      new Gauge('voxd_model_file_bytes', "Size of a loaded model's files, which its weights occupy in memory", () =>
        loaded().flatMap(({ id, bytes }) => (bytes === null ? [] : [{ labels: { model: id }, value: bytes }])),
      ),
    );
    this.sweeper = options.idleTtlMs > 0 ? setInterval(() => this.evictIdle(), Math.min(30_000, Math.max(1000, options.idleTtlMs / 2))).unref() : null;
  }

  /**
   * Replaces a vendor alias by the configured default model and a catalog name by its model ID (the default may be a
   * catalog name too); other IDs pass through normalised.
   */
  resolveAlias(rawId: string): string {
    const id = normaliseModelId(rawId);
    const kind = (STT_ALIASES as readonly string[]).includes(id) ? 'stt' : (TTS_ALIASES as readonly string[]).includes(id) ? 'tts' : null;
    if (!kind) return this.catalogTarget(id) ?? id;
    const target = this.options.defaults[kind];
    if (!target) {
      const flag = kind === 'stt' ? '--stt-model' : '--tts-model';
      throw new ApiError('model_not_found', `no default ${kind === 'stt' ? 'speech-to-text' : 'text-to-speech'} model is configured for ${id} (set ${flag})`, {
        param: 'model',
      });
    }
    return this.catalogTarget(target) ?? target;
  }

  /** The model ID a catalog name stands for; null for any other ID (a local path of the same name wins). */
  private catalogTarget(id: string): string | null {
    const entry = this.options.catalog.find(id);
    return entry && parseModelId(id, this.options.modelsDirs)?.kind !== 'local' ? entry.id : null;
  }

  /**
   * A loaded model for the duration of a request. Loads it on first use. When `signal` (the client's) aborts first,
   * this request stops waiting at once, and a load (download) that no request waits for any more is cancelled.
   */
  async acquire<M extends LoadedModel = LoadedModel>(rawId: string, task?: ModelTask, signal?: AbortSignal): Promise<ModelLease<M>> {
    const entry = this.entryFor(this.canonicalId(this.resolveAlias(rawId)));
    entry.refs += 1;
    let model: LoadedModel;
    try {
      model = await waitForLoad(entry, signal);
    } catch (error) {
      entry.refs -= 1;
      throw error;
    }
    if (task && model.task !== task) {
      this.releaseEntry(entry);
      throw new ApiError('invalid_model', `model ${rawId} is a ${model.task} model; this endpoint needs a ${task} model`, { param: 'model' });
    }
    let released = false;
    const release = (): void => {
      if (released) return;
      released = true;
      this.releaseEntry(entry);
    };
    return { model: model as M, release, [Symbol.dispose]: release };
  }

  /**
   * The model an ID names when it is loaded, else null: no load, no lease (for what describes models at once: a
   * Wyoming `info`). An alias without a default model is null too.
   */
  peek(rawId: string): LoadedModel | null {
    try {
      const key = this.canonicalIdOrNull(this.resolveAlias(rawId));
      return key === null ? null : (this.entries.get(key)?.model ?? null);
    } catch {
      return null;
    }
  }

  /** The loaded model of `task` that finished loading last (the model a client most likely chose with POST /v1/models). */
  latestLoaded(task: ModelTask): string | null {
    let latest: Entry | null = null;
    for (const entry of this.entries.values()) {
      if (entry.model?.task === task && !entry.retired && (!latest || entry.loadOrder > latest.loadOrder)) latest = entry;
    }
    return latest?.id ?? null;
  }

  /** POST /v1/models: loads (or finds loaded) and describes the model. `signal` as for `acquire`. */
  async load(rawId: string, options: { pinned?: boolean; signal?: AbortSignal } = {}): Promise<ModelInfo> {
    const entry = this.entryFor(this.canonicalId(this.resolveAlias(rawId)));
    if (options.pinned) entry.pinned = true;
    await waitForLoad(entry, options.signal);
    entry.lastUsed = Date.now();
    return this.describeEntry(entry);
  }

  /**
   * POST /v1/models with progress: the load's state every PROGRESS_INTERVAL_MS while it downloads or loads, then the
   * model. An ID that names no model throws here, before any event (so the answer is its 4xx); `signal` as for
   * `acquire`.
   */
  loadEvents(rawId: string, signal: AbortSignal): AsyncGenerator<LoadEvent> {
    const entry = this.entryFor(this.canonicalId(this.resolveAlias(rawId)));
    return this.followLoad(entry, this.load(rawId, { signal }));
  }

  private async *followLoad(entry: Entry, loading: Promise<ModelInfo>): AsyncGenerator<LoadEvent> {
    const tick = new AbortController();
    const done = loading.then(
      () => true,
      () => true,
    );
    try {
      do {
        if (!entry.model) yield { type: 'model.progress', id: entry.id, ...this.progressOf(entry) };
      } while (!(await Promise.race([done, delay(PROGRESS_INTERVAL_MS, false, { signal: tick.signal })])));
    } finally {
      tick.abort(); // no timer outlives the stream
    }
    yield { type: 'model.loaded', model: await loading };
  }

  /**
   * DELETE /v1/models: removes the model from the registry; frees it now, or when its last request ends. A model
   * still downloading has its download cancelled (the partial files stay, and the next load resumes them).
   */
  async unload(rawId: string): Promise<void> {
    const id = this.canonicalId(this.resolveAlias(rawId));
    const entry = this.entries.get(id);
    if (entry && !entry.model) {
      if (entry.phase === 'downloading' && entry.loading.cancel()) return;
      throw new ApiError('invalid_request', `model ${rawId} is loading (its download is done); unload it once it is loaded`, { param: 'model_name' });
    }
    if (!entry?.model) throw new ApiError('model_not_found', `model ${rawId} is not loaded`, { param: 'model_name' });
    this.entries.delete(id);
    this.changes++;
    entry.retired = true;
    if (entry.refs === 0) await this.dispose(entry);
  }

  /**
   * GET /v1/models/{id}: a loaded model or one on its way (with its progress), an alias, a catalog name, or a model in
   * the local cache; never downloads.
   */
  describe(rawId: string): ModelInfo {
    const id = normaliseModelId(rawId);
    const listed = this.catalogTarget(id) === null ? null : (this.options.catalog.find(id) as CatalogEntry);
    const named = (STT_ALIASES as readonly string[]).includes(id) || (TTS_ALIASES as readonly string[]).includes(id) || listed !== null;
    const target = named ? this.resolveAlias(id) : null;
    const key = this.canonicalIdOrNull(target ?? id);
    const entry = key === null ? undefined : this.entries.get(key);
    const catalog = listed === null ? {} : this.catalogInfo(listed);
    if (entry) return { ...catalog, ...this.describeEntry(entry), ...(target ? { id, target: entry.id } : {}) };
    if (target) return { ...this.unloadedInfo(id), ...catalog, target };
    const cached = this.availableInfos().find((info) => info.id === id);
    if (cached) return cached;
    throw new ApiError('model_not_found', `model ${id} is not loaded and not in the local cache`, { param: 'model' });
  }

  /**
   * GET /v1/models: loaded models and those on their way (with their progress); with `available`, also aliases,
   * catalog models and models in the local cache.
   */
  list(available: boolean): ModelInfo[] {
    const current = [...this.entries.values()].filter((e) => !e.retired).map((e) => this.describeEntry(e));
    if (!available) return current;
    const seen = new Set(current.map((m) => m.id));
    return [...current, ...this.availableInfos().filter((m) => !seen.has(m.id))];
  }

  /**
   * Changes whenever `list(false)` may have: a model asked for, loaded, unloaded or evicted; null while one is on its
   * way (its progress changes by the second). Lets a caller keep what it made of the list.
   */
  get listVersion(): number | null {
    return [...this.entries.values()].some((e) => !e.model) ? null : this.changes;
  }

  /** Loads `--preload` models and keeps them resident (exempt from LRU and TTL eviction). */
  async preload(ids: string[]): Promise<void> {
    for (const id of ids) {
      this.options.logger.info({ model: id }, 'preloading model');
      await this.load(id, { pinned: true });
    }
  }

  /** Frees every model (shutdown). */
  async close(): Promise<void> {
    if (this.sweeper) clearInterval(this.sweeper);
    const entries = [...this.entries.values()];
    this.entries.clear();
    this.changes++;
    await Promise.all(entries.map((e) => this.dispose(e)));
  }

  /** Local paths as absolute paths (an existing path always wins), then built-in IDs, then hub IDs as given. */
  private canonicalIdOrNull(id: string): string | null {
    const ref = parseModelId(id, this.options.modelsDirs);
    if (ref?.kind === 'local') return path.resolve(ref.path);
    if (this.builtin(id)) return id;
    return ref ? id : null;
  }

  private canonicalId(id: string): string {
    const key = this.canonicalIdOrNull(id);
    if (key === null) {
      throw new ApiError(
        'model_not_found',
        `model ${id} not found: it is neither a local path nor a hub ID (owner/repo, owner/repo/file or owner/repo:QUANT)`,
        {
          param: 'model',
        },
      );
    }
    return key;
  }

  private entryFor(id: string): Entry {
    const existing = this.entries.get(id);
    // a load every request left before its engine began is being cancelled: a new request starts another (the hub
    // resumes the partial file); one in its engine is never abandoned, so this never loads a model twice at once
    if (existing && !(existing.model === null && existing.loading.abandoned)) return existing;
    const created: Entry = {
      id,
      // starts a microtask later, once `created` is set (the load keeps its progress there)
      loading: new SharedWork((signal, uncancellable) =>
        Promise.resolve()
          .then(() => this.loadModel(created, signal, uncancellable))
          .then(
            (loaded) => this.loaded(created, loaded),
            (error: unknown) => this.loadFailed(created, error, signal),
          ),
      ),
      model: null,
      created: 0,
      refs: 0,
      lastUsed: Date.now(),
      pinned: false,
      retired: false,
      loadOrder: 0,
      bytes: null,
      phase: 'downloading',
      tracker: new DownloadTracker(),
    };
    this.entries.set(id, created);
    this.changes++;
    return created;
  }

  private loaded(entry: Entry, { model, bytes }: { model: LoadedModel; bytes: number | null }): LoadedModel {
    entry.model = model;
    if (this.entries.get(entry.id) !== entry) {
      // the registry closed while it loaded: no one can use it
      void this.dispose(entry);
      return model;
    }
    entry.bytes = bytes;
    entry.created = Math.floor(Date.now() / 1000);
    entry.loadOrder = ++this.loads;
    this.changes++;
    this.options.metrics.modelLoads.inc({ outcome: 'ok' });
    this.enforceLimit(entry);
    return model;
  }

  private loadFailed(entry: Entry, error: unknown, signal: AbortSignal): never {
    // a failed load leaves no trace, so the next request retries
    if (this.entries.get(entry.id) === entry) this.entries.delete(entry.id);
    this.changes++;
    this.options.metrics.modelLoads.inc({ outcome: signal.aborted ? 'cancelled' : 'error' });
    throw error;
  }

  private builtin(id: string): BuiltinModel | undefined {
    return Object.hasOwn(this.options.builtins ?? {}, id) ? this.options.builtins?.[id] : undefined;
  }

  /**
   * Finds (downloads) the files and loads them, refusing a model that would not fit in memory. An engine's load cannot
   * be stopped: once it began, the load is `uncancellable`, and requests that come after every earlier one left join
   * it instead of loading the model again.
   */
  private async loadModel(entry: Entry, signal: AbortSignal, uncancellable: () => void): Promise<{ model: LoadedModel; bytes: number | null }> {
    const { id } = entry;
    const builtin = this.builtin(id);
    if (builtin) {
      uncancellable();
      entry.phase = 'loading';
      return { model: await builtin.load(id), bytes: null };
    }
    const started = performance.now();
    const resolved = await this.options.files.fetch(id, { signal, tracker: entry.tracker });
    // every request left, or DELETE cancelled, while the files were fetched: load nothing
    if (signal.aborted) throw new ApiError('download_cancelled', `the load of model ${id} was cancelled`, { param: 'model' });
    uncancellable();
    entry.phase = 'loading';
    const [weights, projector] = await Promise.all([diskBytes(resolved.path), resolved.projector ? diskBytes(resolved.projector) : 0]);
    // a catalog model's card may say it takes more than its weights
    ensureMemoryFor(id, Math.max(weights + projector, this.options.catalog.memoryBytesOf(id) ?? 0));
    let model: LoadedModel;
    try {
      model = await this.loadFiles(await this.engineFor(resolved.path, resolved.id), resolved);
    } catch (error) {
      throw await this.options.files.discardCorrupt(resolved, error);
    }
    this.options.logger.info({ model: id, engine: model.engine, ms: Math.round(performance.now() - started) }, 'model loaded');
    return { model, bytes: weights + projector };
  }

  private async loadFiles(engine: Engine, resolved: ResolvedModel): Promise<LoadedModel> {
    this.options.logger.info({ model: resolved.id, engine: engine.name, path: resolved.path }, 'loading model');
    try {
      return await engine.load(resolved);
    } catch (error) {
      throw new ApiError('invalid_model', `model ${resolved.id} could not be loaded by the ${engine.name} engine: ${(error as Error).message}`, {
        param: 'model',
        cause: error,
      });
    }
  }

  private async engineFor(filePath: string, id: string): Promise<Engine> {
    for (const engine of this.options.engines) {
      if (await engine.detect(filePath)) return engine;
    }
    throw new ApiError('invalid_model', `model ${id} is not in a format voxd can load (engines: ${this.options.engines.map((e) => e.name).join(', ')})`, {
      param: 'model',
    });
  }

  private releaseEntry(entry: Entry): void {
    entry.refs -= 1;
    entry.lastUsed = Date.now();
    if (entry.refs === 0 && entry.retired) void this.dispose(entry);
    else this.enforceLimit(entry);
  }

  /**
   * LRU: beyond --max-loaded-models, frees the least recently used models that no request holds. `current`
   * (just loaded or just used) is the most recent one and always stays.
   */
  private enforceLimit(current: Entry): void {
    const { maxLoaded } = this.options;
    if (maxLoaded <= 0) return;
    const loaded = [...this.entries.values()].filter((e) => e.model);
    const evictable = loaded.filter((e) => e !== current && e.refs === 0 && !e.pinned).sort((a, b) => a.lastUsed - b.lastUsed);
    for (let excess = loaded.length - maxLoaded; excess > 0 && evictable.length > 0; excess--) {
      this.evict(evictable.shift() as Entry, 'lru');
    }
  }

  private evictIdle(): void {
    const cutoff = Date.now() - this.options.idleTtlMs;
    for (const entry of this.entries.values()) {
      if (entry.model && entry.refs === 0 && !entry.pinned && entry.lastUsed < cutoff) this.evict(entry, 'idle');
    }
  }

  private evict(entry: Entry, reason: string): void {
    this.entries.delete(entry.id);
    this.changes++;
    this.options.logger.info({ model: entry.id, reason }, 'unloading model');
    void this.dispose(entry);
  }

  private async dispose(entry: Entry): Promise<void> {
    try {
      await entry.model?.dispose();
    } catch (error) {
      this.options.logger.warn({ model: entry.id, err: error }, 'model dispose failed');
    }
  }

  private describeEntry(entry: Entry): ModelInfo {
    const { model } = entry;
    if (!model) {
      // a built-in model's task is known before it loads: clients that sort models by task keep it where it was
      const builtin = this.builtin(entry.id);
      return { ...this.unloadedInfo(entry.id), ...(builtin ? { task: builtin.task, engine: builtin.engine } : {}), ...this.progressOf(entry) };
    }
    const info: ModelInfo = {
      id: entry.id,
      object: 'model',
      created: entry.created,
      owned_by: 'voxd',
      loaded: true,
      state: 'loaded',
      task: model.task,
      engine: model.engine,
    };
    if (model.task === 'separation') info.targets = (model as SeparatorModel).targets.map((t) => t.name);
    if (model.task === 'stt') {
      const { capabilities } = model as SttModel;
      info.word_timestamps = capabilities.wordTimestamps;
      info.translates = capabilities.translate;
    }
    if (entry.bytes !== null) info.size_bytes = entry.bytes;
    return info;
  }

  private unloadedInfo(id: string): ModelInfo {
    return { id, object: 'model', created: 0, owned_by: 'voxd', loaded: false };
  }

  /** A model on its way: downloading (with its bytes, total and time left) or loading. */
  private progressOf(entry: Entry): Pick<ModelInfo, 'state' | 'bytes' | 'total' | 'eta'> {
    return entry.phase === 'downloading' ? { state: 'downloading', ...entry.tracker.state() } : { state: 'loading' };
  }

  /** A catalog model as GET /v1/models lists it: under its name, standing for its model ID. */
  private catalogInfo(entry: CatalogEntry): ModelInfo {
    const { catalog } = this.options;
    return {
      ...this.unloadedInfo(entry.name),
      target: entry.id,
      task: entry.task,
      engine: entry.engine,
      size_bytes: catalog.downloadBytes(entry),
      cached: catalog.isCached(entry),
      memory_bytes: catalog.memoryBytes(entry),
      languages: entry.languages,
      license: entry.license,
      description: entry.note,
    };
  }

  private availableInfos(): ModelInfo[] {
    const { stt, tts } = this.options.defaults;
    const aliases = [...STT_ALIASES.map((a) => [a, stt] as const), ...TTS_ALIASES.map((a) => [a, tts] as const)].flatMap(([alias, target]) =>
      target === null ? [] : [{ ...this.unloadedInfo(alias), target: this.catalogTarget(target) ?? target }],
    );
    const builtins = Object.entries(this.options.builtins ?? {}).map(([id, b]) => ({ ...this.unloadedInfo(id), task: b.task, engine: b.engine }));
    const vad = { ...this.unloadedInfo(this.options.defaults.vad), task: 'vad' as const };
    const catalog = this.options.catalog.entries.map((entry) => this.catalogInfo(entry));
    const cached = this.options.files.cachedModelIds().map((id) => this.unloadedInfo(id));
    return [...builtins, ...aliases, ...catalog, vad, ...cached.filter((m) => m.id !== vad.id)];
  }
}

/** The entry's model once loaded; rejects at once with the signal's reason when it aborts first. */
function waitForLoad(entry: Entry, signal: AbortSignal | undefined): Promise<LoadedModel> {
  return entry.loading.wait(signal, () => signal?.reason);
}

/** Bytes on disk of a model file, or of every file below a model directory. */
async function diskBytes(file: string): Promise<number> {
  const stat = await fsp.stat(file);
  if (!stat.isDirectory()) return stat.size;
  const entries = await fsp.readdir(file, { withFileTypes: true });
  const sizes = await Promise.all(entries.map((entry) => diskBytes(path.join(file, entry.name))));
  return sizes.reduce((sum, size) => sum + size, 0);
}
