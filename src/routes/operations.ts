/** Liveness, readiness and Prometheus metrics. */
import type { HttpServer } from '../http/server.js';
import type { RouteContext } from './context.js';

export function mountOperationRoutes(http: HttpServer, { metrics, readiness }: RouteContext): void {
  http.route('GET', '/healthz', (_req, reply) => {
    reply.json({ status: 'ok' });
  });

  http.route('GET', '/readyz', (_req, reply) => {
    // a draining server says so first: a balancer must stop sending it requests
    if (readiness.draining) reply.json({ status: 'draining', error: null }, 503);
    else if (readiness.ready) reply.json({ status: 'ready' });
    else reply.json({ status: readiness.error ? 'failed' : 'starting', error: readiness.error }, 503);
  });

  http.route('GET', '/metrics', (_req, reply) => {
    reply.text(metrics.render(), 'text/plain; version=0.0.4; charset=utf-8');
  });
}
