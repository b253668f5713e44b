import type { IncomingMessage, ServerResponse } from 'node:http';
import { EVENTS, type Observation } from '../core/diagnostics.ts';
import { clientAddressResolver, stampClientAddress } from '../core/client-address.ts';
import { stampRequestId } from '../core/request-id.ts';
import { errorFamilyOf, modelRouteAt, pathnameOf } from '../core/route-table.ts';
import { sendError } from './answer-error.ts';
import type { DataPlane } from './data-plane.ts';
import { lingerLimits, stampLingerLimits } from './http/linger-close.ts';
import type { PendingRequests } from './http/pending-requests.ts';
import { Exchange } from './pipeline/exchange.ts';

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
