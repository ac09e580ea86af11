/**
 * Fuzz target `abort-mix`: a few requests of the abort mix (test/helpers/abort-mix.ts) at once against a real voxd
 * server in a child process (voxd-server.ts, either transport) with random-weight Whisper, Pocket TTS and Qwen3-TTS
 * models: transcriptions, speech and live sessions, about half of them abandoned by their client at a random moment.
 *
 * Findings: the server dies (crash); a request its client waits for gets no answer within ANSWER_MS, or the engines
 * do not come back to idle (no job running or waiting, no live session open) within IDLE_MS of the last request
 * (hang); a request its client waits for fails (any error but 504 job_timeout), or the server logs an error
 * (failure).
 */
import type { TransportName } from '../../src/http/transport.js';
import { MIX_KINDS, mixModels, randomMixRequest, runMixRequest, type MixModels, type MixOutcome, type MixRequest } from '../helpers/abort-mix.js';
import { pollUntil } from '../helpers/process.js';
import type { Rng } from './random.js';
import { jsonFormat, type Finding, type FuzzTarget } from './target.js';
import { FuzzServers, TRANSPORTS, type FuzzServer } from './voxd-server.js';

export interface AbortMixCase {
  transport: TransportName;
  requests: MixRequest[];
}

const MAX_REQUESTS = 6;
/** Live sessions per case, within the fuzz server's --max-realtime-sessions. */
const MAX_LIVE = 2;
const ABORT_SHARE = 0.5;
/**
 * The servers' --job-timeout-s: a runaway (a transcription without max_tokens on random weights, decoding every window
 * to its token limit) is stopped with 504, while the other requests, which share the cores with it, still finish.
 */
const JOB_TIMEOUT_S = 30;
/** Transcriptions with a few tokens at most: most cases stay short, and the rest exercise the time limit. */
const BOUNDED_SHARE = 0.7;
const ANSWER_MS = 90_000;
const IDLE_MS = 20_000;

function generateCase(rng: Rng): AbortMixCase {
  const requests: MixRequest[] = [];
  const count = 2 + rng.below(MAX_REQUESTS - 1);
  while (requests.length < count) {
    const request = randomMixRequest(() => rng.float(), ABORT_SHARE);
    if (rng.float() < BOUNDED_SHARE) request.maxTokens = 16;
    if (request.kind === 'live' && requests.filter((r) => r.kind === 'live').length >= MAX_LIVE) continue;
    requests.push(request);
  }
  return { transport: TRANSPORTS[rng.below(TRANSPORTS.length)] as TransportName, requests };
}

function describe(input: AbortMixCase): string {
  return `${input.transport}: ${input.requests.map((r) => `${r.kind}${r.kind === 'speech' || r.kind === 'speech-stream' ? `/${r.voice}` : ''}${r.abortAfterMs === null ? '' : ` (gone at ${r.abortAfterMs} ms)`}`).join(', ')}`;
}

/** What the outcomes say of the server: a request its client waited for and did not get. */
function judge(outcomes: MixOutcome[]): Finding | null {
  const unanswered = outcomes.find((o) => o.result === 'no-answer');
  if (unanswered) return { kind: 'hang', detail: `${unanswered.request.kind} got no answer within ${ANSWER_MS / 1000} s` };
  const failed = outcomes.find((o) => o.result === 'error' && o.code !== 'job_timeout');
  if (failed) return { kind: 'failure', detail: `${failed.request.kind} failed: ${failed.status} ${failed.code}` };
  return null;
}

/** The metric lines that say an engine is still busy (a job running or waiting, a live session open). */
function busyLines(metrics: string): string[] {
  return metrics.split('\n').filter((line) => /^voxd_(jobs_running|queue_depth|realtime_sessions)\{.*\} [1-9]/.test(line));
}

/** Null once the engines are idle; else what is still busy after IDLE_MS. */
async function engineLeftovers(server: FuzzServer): Promise<string | null> {
  return pollUntil(server.base, '/metrics', (status, body) => status === 200 && busyLines(body).length === 0, IDLE_MS).then(
    () => null,
    async () => busyLines(await (await fetch(`${server.base}/metrics`)).text()).join('; '),
  );
}

export function abortMixTarget(): FuzzTarget<AbortMixCase> {
  const servers = new FuzzServers(['--job-timeout-s', String(JOB_TIMEOUT_S)]);
  let models: MixModels | null = null;
  return {
    name: 'abort-mix',
    format: jsonFormat<AbortMixCase>(),
    async setup() {
      models = await mixModels('tiny');
    },
    generate: generateCase,
    async run(input) {
      const server = await servers.get(input.transport);
      const options = { base: server.base, models: models as MixModels, boundMs: ANSWER_MS, liveSeconds: 3, livePace: 4 };
      const requests = input.requests.filter((r) => MIX_KINDS.includes(r.kind));
      const outcomes = await Promise.all(requests.map((request) => runMixRequest(request, options)));
      const leftovers = await engineLeftovers(server);
      const finding =
        (await server.check()) ??
        judge(outcomes) ??
        (leftovers ? { kind: 'hang' as const, detail: `the engines were not idle ${IDLE_MS / 1000} s after the last request: ${leftovers}` } : null);
      if (finding) {
        finding.detail = `${describe(input)}: ${finding.detail}`;
        await server.restart();
      }
      return finding;
    },
    teardown: () => servers.close(),
  };
}
