import type { Logger } from 'pino';
import type { GatewayConfig } from '../../config/gateway-config.ts';
import { clientAddressResolver } from '../../core/incoming-request.ts';
import { createDataPlane } from '../../data-plane/data-plane.ts';
import { serveResponsesWebSockets, type ResponsesWebSockets } from '../../data-plane/websocket/responses-websockets.ts';
import type { Limits } from './limits.ts';
import type { ModelServing } from './model-serving.ts';
import type { Observability } from './observability.ts';

/**
 * `GET /v1/responses` as a WebSocket: each response through the model routes' pipelines in force, counted
 * among the requests in flight (a shutdown waits for it), the key checked as for the model routes.
 */
export function startWebSockets(
  config: GatewayConfig,
  logger: Logger,
  observability: Observability,
  limits: Limits,
  serving: ModelServing,
): ResponsesWebSockets {
  return serveResponsesWebSockets({
    source: observability.source,
    dataPlane: createDataPlane({ routes: serving.routes, inFlight: serving.inFlight, logger }),
    authenticate: limits.authenticate,
    addressOf: clientAddressResolver(config.trustedProxies),
    bodyLimitBytes: config.bodyLimitBytes,
    idleTimeoutMs: config.webSocketIdleTimeoutMs,
    perKey: config.keyWebSockets,
    logger,
  });
}
