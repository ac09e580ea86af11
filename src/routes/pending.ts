/** Endpoints of the spec whose engines land in later releases: a clear 501 envelope until then. */
import { ApiError } from '../http/errors.js';
import type { HttpServer } from '../http/server.js';

const PENDING: [method: 'GET' | 'POST', path: string, what: string][] = [['POST', '/v1/audio/separations', 'audio source separation']];

export function mountPendingRoutes(http: HttpServer): void {
  for (const [method, path, what] of PENDING) {
    http.route(method, path, () => {
      throw new ApiError('not_implemented', `${what} (${method} ${path}) is not available in this version of voxd yet`);
    });
  }
}
