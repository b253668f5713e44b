import type { IncomingMessage, ServerResponse } from 'node:http';
import { errorFamilyOf, modelRouteAt, pathnameOf } from '../core/route-table.ts';
import { sendError } from './answer-error.ts';
import { clientAddressResolver, stampClientAddress } from '../core/client-address.ts';
import { lingerLimits, stampLingerLimits } from './http/linger-close.ts';
import type { PendingRequests } from './http/pending-requests.ts';
import { stampRequestId } from '../ops/request-id.ts';
import type { RequestObserver } from '../ops/request-observer.ts';
import type { RequestTracing } from '../ops/tracing/request-trace.ts';
import type { DataPlane } from './data-plane.ts';
import { requestContext } from './request-context.ts';

export interface WayInOptions {
  /** The model routes. */
  readonly dataPlane: DataPlane;
  /** Everything else: the Express app (catalog, usage, admin, account, health, metrics, OpenAPI, 404). */
  readonly control: (req: IncomingMessage, res: ServerResponse) => void;
  /** Access log and metrics of every request (see {@link RequestObserver.watch}). */
  readonly observer?: RequestObserver;
  /** Where a request comes from, for every per-address rule (see {@link clientAddressResolver}); default: the socket's peer. */
  readonly addressOf?: (req: IncomingMessage) => string;
  /** Caps each client address's requests still sending their body; none: no cap. */
  readonly pendingRequests?: PendingRequests;
  /** The body limit, which bounds how long an early answer waits for the rest of a body (10 MiB by default). */
  readonly bodyLimitBytes?: number;
  /** Opens each model request's trace; none while tracing is off. */
  readonly tracing?: RequestTracing;
}

/** The gateway's one node:http request listener. */
export type WayIn = (req: IncomingMessage, res: ServerResponse) => void;

/**
 * The one way in: gives every request its id, client address and linger limits, admits it past the
 * per-address cap of half-sent requests, then serves a model route's path (every spelling the route
 * table accepts, any method) on the data plane and hands anything else to the control plane.
 */
export function createWayIn(options: WayInOptions): WayIn {
  const { dataPlane, control, observer, pendingRequests, tracing } = options;
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
        const context = requestContext(route, requestId);
        if (tracing !== undefined) context.trace = tracing.startRequest({ headers: req.headers, method: req.method ?? '', route: route.path, path: pathname!, requestId });
        void dataPlane.serve(req, res, pathname!, observer ? observer.watch(req, res, context) : context);
      };
    } else {
      serve = () => {
        observer?.watch(req, res, { label: 'unmatched', recorded: false });
        control(req, res);
      };
    }
    if (pendingRequests) pendingRequests.admit(req, serve, (error) => sendError(res, error, errorFamilyOf(pathname ?? '')));
    else serve();
  };
}
