import type { Logger } from 'pino';
import type { Current } from '../core/current.ts';
import { EVENTS, type Observation } from '../core/diagnostics.ts';
import { isGatewayError, methodNotAllowed } from '../core/gateway-errors.ts';
import { type ModelRoute, errorFamilyOf, modelRouteAt, pathnameOf } from '../core/route-table.ts';
import type { RouteId } from '../plugins/plugin-contract.ts';
import { answerError, sendError } from './answer-error.ts';
import {
  duplicateHost,
  lingerLimits,
  stampLingerLimits,
  type InFlight,
  type PendingRequests,
} from './http/client-connection.ts';
import { Exchange, type Next } from './pipeline/exchange.ts';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { clientAddressResolver, stampClientAddress, stampRequestId } from '../core/incoming-request.ts';

export interface DataPlaneOptions {
  /**
   * The pipeline of each model route served, as the configuration in force built it; a route without one is left to the
   * control plane (404).
   */
  readonly routes: Current<ReadonlyMap<RouteId, Next>>;
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
      await routes.current.get(route.id)!(exchange);
    } catch (error) {
      const known = isGatewayError(error);
      exchange.errorCode = known ? error.code : 'GW_ERR_INTERNAL';
      if (known && error.limit) exchange.refusedBy = error.limit;
      answerError(error, exchange.path, res, route.family, logger);
    } finally {
      if (EVENTS.exchangeEnd.activeFor(exchange)) {
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
  return { serves: (route) => routes.current.has(route.id), serve: served };
}

export interface WayInOptions {
  /** The gateway whose events the requests are (see `EventSource`). */
  readonly source: object;
  /** The model routes. */
  readonly dataPlane: DataPlane;
  /** Everything else: the Express app (catalog, usage, admin, account, health, metrics, OpenAPI, 404). */
  readonly control: (req: IncomingMessage, res: ServerResponse) => void;
  /**
   * Where a request comes from, for every per-address rule (see {@link clientAddressResolver}); default: the socket's
   * peer.
   */
  readonly addressOf?: (req: IncomingMessage) => string;
  /** Caps each client address's requests still sending their body; none: no cap. */
  readonly pendingRequests?: PendingRequests;
  /** The body limit, which bounds how long an early answer waits for the rest of a body (10 MiB by default). */
  readonly bodyLimitBytes?: number;
}

/** The gateway's one node:http request listener. */
export type WayIn = (req: IncomingMessage, res: ServerResponse) => void;

/**
 * The one way in: gives every request its id, client address and linger limits, admits it past the
 * per-address cap of half-sent requests, then serves a model route's path (every spelling the route
 * table accepts, any method) on the data plane, as a new {@link Exchange}, and hands anything else to
 * the control plane. Each request is told as the `request` event, an exchange as `exchange:start`.
 */
export function createWayIn(options: WayInOptions): WayIn {
  const { source, dataPlane, control, pendingRequests } = options;
  const addressOf = options.addressOf ?? clientAddressResolver([]);
  const linger = lingerLimits(options.bodyLimitBytes ?? 10 * 1024 * 1024);
  return function wayIn(req, res) {
    // Relayed upstream bodies (an HTML error page, say) must never be sniffed into something else.
    res.setHeader('X-Content-Type-Options', 'nosniff');
    const requestId = stampRequestId(req, res);
    stampClientAddress(req, addressOf);
    stampLingerLimits(req, linger);
    const pathname = pathnameOf(req.url ?? '');
    const route = pathname === undefined ? undefined : modelRouteAt(pathname);
    let serve: () => void;
    if (route !== undefined && dataPlane.serves(route)) {
      serve = () => {
        const exchange = new Exchange(source, route, requestId, req, res, pathname!);
        if (EVENTS.request.active) EVENTS.request.publish({ source, req, res, observation: exchange });
        if (EVENTS.exchangeStart.active) EVENTS.exchangeStart.publish(exchange);
        void dataPlane.serve(exchange);
      };
    } else {
      serve = () => {
        const observation: Observation = { label: 'unmatched', recorded: false };
        if (EVENTS.request.active) EVENTS.request.publish({ source, req, res, observation });
        control(req, res);
      };
    }
    if (pendingRequests)
      pendingRequests.admit(req, serve, (error) => sendError(res, error, errorFamilyOf(pathname ?? '')));
    else serve();
  };
}
