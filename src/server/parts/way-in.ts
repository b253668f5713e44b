import type { Logger } from 'pino';
import type { GatewayConfig } from '../../config/gateway-config.ts';
import { createApp } from '../../control-plane/app.ts';
import { clientAddressResolver } from '../../core/incoming-request.ts';
import { PendingRequests } from '../../data-plane/http/client-connection.ts';
import { controlPlaneRoutes, type ControlPlaneParts } from './control-plane.ts';

/**
 * The one request handler of the main port: the model routes, then the control plane's routes mounted before the
 * 404, behind the client address resolution and the per-address bound on requests waiting for a body.
 */
export async function openWayIn(config: GatewayConfig, logger: Logger, parts: ControlPlaneParts) {
  const { configuration, observability, limits, serving } = parts;
  return createApp({
    source: observability.source,
    routes: serving.routes,
    registry: configuration.registry,
    bodyLimitBytes: config.bodyLimitBytes,
    logger,
    authenticate: limits.authenticate,
    catalogRateLimit: limits.rates.perAddress,
    inFlight: serving.inFlight,
    addressOf: clientAddressResolver(config.trustedProxies),
    pendingRequests: new PendingRequests(config.maxPendingRequestsPerAddress, logger, () =>
      observability.metrics.refused('pending_requests_per_address'),
    ),
    mount: await controlPlaneRoutes(config, logger, parts),
  });
}
