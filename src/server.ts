/**
 * Composition root: builds the services, mounts the routes, listens, and shuts down gracefully
 * (stop accepting, finish in-flight work, free models, flush logs).
 */
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { DEFAULT_VAD_MODEL, type Config } from './config.js';
import { shippedVadModel, sileroVadEngine } from './engines/silero-vad.js';
import { FLITE_ENGINE, FLITE_MODEL_ID, loadFliteModel } from './engines/flite.js';
import { createGgmlTtsEngine } from './engines/ggml-tts.js';
import { kokoroEngine } from './engines/kokoro.js';
import { DIARIZER_ENGINE, DIARIZER_MODEL_ID, loadDiarizerModel } from './engines/diarizer.js';
import { loadSeparatorModel, SEPARATOR_ENGINE, SEPARATOR_MODEL_ID } from './engines/separator.js';
import { loadSphinxModel, SPHINX_ENGINE, SPHINX_MODEL_ID } from './engines/sphinx.js';
import { createParakeetEngine } from './engines/parakeet.js';
import { createAudioLmEngine } from './engines/audio-lm.js';
import { createWhisperEngine } from './engines/whisper.js';
import { createHttpServer } from './http/server.js';
import type { TransportName } from './http/transport.js';
import { createTransport } from './http/transports.js';
import { requestLineWriter, type Logger } from './logger.js';
import { NativeLogLevel } from './native/addon.js';
import { loadNative, nativeOrigin } from './native/load.js';
import type { RouteContext } from './routes/context.js';
import { mountModelRoutes } from './routes/models.js';
import { mountOperationRoutes } from './routes/operations.js';
import { mountRealtimeRoutes } from './routes/realtime.js';
import { mountSeparationRoutes } from './routes/separations.js';
import { mountSpeechRoutes } from './routes/speech.js';
import { mountVoiceRoutes } from './routes/voices.js';
import { mountTranscriptionRoutes } from './routes/transcriptions.js';
import { UploadBudget } from './services/audio/upload-budget.js';
import { Catalog } from './services/catalog.js';
import { CATALOG_MODELS } from './services/catalog-models.js';
import { defaultHubCacheDir, hubClientFromEnv } from './services/hub.js';
import { ModelFiles } from './services/model-files.js';
import { CustomVoices } from './services/tts/custom-voices.js';
import { Gauge, Metrics } from './services/metrics.js';
import { ModelRegistry } from './services/registry.js';
import { Scheduler } from './services/scheduler.js';
import { SeparationService } from './services/separation.js';
import { Transcriber } from './services/stt/transcriber.js';
import { SpeechService } from './services/tts/speech.js';
import { Synthesizer } from './services/tts/synthesizer.js';
import { apiBaseFor, startUiServer, type RunningUi } from './ui/server.js';
import { DEFAULT_EVENT_LIMITS } from './wyoming/events.js';
import { VOXD_VERSION } from './version.js';
import { startWyomingServer, type RunningWyoming } from './wyoming/server.js';
import { defaultZeroconfName } from './wyoming/zeroconf.js';

export interface RunningServer {
  port: number;
  /** The web interface's port with --start-ui, else null. */
  uiPort: number | null;
  /** The Wyoming listener's port with --wyoming-port, else null. */
  wyomingPort: number | null;
  /** The HTTP transport serving the API (`--transport auto` picks one). */
  transport: TransportName;
  context: RouteContext;
  /**
   * Graceful stop (docs/configuration.md, "Shutdown"): /readyz unready at once, requests still served for
   * --drain-grace-s, then no new connections while requests and live turns in flight finish (up to
   * --drain-timeout-s), live sessions closed with 1001, models freed.
   */
  close(): Promise<void>;
}

export async function startServer(config: Config, logger: Logger, env: NodeJS.ProcessEnv = process.env): Promise<RunningServer> {
  const native = loadNative(); // fails fast, with the fix in the message, when the addon is missing or broken
  logger.info({ addon: nativeOrigin().file }, nativeOrigin().summary);
  native.setLogLevel(config.logLevel === 'debug' || config.logLevel === 'trace' ? NativeLogLevel.info : NativeLogLevel.warn);

  const metrics = new Metrics();
  const hub = hubClientFromEnv(env, config, logger);
  const files = new ModelFiles({ hub, logger, modelsDirs: config.modelsDirs, fallbacks: { [DEFAULT_VAD_MODEL]: shippedVadModel } });
  const registry = new ModelRegistry({
    engines: [
      sileroVadEngine,
      createWhisperEngine({ maxBatchSize: config.sttMaxBatchSize }),
      createParakeetEngine({ maxBatchSize: config.sttMaxBatchSize }),
      createAudioLmEngine({ maxBatchSize: config.sttMaxBatchSize }),
      createGgmlTtsEngine({ voicesDir: config.voicesDir, maxBatchSize: config.ttsMaxBatchSize }),
      kokoroEngine,
    ],
    files,
    catalog: new Catalog(CATALOG_MODELS, hub),
    logger,
    metrics,
    modelsDirs: config.modelsDirs,
    defaults: { stt: config.sttModel, tts: config.ttsModel, vad: config.vadModel },
    maxLoaded: config.maxLoadedModels,
    idleTtlMs: config.modelIdleTtl * 1000,
    builtins: {
      [SPHINX_MODEL_ID]: { task: 'stt', engine: SPHINX_ENGINE, load: (id) => loadSphinxModel(id) },
      [FLITE_MODEL_ID]: { task: 'tts', engine: FLITE_ENGINE, load: (id) => loadFliteModel(id) },
      [SEPARATOR_MODEL_ID]: { task: 'separation', engine: SEPARATOR_ENGINE, load: (id) => loadSeparatorModel(id) },
      [DIARIZER_MODEL_ID]: { task: 'diarization', engine: DIARIZER_ENGINE, load: (id) => loadDiarizerModel(id) },
    },
  });
  const scheduler = new Scheduler({ maxQueue: config.maxQueue, concurrency: config.modelConcurrency, metrics, jobTimeoutMs: config.jobTimeoutS * 1000 });
  const stt = new Transcriber({
    registry,
    scheduler,
    metrics,
    vadModel: config.vadModel,
    diarizationModel: config.diarizationModel,
    maxAudioSeconds: config.maxAudioSeconds,
    liveDelayMs: config.realtimeTranscriptionDelayMs,
  });
  const customVoices = new CustomVoices({
    root: config.customVoicesDir ?? path.join(path.dirname(defaultHubCacheDir(env)), 'voxd', 'voices'),
    maxVoices: config.maxVoices,
    requireConsent: config.requireVoiceConsent === 'on',
  });
  const tts = new SpeechService({
    registry,
    customVoices,
    synthesizer: new Synthesizer({ scheduler, metrics, maxBatchSize: config.ttsMaxBatchSize }),
    limits: {
      maxInputChars: config.maxInputChars,
      maxAudioSeconds: config.maxAudioSeconds,
      maxUploadBytes: config.maxUploadMb * 1024 * 1024,
      modelsDirs: config.modelsDirs,
    },
  });
  const separation = new SeparationService({ registry, scheduler, maxSeconds: config.maxSeparationSeconds });
  // after a burst of uploads glibc keeps what they freed; trimming gives it back (docs/performance.md)
  const uploads = new UploadBudget({ limitBytes: config.maxInflightUploadMb * 1024 * 1024, trim: () => native.trimMemory() });
  metrics.add(
    new Gauge('voxd_upload_inflight_bytes', 'Memory counted for the audio uploads in flight (--max-inflight-upload-mb)', () => [
      { value: uploads.inFlightBytes },
    ]),
  );
  const context: RouteContext = {
    config,
    logger,
    metrics,
    registry,
    stt,
    tts,
    customVoices,
    separation,
    uploads,
    readiness: { ready: false, draining: false, error: null },
  };

  const { transport, uwsUnavailable } = createTransport(config.transport, { maxConnections: config.maxConnections });
  if (uwsUnavailable) logger.info({ reason: uwsUnavailable }, 'uWebSockets.js does not load here: serving on node:http');
  // asked once, not per request (pino's check looks the level up by name)
  let logRequests = logger.isLevelEnabled('info');
  const followLevel = (): void => void (logRequests = logger.isLevelEnabled('info'));
  logger.on('level-change', followLevel);
  const logRequest = requestLineWriter(logger);
  const http = createHttpServer({
    transport,
    allowedOrigins: config.allowedOrigins,
    logger,
    onResponse: ({ id, method, route, status, ms, bytes, cut }) => {
      metrics.observeHttp(route, method, status, ms / 1000);
      // the line is built only when it is written: below `info`, a request costs no logging at all
      if (!cut && !logRequests) return;
      const line = { reqId: id, method, route, status, ms: Math.round(ms * 10) / 10, bytes };
      if (cut) logger.warn({ ...line, cut: true }, `${method} ${route} ${status} cut after ${bytes} bytes`);
      else logRequest(line, `${method} ${route} ${status}`);
    },
  });
  mountOperationRoutes(http, context);
  mountModelRoutes(http, context);
  mountTranscriptionRoutes(http, context);
  mountSpeechRoutes(http, context);
  mountVoiceRoutes(http, context);
  const liveSessions = mountRealtimeRoutes(http, context);
  mountSeparationRoutes(http, context);

  const port = await http.listen(config.host, config.port);
  logger.info({ host: config.host, port, transport: transport.name }, `voxd listening on http://${config.host}:${port} (transport ${transport.name})`);
  let ui: RunningUi | null = null;
  if (config.startUi) {
    try {
      ui = await startUiServer({
        host: config.uiHost,
        port: config.uiPort,
        transport: config.transport,
        logger,
        pageConfig: (hostHeader) => ({
          apiBase: apiBaseFor(config.host, port, hostHeader),
          maxInputChars: config.maxInputChars,
          maxUploadBytes: config.maxUploadMb * 1024 * 1024,
          requireVoiceConsent: config.requireVoiceConsent === 'on',
        }),
      });
    } catch (error) {
      // not half-started: the API's port is released before the failure is reported
      await http.close(0);
      await registry.close();
      const reason = error instanceof Error ? error.message : String(error);
      throw new Error(`the web interface cannot listen on ${config.uiHost}:${config.uiPort} (--ui-port, --ui-host): ${reason}`, { cause: error });
    }
    logger.info({ host: config.uiHost, port: ui.port }, `voxd web interface on http://${config.uiHost}:${ui.port}`);
  }
  let wyoming: RunningWyoming | null = null;
  if (config.wyomingPort !== null) {
    const host = config.wyomingHost ?? config.host;
    try {
      wyoming = await startWyomingServer({
        host,
        port: config.wyomingPort,
        maxConnections: config.maxWyomingConnections,
        zeroconfName: config.wyomingZeroconf === 'on' ? (config.wyomingZeroconfName ?? defaultZeroconfName()) : null,
        registry,
        transcriber: stt,
        speech: tts,
        uploads,
        logger,
        sttModel: config.wyomingSttModel ?? config.sttModel,
        ttsModel: config.wyomingTtsModel ?? config.ttsModel,
        version: VOXD_VERSION,
        limits: { ...DEFAULT_EVENT_LIMITS, maxAudioSeconds: config.maxAudioSeconds, idleMs: config.wyomingIdleTimeout * 1000 },
      });
    } catch (error) {
      // not half-started, as for the web interface
      await Promise.all([http.close(0), ui?.close()]);
      await registry.close();
      const reason = error instanceof Error ? error.message : String(error);
      throw new Error(`the Wyoming listener cannot listen on ${host}:${config.wyomingPort} (--wyoming-port, --wyoming-host): ${reason}`, { cause: error });
    }
    logger.info({ host, port: wyoming.port }, `voxd Wyoming (Home Assistant) on tcp://${host}:${wyoming.port}`);
  }

  registry.preload(config.preload).then(
    () => {
      context.readiness.ready = true;
    },
    (error: unknown) => {
      context.readiness.error = error instanceof Error ? error.message : String(error);
      logger.error({ err: error }, 'preloading failed; /readyz stays unready');
    },
  );

  return {
    port,
    uiPort: ui?.port ?? null,
    wyomingPort: wyoming?.port ?? null,
    transport: transport.name,
    context,
    async close() {
      context.readiness.draining = true;
      logger.info({ graceSeconds: config.drainGraceS }, 'draining: /readyz answers 503; new requests are served for --drain-grace-s');
      if (config.drainGraceS > 0) await sleep(config.drainGraceS * 1000);
      logger.info({ timeoutSeconds: config.drainTimeoutS }, 'draining: no new connections; waiting for requests and live turns in flight');
      const timeoutMs = config.drainTimeoutS * 1000;
      await Promise.all([http.close(timeoutMs, liveSessions.drain(Date.now() + timeoutMs)), ui?.close(), wyoming?.close()]);
      await scheduler.idle();
      await registry.close();
      logger.off('level-change', followLevel);
      logger.info('shutdown complete');
    },
  };
}
