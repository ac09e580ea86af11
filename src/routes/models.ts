/** Model management: GET/POST/DELETE /v1/models and GET /v1/models/{id} (docs/api.md, "Models"). */
import { z } from 'zod';
import { ApiError } from '../errors.js';
import type { HttpRequest } from '../http/request.js';
import type { HttpServer } from '../http/server.js';
import { normaliseModelId } from '../services/model-id.js';
import type { RouteContext } from './context.js';

const loadBody = z.object({ model_name: z.string().min(1) });

/** `model_name` from the query or from a JSON body `{"model_name": ...}` (docs/api.md, "Models"). */
async function modelName(req: HttpRequest, jsonLimitBytes: number): Promise<string> {
  const fromQuery = req.query.get('model_name');
  const raw = fromQuery ?? (req.header('content-type') ? (await req.json(loadBody, jsonLimitBytes)).model_name : '');
  const name = normaliseModelId(raw);
  if (!name) throw new ApiError('invalid_request', 'query parameter model_name is required', { param: 'model_name' });
  return name;
}

export function mountModelRoutes(http: HttpServer, { registry, config }: RouteContext): void {
  const jsonLimitBytes = config.maxJsonKb * 1024;
  /** The last body of the plain list, kept while the loaded models stay the same (most lists repeat the last one). */
  let listed: { version: number; body: Buffer } | null = null;

  http.route('GET', '/v1/models', (req, reply) => {
    // most lists come without a query: then there is none to parse
    const available = req.rawQuery !== '' && ['true', '1'].includes((req.query.get('available') ?? '').toLowerCase());
    if (available) return reply.json({ object: 'list', data: registry.list(true) });
    const version = registry.listVersion;
    // while a model is on its way its progress changes by the second: nothing is kept
    if (version === null) return reply.json({ object: 'list', data: registry.list(false) });
    if (listed?.version !== version) listed = { version, body: Buffer.from(JSON.stringify({ object: 'list', data: registry.list(false) })) };
    reply.send(listed.body, 'application/json');
  });

  http.route('GET', '/v1/models/*', (req, reply) => {
    reply.json(registry.describe(req.params['*'] ?? ''));
  });

  http.route('POST', '/v1/models', async (req, reply) => {
    const name = await modelName(req, jsonLimitBytes);
    // asked for (Accept: text/event-stream): the download's progress as it goes, then the model
    if ((req.header('accept') ?? '').includes('text/event-stream')) return reply.stream('sse', registry.loadEvents(name, req.signal));
    const model = await registry.load(name, { signal: req.signal });
    reply.json({ status: 'success', message: `Model ${name} added successfully`, model });
  });

  http.route('DELETE', '/v1/models', async (req, reply) => {
    await registry.unload(await modelName(req, jsonLimitBytes));
    reply.status(204).send();
  });
}
