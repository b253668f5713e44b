import type { Logger } from 'pino';
import { EVENTS } from '../core/diagnostics.ts';
import { isGatewayError, methodNotAllowed } from '../core/gateway-errors.ts';
import type { ModelRoute } from '../core/route-table.ts';
import type { RouteId } from '../plugins/plugin-contract.ts';
import { answerError } from './answer-error.ts';
import { duplicateHost } from './http/host-header.ts';
import type { InFlight } from './http/in-flight.ts';
import type { Exchange } from './pipeline/exchange.ts';
import type { Next } from './pipeline/stage.ts';

export interface DataPlaneOptions {
  /**
   * The pipeline of each model route served, as the configuration in force built it; a route without one is left to the
   * control plane (404).
   */
  readonly routes: () => ReadonlyMap<RouteId, Next>;
  /** Counts the requests still running, for a graceful shutdown. */
  readonly inFlight?: InFlight;
  readonly logger: Logger;
}

/** Serves one request on a model route's path (any method), its exchange made by the way in. */
export interface DataPlane {
  /** Whether a route has a pipeline here (a route without one is answered by the control plane). */
  serves(route: ModelRoute): boolean;
  serve(exchange: Exchange): Promise<void>;
}

/**
 * The model routes on plain node:http: the method (405 naming the route's) and the Host header, then the
 * route's pipeline of stages (see `model-routes.ts`); every error answered here, in the route's envelope,
 * and the exchange's end told as an event.
 */
export function createDataPlane(options: DataPlaneOptions): DataPlane {
  const { routes, logger, inFlight } = options;

  async function serve(exchange: Exchange): Promise<void> {
    const { route, res } = exchange;
    try {
      const hostError = duplicateHost(exchange.req);
      if (hostError) throw hostError;
      // Named by its canonical path, so every spelling of the path gets the same answer.
      if (exchange.method !== route.method) throw methodNotAllowed(exchange.method, route.path, [route.method]);
      exchange.label = route.metricsLabel;
      await routes().get(route.id)!(exchange);
    } catch (error) {
      const known = isGatewayError(error);
      exchange.errorCode = known ? error.code : 'GW_ERR_INTERNAL';
      if (known && error.limit) exchange.refusedBy = error.limit;
      answerError(error, exchange.path, res, route.family, logger);
    } finally {
      if (EVENTS.exchangeEnd.active) {
        EVENTS.exchangeEnd.publish({
          exchange,
          status: res.statusCode,
          errorCode: exchange.errorCode,
          limit: exchange.refusedBy,
        });
      }
    }
  }

  // Counted while running, so a shutdown waits for its usage record.
  const served = inFlight ? inFlight.track(serve) : serve;
  return { serves: (route) => routes().has(route.id), serve: served };
}
