/**
 * The model registry: turns model IDs into loaded models. It resolves vendor aliases, finds local files or
 * downloads from the hub, picks the engine from the file content, loads lazily with one load per model under
 * concurrency, hands out leases so a model in use is never freed, and bounds resident models (LRU, idle TTL).
 */
import fsp from 'node:fs/promises';
import path from 'node:path';
import { ApiError } from '../errors.js';
import type { Engine, LoadedModel, ModelTask, ResolvedModel, SeparatorModel, SttModel } from '../engines/types.js';
import type { Logger } from '../logger.js';
import { HubError, type HubClient, type HubFile } from './hub.js';
import type { Metrics } from './metrics.js';
import { normaliseModelId, parseModelId, type ModelRef } from './model-id.js';
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
  /** For a loaded model with files: their size on disk, in bytes (built-in models have none). */
  size_bytes?: number;
}

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

/** Builds a model file locally when its hub download cannot be reached (e.g. the default VAD from ONNX). */
export type OfflineFallback = () => Promise<string>;

export interface RegistryOptions {
  engines: Engine[];
  hub: HubClient;
  logger: Logger;
  metrics: Metrics;
  modelsDirs: string[];
  /** Models behind the vendor aliases, and the VAD model turn detection uses. */
  defaults: { stt: string | null; tts: string | null; vad: string };
  maxLoaded: number;
  idleTtlMs: number;
  fallbacks?: Record<string, OfflineFallback>;
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
}

const MODEL_FILE = /\.(bin|gguf)$/i;
const GGUF_FILE = /\.gguf$/i;
const GGML_FILE = /\.bin$/i;
const PROJECTOR_FILE = /(^|\/)mmproj[^/]*\.gguf$/i;
const TORCH_FILE = /\.pth$/i;
/** What a PyTorch checkpoint needs beside it in its repository (Kokoro's layout): its config and its voice packs. */
const TORCH_COMPANION = /^(config\.json|voices\/[^/]+\.(pt|bin))$/i;

/**
 * Whether a file's path carries a tag (a quantisation such as `q8_0`) as a whole word, in any case: `f16` is in
 * `model-f16.bin` but not in `model-bf16.bin`, `Q4_K` is in `model-Q4_K_M.gguf`.
 */
function carriesTag(filePath: string, tag: string): boolean {
  const escaped = tag.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return new RegExp(`(^|[^a-z0-9])${escaped}($|[^a-z0-9])`, 'i').test(filePath);
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

  /** Replaces a vendor alias by the configured default model; other IDs pass through normalised. */
  resolveAlias(rawId: string): string {
    const id = normaliseModelId(rawId);
    const kind = (STT_ALIASES as readonly string[]).includes(id) ? 'stt' : (TTS_ALIASES as readonly string[]).includes(id) ? 'tts' : null;
    if (!kind) return id;
    const target = this.options.defaults[kind];
    if (!target) {
      const flag = kind === 'stt' ? '--stt-model' : '--tts-model';
      throw new ApiError('model_not_found', `no default ${kind === 'stt' ? 'speech-to-text' : 'text-to-speech'} model is configured for ${id} (set ${flag})`, {
        param: 'model',
      });
    }
    return target;
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

  /** DELETE /v1/models: removes the model from the registry; frees it now, or when its last request ends. */
  async unload(rawId: string): Promise<void> {
    const id = this.canonicalId(this.resolveAlias(rawId));
    const entry = this.entries.get(id);
    if (!entry?.model) throw new ApiError('model_not_found', `model ${rawId} is not loaded`, { param: 'model_name' });
    this.entries.delete(id);
    this.changes++;
    entry.retired = true;
    if (entry.refs === 0) await this.dispose(entry);
  }

  /** GET /v1/models/{id}: a loaded model, an alias, or a model in the local cache; never downloads. */
  describe(rawId: string): ModelInfo {
    const id = normaliseModelId(rawId);
    const target = (STT_ALIASES as readonly string[]).includes(id) || (TTS_ALIASES as readonly string[]).includes(id) ? this.resolveAlias(id) : null;
    const key = this.canonicalIdOrNull(target ?? id);
    const entry = key === null ? undefined : this.entries.get(key);
    if (entry?.model) return { ...this.describeEntry(entry), ...(target ? { id, target: entry.id } : {}) };
    if (target) return { ...this.unloadedInfo(id), target };
    const cached = this.availableInfos().find((info) => info.id === id);
    if (cached) return cached;
    throw new ApiError('model_not_found', `model ${id} is not loaded and not in the local cache`, { param: 'model' });
  }

  /** GET /v1/models: loaded models; with `available`, also aliases and models in the local cache. */
  list(available: boolean): ModelInfo[] {
    const loaded = [...this.entries.values()].filter((e) => e.model).map((e) => this.describeEntry(e));
    if (!available) return loaded;
    const seen = new Set(loaded.map((m) => m.id));
    return [...loaded, ...this.availableInfos().filter((m) => !seen.has(m.id))];
  }

  /** Changes whenever `list(false)` may have: a model loaded, unloaded or evicted. Lets a caller keep what it made of the list. */
  get listVersion(): number {
    return this.changes;
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
      // runs on once `created` is set: loadModel settles asynchronously
      loading: new SharedWork((signal, uncancellable) =>
        this.loadModel(id, signal, uncancellable).then(
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
    };
    this.entries.set(id, created);
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
    this.options.metrics.modelLoads.inc({ outcome: signal.aborted ? 'cancelled' : 'error' });
    throw error;
  }

  private builtin(id: string): BuiltinModel | undefined {
    return Object.hasOwn(this.options.builtins ?? {}, id) ? this.options.builtins?.[id] : undefined;
  }

  /**
   * Finds (downloads) the files and loads them. An engine's load cannot be stopped: once it began, the load is
   * `uncancellable`, and requests that come after every earlier one left join it instead of loading the model again.
   */
  private async loadModel(id: string, signal: AbortSignal, uncancellable: () => void): Promise<{ model: LoadedModel; bytes: number | null }> {
    const builtin = this.builtin(id);
    if (builtin) {
      uncancellable();
      return { model: await builtin.load(id), bytes: null };
    }
    const started = performance.now();
    const resolved = await this.locate(id, signal);
    // every request left while the files were fetched: load nothing for no one
    signal.throwIfAborted();
    uncancellable();
    let model: LoadedModel;
    try {
      model = await this.loadFiles(resolved);
    } catch (error) {
      throw await this.discardCorruptDownloads(resolved, error);
    }
    this.options.logger.info({ model: id, engine: model.engine, ms: Math.round(performance.now() - started) }, 'model loaded');
    const [weights, projector] = await Promise.all([diskBytes(resolved.path), resolved.projector ? diskBytes(resolved.projector) : 0]);
    return { model, bytes: weights + projector };
  }

  private async loadFiles(resolved: ResolvedModel): Promise<LoadedModel> {
    const engine = await this.engineFor(resolved.path, resolved.id);
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

  /**
   * After files failed to load: those from the hub cache that no longer match their hash are deleted, and the error
   * says the next request downloads them again (else the same bad file would fail every load).
   */
  private async discardCorruptDownloads(resolved: ResolvedModel, loadError: unknown): Promise<unknown> {
    const files = resolved.projector ? [resolved.path, resolved.projector] : [resolved.path];
    const mismatches = (await Promise.all(files.map((file) => this.options.hub.discardIfCorrupt(file)))).filter((m) => m !== null);
    if (mismatches.length === 0) return loadError;
    return new ApiError(
      'model_download_failed',
      `model ${resolved.id} could not be loaded: its download in the hub cache is corrupt (${mismatches.join('; ')}); ` +
        'it was deleted, and the next request downloads it again',
      { param: 'model', cause: loadError },
    );
  }

  /** Local files as they are; hub IDs downloaded into the hub cache (or built by a fallback when the hub is out of reach). */
  private async locate(id: string, signal: AbortSignal): Promise<ResolvedModel> {
    const ref = parseModelId(id, this.options.modelsDirs) as ModelRef;
    if (ref.kind === 'local') return { id, path: ref.path, projector: null };
    const { hub } = this.options;
    try {
      if (ref.kind === 'hub-file') return { id, path: await hub.downloadFile(ref.repo, ref.file, { signal }), projector: null };
      const { model, projector, companions } = this.pickRepoFiles(ref.repo, await hub.listFiles(ref.repo, { signal }), ref.quant);
      const resolved = {
        id,
        path: await hub.downloadFile(ref.repo, model, { signal }),
        projector: projector ? await hub.downloadFile(ref.repo, projector, { signal }) : null,
      };
      // into the same snapshot directory, so the engine finds them beside the model file
      for (const file of companions) await hub.downloadFile(ref.repo, file, { signal });
      return resolved;
    } catch (error) {
      const fallback = this.options.fallbacks?.[id];
      if (fallback && error instanceof HubError && (error.kind === 'network' || error.kind === 'offline')) {
        this.options.logger.warn({ model: id, reason: error.message }, 'hub out of reach; building the model locally');
        return { id, path: await fallback(), projector: null };
      }
      throw hubErrorToApi(id, error);
    }
  }

  /**
   * For `owner/repo[:QUANT]` (docs/models.md, "Model IDs"): the model file carrying the tag (default Q8_0, else any
   * model file), plus a GGUF's mmproj. A GGUF repository holds one model in several quantisations, so the smallest
   * candidate is as good as any; a repository of ggml `.bin` files (whisper.cpp's) holds several models, where the
   * smallest would be another model than the one meant, so there the candidates must come down to one. A repository
   * of a PyTorch checkpoint (`.pth`: Kokoro's) holds one, and the checkpoint comes with its config.json and voices/.
   */
  private pickRepoFiles(repo: string, files: HubFile[], quant: string | null): { model: string; projector: string | null; companions: string[] } {
    const sizeOf = (f: HubFile): number => f.lfs?.size ?? f.size;
    const ggufs = files.filter((f) => GGUF_FILE.test(f.path) && !PROJECTOR_FILE.test(f.path));
    const gguf = ggufs.length > 0;
    const models = gguf ? ggufs : files.filter((f) => GGML_FILE.test(f.path));
    const checkpoints = files.filter((f) => TORCH_FILE.test(f.path));
    if (models.length === 0 && checkpoints.length > 0) {
      if (checkpoints.length > 1) {
        throw new ApiError(
          'invalid_model',
          `repository ${repo} holds several checkpoints; name one: ${checkpoints.map((f) => `${repo}/${f.path}`).join(', ')}`,
          {
            param: 'model',
          },
        );
      }
      return { model: (checkpoints[0] as HubFile).path, projector: null, companions: files.filter((f) => TORCH_COMPANION.test(f.path)).map((f) => f.path) };
    }
    if (models.length === 0) throw new ApiError('invalid_model', `repository ${repo} holds no model file voxd can load`, { param: 'model' });
    const wanted = quant ?? 'Q8_0';
    const tagged = models.filter((f) => carriesTag(f.path, wanted));
    if (quant && tagged.length === 0) {
      throw new ApiError('model_not_found', `repository ${repo} has no ${quant} file (it has ${models.map((f) => f.path).join(', ')})`, {
        param: 'model',
      });
    }
    const pool = tagged.length > 0 ? tagged : models;
    if (!gguf && pool.length > 1) {
      const names = pool.map((f) => `${repo}/${f.path}`).join(', ');
      throw new ApiError('invalid_model', `repository ${repo} holds several ${tagged.length > 0 ? `${wanted} ` : ''}model files; name one: ${names}`, {
        param: 'model',
      });
    }
    const model = pool.reduce((a, b) => (sizeOf(b) < sizeOf(a) ? b : a));
    // an mmproj goes with a GGUF backbone only
    const projectors = gguf ? files.filter((f) => PROJECTOR_FILE.test(f.path)) : [];
    const projector = projectors.find((f) => carriesTag(f.path, wanted)) ?? projectors.sort((a, b) => sizeOf(a) - sizeOf(b))[0];
    return { model: model.path, projector: projector?.path ?? null, companions: [] };
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
    const info: ModelInfo = { id: entry.id, object: 'model', created: entry.created, owned_by: 'voxd', loaded: true, task: model?.task, engine: model?.engine };
    if (model?.task === 'separation') info.targets = (model as SeparatorModel).targets.map((t) => t.name);
    if (model?.task === 'stt') {
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

  private availableInfos(): ModelInfo[] {
    const { stt, tts } = this.options.defaults;
    const aliases = [...STT_ALIASES.map((a) => [a, stt] as const), ...TTS_ALIASES.map((a) => [a, tts] as const)].flatMap(([alias, target]) =>
      target === null ? [] : [{ ...this.unloadedInfo(alias), target }],
    );
    const builtins = Object.entries(this.options.builtins ?? {}).map(([id, b]) => ({ ...this.unloadedInfo(id), task: b.task, engine: b.engine }));
    const vad = { ...this.unloadedInfo(this.options.defaults.vad), task: 'vad' as const };
    const cached = this.options.hub
      .cachedRepos()
      .flatMap((repo) => repo.files.filter((f) => MODEL_FILE.test(f)).map((f) => this.unloadedInfo(`${repo.repo}/${f}`)));
    return [...builtins, ...aliases, vad, ...cached.filter((m) => m.id !== vad.id)];
  }
}

/** The entry's model once loaded; rejects at once with the signal's reason when it aborts first. */
function waitForLoad(entry: Entry, signal: AbortSignal | undefined): Promise<LoadedModel> {
  return entry.loading.wait(signal, () => signal?.reason);
}

function hubErrorToApi(id: string, error: unknown): unknown {
  if (!(error instanceof HubError)) return error;
  switch (error.kind) {
    case 'not_found':
      return new ApiError('model_not_found', `model ${id} not found on the hub: ${error.message}`, { param: 'model', cause: error });
    case 'unauthorized':
      return new ApiError('model_not_found', `model ${id} needs hub credentials (set HF_TOKEN): ${error.message}`, { param: 'model', cause: error });
    case 'offline':
      return new ApiError('model_not_found', error.message, { param: 'model', cause: error });
    default:
      return new ApiError('model_download_failed', `downloading model ${id} failed: ${error.message}`, { param: 'model', cause: error });
  }
}

/** Bytes on disk of a model file, or of every file below a model directory. */
async function diskBytes(file: string): Promise<number> {
  const stat = await fsp.stat(file);
  if (!stat.isDirectory()) return stat.size;
  const entries = await fsp.readdir(file, { withFileTypes: true });
  const sizes = await Promise.all(entries.map((entry) => diskBytes(path.join(file, entry.name))));
  return sizes.reduce((sum, size) => sum + size, 0);
}
