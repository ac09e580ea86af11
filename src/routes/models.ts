/** Model management: GET/POST/DELETE /v1/models and GET /v1/models/{id} (voxd-api.md, "Models"). */
import { ApiError } from '../http/errors.js';
import type { HttpServer } from '../http/server.js';
import { normaliseModelId } from '../services/model-id.js';
import type { RouteContext } from './context.js';

function modelNameParam(query: URLSearchParams): string {
  const name = normaliseModelId(query.get('model_name') ?? '');
  if (!name) throw new ApiError('invalid_request', 'query parameter model_name is required', { param: 'model_name' });
  return name;
}

export function mountModelRoutes(http: HttpServer, { registry }: RouteContext): void {
  http.route('GET', '/v1/models', (req, reply) => {
    const available = ['true', '1'].includes((req.query.get('available') ?? '').toLowerCase());
    reply.json({ object: 'list', data: registry.list(available) });
  });

  http.route('GET', '/v1/models/*', (req, reply) => {
    reply.json(registry.describe(req.params['*'] ?? ''));
  });

  http.route('POST', '/v1/models', async (req, reply) => {
    const name = modelNameParam(req.query);
    const model = await registry.load(name);
    reply.json({ status: 'success', message: `Model ${name} added successfully`, model });
  });

  http.route('DELETE', '/v1/models', async (req, reply) => {
    await registry.unload(modelNameParam(req.query));
    reply.status(204).send();
  });
}
