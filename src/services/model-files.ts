/**
 * A model ID's files (docs/models.md, "Model IDs"): a local path as it is, a hub file or repository downloaded into
 * the hub cache (the repository's files chosen by quantisation tag, with a GGUF's mmproj and a checkpoint's
 * companions), refused before it starts when it would not fit on the cache's disk. Shared by the registry, which loads
 * what it finds, and `voxd pull`, which only fetches.
 */
import { ApiError } from '../errors.js';
import type { ResolvedModel } from '../engines/types.js';
import { HubError, type HubClient, type HubFile, type HubLogger } from './hub.js';
import type { DownloadTracker } from './hub/tracker.js';
import { parseModelId } from './model-id.js';

/** Builds a model file locally when its hub download cannot be reached (e.g. the default VAD from ONNX). */
export type OfflineFallback = () => Promise<string>;

export interface ModelFilesOptions {
  hub: HubClient;
  logger: HubLogger;
  modelsDirs: string[];
  fallbacks?: Record<string, OfflineFallback>;
}

/** A model's files in a hub repository: the model, its mmproj, and what else it needs beside it. */
export interface RepoFiles {
  model: string;
  projector: string | null;
  companions: string[];
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

export class ModelFiles {
  constructor(private readonly options: ModelFilesOptions) {}

  /**
   * Local files as they are; hub IDs downloaded into the hub cache (or built by a fallback when the hub is out of
   * reach). `tracker` follows the download; `signal` cancels it (the partial files stay, to be resumed).
   */
  async fetch(id: string, options: { signal?: AbortSignal; tracker?: DownloadTracker } = {}): Promise<ResolvedModel> {
    const ref = parseModelId(id, this.options.modelsDirs);
    if (ref === null) throw new ApiError('model_not_found', `model ${id} is neither a local path nor a hub ID`, { param: 'model' });
    if (ref.kind === 'local') return { id, path: ref.path, projector: null };
    const { hub } = this.options;
    const { signal, tracker } = options;
    const get = (repo: string, file: string): Promise<string> =>
      hub.downloadFile(repo, file, { ...(signal ? { signal } : {}), ...(tracker ? { tracker } : {}) });
    try {
      if (ref.kind === 'hub-file') return { id, path: await get(ref.repo, ref.file), projector: null };
      const listing = await hub.listFiles(ref.repo, signal ? { signal } : {});
      const { model, projector, companions } = pickRepoFiles(ref.repo, listing, ref.quant);
      const wanted = [model, ...(projector ? [projector] : []), ...companions];
      const files = wanted.map((file) => listing.find((f) => f.path === file) as HubFile);
      tracker?.expect(files.reduce((sum, file) => sum + sizeOf(file), 0));
      // the whole model must fit before any of it is fetched
      await hub.ensureFreeSpace(
        files.reduce((sum, file) => sum + hub.bytesToFetch(ref.repo, file), 0),
        `model ${id}`,
      );
      const resolved = { id, path: await get(ref.repo, model), projector: projector ? await get(ref.repo, projector) : null };
      // into the same snapshot directory, so the engine finds them beside the model file
      for (const file of companions) await get(ref.repo, file);
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
   * After files failed to load: those from the hub cache that no longer match their hash are deleted, and the error
   * says the next request downloads them again (else the same bad file would fail every load).
   */
  async discardCorrupt(resolved: ResolvedModel, loadError: unknown): Promise<unknown> {
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

  /**
   * Deletes a hub model's files from the cache (`voxd rm`): the file a hub-file ID names, or what a repository ID
   * picks from its cached listing; bytes freed, or null when none of it is cached.
   */
  async remove(id: string): Promise<number | null> {
    const ref = parseModelId(id, []);
    if (ref === null || ref.kind === 'local') return null;
    const { hub } = this.options;
    let files: string[];
    if (ref.kind === 'hub-file') {
      files = [ref.file];
    } else {
      const listing = hub.cachedListing(ref.repo);
      if (listing === null) return null;
      const { model, projector, companions } = pickRepoFiles(ref.repo, listing, ref.quant);
      // an mmproj or a config serves every model file of the repository: it stays while another one is cached
      const othersCached = listing.some((f) => f.path !== model && MODEL_FILE.test(f.path) && !PROJECTOR_FILE.test(f.path));
      files = [model, ...(othersCached ? [] : [...(projector ? [projector] : []), ...companions])];
    }
    const freed = await Promise.all(files.map((file) => hub.removeCachedFile(ref.repo, file)));
    return freed.every((bytes) => bytes === null) ? null : freed.reduce<number>((sum, bytes) => sum + (bytes ?? 0), 0);
  }

  /** Model files in the hub cache, as `owner/repo/file` IDs. */
  cachedModelIds(): string[] {
    return this.options.hub.cachedRepos().flatMap((repo) => repo.files.filter((f) => MODEL_FILE.test(f)).map((f) => `${repo.repo}/${f}`));
  }
}

function sizeOf(file: HubFile): number {
  return file.lfs?.size ?? file.size;
}

/**
 * For `owner/repo[:QUANT]` (docs/models.md, "Model IDs"): the model file carrying the tag (default Q8_0, else any
 * model file), plus a GGUF's mmproj. A GGUF repository holds one model in several quantisations, so the smallest
 * candidate is as good as any; a repository of ggml `.bin` files (whisper.cpp's) holds several models, where the
 * smallest would be another model than the one meant, so there the candidates must come down to one. A repository
 * of a PyTorch checkpoint (`.pth`: Kokoro's) holds one, and the checkpoint comes with its config.json and voices/.
 */
export function pickRepoFiles(repo: string, files: HubFile[], quant: string | null): RepoFiles {
  const ggufs = files.filter((f) => GGUF_FILE.test(f.path) && !PROJECTOR_FILE.test(f.path));
  const gguf = ggufs.length > 0;
  const models = gguf ? ggufs : files.filter((f) => GGML_FILE.test(f.path));
  const checkpoints = files.filter((f) => TORCH_FILE.test(f.path));
  if (models.length === 0 && checkpoints.length > 0) {
    if (checkpoints.length > 1) {
      throw new ApiError('invalid_model', `repository ${repo} holds several checkpoints; name one: ${checkpoints.map((f) => `${repo}/${f.path}`).join(', ')}`, {
        param: 'model',
      });
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

function hubErrorToApi(id: string, error: unknown): unknown {
  if (!(error instanceof HubError)) return error;
  switch (error.kind) {
    case 'not_found':
      return new ApiError('model_not_found', `model ${id} not found on the hub: ${error.message}`, { param: 'model', cause: error });
    case 'unauthorized':
      return new ApiError('model_not_found', `model ${id} needs hub credentials (set HF_TOKEN): ${error.message}`, { param: 'model', cause: error });
    case 'offline':
      return new ApiError('model_not_found', error.message, { param: 'model', cause: error });
    case 'disk_full':
      return new ApiError('insufficient_storage', error.message, { param: 'model', cause: error });
    case 'aborted':
      return new ApiError('download_cancelled', `the download of model ${id} was cancelled: ${error.message}`, { param: 'model', cause: error });
    default:
      return new ApiError('model_download_failed', `downloading model ${id} failed: ${error.message}`, { param: 'model', cause: error });
  }
}
