/** A model registry for the tests that build their own (no server): its hub client, files and catalog from the test's. */
import type { Logger } from '../../src/logger.js';
import { Catalog } from '../../src/services/catalog.js';
import { CATALOG_MODELS } from '../../src/services/catalog-models.js';
import type { HubClient } from '../../src/services/hub.js';
import { ModelFiles, type OfflineFallback } from '../../src/services/model-files.js';
import { ModelRegistry, type RegistryOptions } from '../../src/services/registry.js';

export function newRegistry(
  options: Omit<RegistryOptions, 'files' | 'catalog'> & { hub: HubClient; fallbacks?: Record<string, OfflineFallback> },
): ModelRegistry {
  const { hub, fallbacks, ...rest } = options;
  const files = new ModelFiles({ hub, logger: rest.logger as Logger, modelsDirs: rest.modelsDirs, ...(fallbacks ? { fallbacks } : {}) });
  return new ModelRegistry({ ...rest, files, catalog: new Catalog(CATALOG_MODELS, hub) });
}
