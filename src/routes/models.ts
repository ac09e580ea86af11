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

  http.route('GET', '/v1/models', (req, reply) => {
    const available = ['true', '1'].includes((req.query.get('available') ?? '').toLowerCase());
    reply.json({ object: 'list', data: registry.list(available) });
  });

  http.route('GET', '/v1/models/*', (req, reply) => {
    reply.json(registry.describe(req.params['*'] ?? ''));
  });

  http.route('POST', '/v1/models', async (req, reply) => {
    const name = await modelName(req, jsonLimitBytes);
    const model = await registry.load(name);
    reply.json({ status: 'success', message: `Model ${name} added successfully`, model });
  });

  http.route('DELETE', '/v1/models', async (req, reply) => {
    await registry.unload(await modelName(req, jsonLimitBytes));
    reply.status(204).send();
  });
}
