import type { RequestHandler } from 'express';
import type { ModelRegistry } from '../core/model-registry.ts';

/** `GET /v1/models`: the public catalog, serialised once per registry. */
export function catalogRoute(registry: () => ModelRegistry): RequestHandler {
  let cachedFor: ModelRegistry | undefined;
  let payload = '';
  return function handleCatalog(_req, res) {
    const current = registry();
    if (current !== cachedFor) {
      cachedFor = current;
      payload = JSON.stringify({ object: 'list', data: current.catalog });
    }
    res.writeHead(200, {
      'content-type': 'application/json; charset=utf-8',
      'content-length': Buffer.byteLength(payload),
    });
    res.end(payload);
  };
}
