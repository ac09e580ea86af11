/**
 * `voxd pull`, `voxd models` and `voxd rm` (docs/models.md, "Catalog"): models fetched into, listed from and removed
 * from the hub cache the server uses, under the same lock files, so a pull and a server may fetch one model at once
 * and it downloads once. A pull draws a bar on a terminal and writes plain lines elsewhere; an interrupted pull
 * resumes where it stopped.
 */
import fs from 'node:fs';
import type { Config } from './config.js';
import { ApiError } from './errors.js';
import { Catalog, type CatalogEntry } from './services/catalog.js';
import { CATALOG_MODELS } from './services/catalog-models.js';
import { defaultHubCacheDir, hubClientFromEnv, type HubClient, type HubLogger } from './services/hub.js';
import { formatBytes } from './services/hub/progress.js';
import { ModelFiles } from './services/model-files.js';
import { normaliseModelId, parseModelId } from './services/model-id.js';

interface Tools {
  hub: HubClient;
  catalog: Catalog;
  files: ModelFiles;
}

/** Messages as plain lines on stderr: where no bar is drawn (not a terminal), the download's progress lines. */
const lines: HubLogger = {
  info: (_obj, msg) => void (msg && process.stderr.write(`${msg}\n`)),
  warn: (_obj, msg) => void (msg && process.stderr.write(`warning: ${msg}\n`)),
};

function tools(config: Config, env: NodeJS.ProcessEnv): Tools {
  // on a terminal the bar says it; elsewhere the lines do
  const hub = hubClientFromEnv(env, config, process.stderr.isTTY ? { info: () => undefined, warn: lines.warn } : lines);
  return { hub, catalog: new Catalog(CATALOG_MODELS, hub), files: new ModelFiles({ hub, logger: lines, modelsDirs: config.modelsDirs }) };
}

/** The hub model a name or ID means: a catalog name's model ID, or a hub ID as given; a clear error for anything else. */
function hubModel(nameOrId: string, { catalog }: Tools, config: Config): { id: string; entry: CatalogEntry | null } {
  const entry = catalog.find(nameOrId.trim());
  const id = entry?.id ?? normaliseModelId(nameOrId);
  const ref = parseModelId(id, config.modelsDirs);
  if (ref?.kind === 'local') throw new ApiError('invalid_request', `${nameOrId} is a local path (${ref.path}): there is nothing to fetch`);
  if (ref === null) {
    throw new ApiError(
      'model_not_found',
      `${nameOrId} is neither a catalog name (${catalog.entries.map((e) => e.name).join(', ')}) nor a hub ID (owner/repo, owner/repo/file or owner/repo:QUANT)`,
    );
  }
  return { id, entry };
}

/** `voxd pull <name|id>`: downloads the model's files; prints where they are and their size. */
export async function pullModel(nameOrId: string, config: Config, env: NodeJS.ProcessEnv = process.env): Promise<void> {
  const kit = tools(config, env);
  const { id, entry } = hubModel(nameOrId, kit, config);
  const controller = new AbortController();
  // Ctrl-C stops the transfer; the partial file stays, and the next pull resumes it
  process.once('SIGINT', () => controller.abort());
  const resolved = await kit.files.fetch(id, { signal: controller.signal }).catch((error: unknown) => {
    if (!controller.signal.aborted) throw error;
    process.stderr.write(`\nvoxd: interrupted; \`voxd pull ${nameOrId}\` again resumes the download\n`);
    process.exit(130);
  });
  const paths = [resolved.path, ...(resolved.projector ? [resolved.projector] : [])];
  const bytes = paths.reduce((sum, file) => sum + fs.statSync(file).size, 0);
  process.stdout.write(`${entry ? `${entry.name} (${id})` : id}: ${paths.join(', ')} (${formatBytes(bytes)})\n`);
}

/** `voxd models`: the catalog (what is in the cache marked), other models in the cache, and what a running server has loaded. */
export async function listModels(config: Config, apiUrl: string, env: NodeJS.ProcessEnv = process.env): Promise<void> {
  const { hub, catalog, files } = tools(config, env);
  const out: string[] = [`catalog (voxd pull <name>; the hub cache is ${defaultHubCacheDir(env)}):`];
  for (const entry of catalog.entries) {
    const state = catalog.isCached(entry) ? 'cached    ' : '          ';
    out.push(`  ${state} ${entry.name.padEnd(24)} ${entry.task.padEnd(4)} ${formatBytes(catalog.downloadBytes(entry)).padStart(9)}  ${entry.note}`);
  }
  const named = new Set(catalog.entries.flatMap((entry) => entry.files.map((file) => `${entry.repo}/${file.path}`)));
  const others = files.cachedModelIds().filter((id) => !named.has(id));
  out.push('other models in the cache:', ...(others.length ? others.map((id) => `  ${id} (${formatBytes(cachedBytes(hub, id))})`) : ['  none']));
  out.push(`loaded in the server at ${apiUrl}:`, ...(await loadedModels(apiUrl)));
  process.stdout.write(`${out.join('\n')}\n`);
}

/** `voxd rm <name|id>`: deletes the model's files from the hub cache (blobs other files still use stay). */
export async function removeModel(nameOrId: string, config: Config, env: NodeJS.ProcessEnv = process.env): Promise<void> {
  const kit = tools(config, env);
  const { id } = hubModel(nameOrId, kit, config);
  const freed = await kit.files.remove(id);
  process.stdout.write(freed === null ? `${id} is not in the hub cache\n` : `removed ${id} (${formatBytes(freed)} freed)\n`);
}

/** The size of a cached `owner/repo/file`. */
function cachedBytes(hub: HubClient, id: string): number {
  const [owner, name, ...file] = id.split('/');
  const cached = hub.cachedFile(`${owner}/${name}`, file.join('/'));
  return cached ? fs.statSync(cached).size : 0;
}

async function loadedModels(apiUrl: string): Promise<string[]> {
  try {
    const response = await fetch(`${apiUrl}/v1/models`, { signal: AbortSignal.timeout(3000) });
    const { data } = (await response.json()) as { data: { id: string; task?: string; state?: string; size_bytes?: number }[] };
    if (data.length === 0) return ['  none'];
    return data.map((m) => `  ${m.id}${m.task ? ` (${m.task})` : ''}${m.state && m.state !== 'loaded' ? ` ${m.state}` : ''}`);
  } catch {
    return [`  (no voxd server answers at ${apiUrl}; --api-url names another)`];
  }
}
