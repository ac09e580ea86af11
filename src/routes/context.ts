import type { Config } from '../config.js';
import type { Logger } from '../logger.js';
import type { Metrics } from '../services/metrics.js';
import type { ModelRegistry } from '../services/registry.js';
import type { Scheduler } from '../services/scheduler.js';

/** What route modules get from the composition root: services only, never the addon or uWS. */
export interface RouteContext {
  config: Config;
  logger: Logger;
  metrics: Metrics;
  registry: ModelRegistry;
  scheduler: Scheduler;
  /** Ready once `--preload` models are loaded. */
  readiness: { ready: boolean; error: string | null };
}
