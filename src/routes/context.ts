import type { Config } from '../config.js';
import type { Logger } from '../logger.js';
import type { UploadBudget } from '../services/audio/upload-budget.js';
import type { Metrics } from '../services/metrics.js';
import type { ModelRegistry } from '../services/registry.js';
import type { SeparationService } from '../services/separation.js';
import type { Transcriber } from '../services/stt/transcriber.js';
import type { CustomVoices } from '../services/tts/custom-voices.js';
import type { SpeechService } from '../services/tts/speech.js';

/** What route modules get from the composition root: services only, never the addon or a transport. */
export interface RouteContext {
  config: Config;
  logger: Logger;
  metrics: Metrics;
  registry: ModelRegistry;
  stt: Transcriber;
  tts: SpeechService;
  customVoices: CustomVoices;
  separation: SeparationService;
  /** --max-inflight-upload-mb: the audio uploads in flight. */
  uploads: UploadBudget;
  /** Ready once `--preload` models are loaded; unready again from the moment the server drains. */
  readiness: { ready: boolean; draining: boolean; error: string | null };
}
