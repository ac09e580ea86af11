import assert from 'node:assert/strict';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import { resolveConfig, type Config } from '../../src/config.js';
import { createLogger, closeLogger } from '../../src/logger.js';
import { startServer, type RunningServer } from '../../src/server.js';
import { transportUnderTest } from './transport.js';

export interface TestServer {
  base: string;
  server: RunningServer;
  logDir: string;
  hubCache: string;
}

/** A real voxd server on 127.0.0.1 with an ephemeral port, its own log dir and hub cache; closed after the test. */
/** `scope.after` runs the cleanup: a test's context, or `{ after }` from node:test inside a describe. */
export async function startTestServer(
  scope: { after(fn: () => Promise<void>): void },
  flags: Partial<Record<keyof Config, unknown>> = {},
  env: NodeJS.ProcessEnv = {},
): Promise<TestServer> {
  const scratch = await fsp.mkdtemp(path.join(os.tmpdir(), 'voxd-server-test-'));
  const logDir = path.join(scratch, 'logs');
  const hubCache = path.join(scratch, 'hub');
  const config = resolveConfig({ host: '127.0.0.1', port: 0, logDir, transport: transportUnderTest(), ...flags }, {});
  const logger = createLogger({ logDir, level: 'info', console: false });
  const server = await startServer(config, logger, { HF_ENDPOINT: 'http://127.0.0.1:9', HF_HUB_CACHE: hubCache, ...env });
  scope.after(async () => {
    await server.close();
    await closeLogger(logger);
    await fsp.rm(scratch, { recursive: true, force: true });
  });
  return { base: `http://127.0.0.1:${server.port}`, server, logDir, hubCache };
}

/** Jobs the server counted as cancelled (voxd_jobs_total{outcome="cancelled"}), across models. */
export async function cancelledJobs(base: string): Promise<number> {
  const metrics = await (await fetch(`${base}/metrics`)).text();
  return [...metrics.matchAll(/^voxd_jobs_total\{[^}]*outcome="cancelled"[^}]*\} (\d+)/gm)].reduce((sum, m) => sum + Number(m[1]), 0);
}

/** Waits until the server counts more cancelled jobs than `before`; fails once `performance.now()` passes `deadline`. */
export async function waitForCancelledJob(base: string, before: number, deadline: number, what = 'the job is cancelled'): Promise<void> {
  while ((await cancelledJobs(base)) === before) {
    assert.ok(performance.now() < deadline, what);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** The official SDK pointed at a test server (no retries: a test sees the first answer). */
export function sdk(base: string): OpenAI {
  return new OpenAI({ baseURL: `${base}/v1`, apiKey: 'sk-placeholder', maxRetries: 0 });
}

/** Asserts the vendor error envelope with this status, code and (when given) param. */
export async function expectEnvelope(response: Response, status: number, code: string, param?: string): Promise<void> {
  assert.equal(response.status, status, await response.clone().text());
  const { error } = (await response.json()) as { error: { code: string; param: string | null; message: string } };
  assert.equal(error.code, code, error.message);
  if (param) assert.equal(error.param, param);
}
