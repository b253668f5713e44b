import type { IncomingMessage } from 'node:http';
import express, { type ErrorRequestHandler, type Express, type Request, type RequestHandler } from 'express';
import type { Logger } from 'pino';
import type { Current } from '../core/current.ts';
import type { KeyAuthenticator } from '../data-plane/pipeline/authenticate.ts';
import { errorFamilyOf } from '../core/route-table.ts';
import type { ModelRegistry } from '../core/model-registry.ts';
import type { RouteId } from '../plugins/plugin-contract.ts';
import { createDataPlane, createWayIn, type WayIn } from '../data-plane/data-plane.ts';
import type { Next } from '../data-plane/pipeline/exchange.ts';
import { errorMiddleware } from '../data-plane/answer-error.ts';
import { clientErrorOf, isGatewayError, methodNotAllowed, routeNotFound } from '../core/gateway-errors.ts';
import { duplicateHost, type InFlight, type PendingRequests } from '../data-plane/http/client-connection.ts';
import type { KeyRateLimit } from '../data-plane/pipeline/admit.ts';
import { observationOf } from '../ops/request-observer.ts';
import { catalogRoute } from './catalog-route.ts';
import type { CallerKey } from '../core/exchange.ts';

export interface AppOptions {
  /** The gateway whose events its requests are (see `EventSource`). */
  readonly source: object;
  /** The model routes' pipelines of the configuration in force. */
  readonly routes: Current<ReadonlyMap<RouteId, Next>>;
  /** The catalog in force. */
  readonly registry: () => ModelRegistry;
  /** The body limit (an early answer waits for the rest of a body up to it). */
  readonly bodyLimitBytes: number;
  readonly logger: Logger;
  /** The caller or 401/403/429/503 of the control plane's keyed routes (`/v1/usage`); none: open. */
  readonly authenticate?: KeyAuthenticator;
  /** Counts requests per API key on the keyed routes `mount` adds with `guard` (none by default). */
  readonly modelRateLimit?: KeyRateLimit;
  /** Counts requests per client address on the public catalog. */
  readonly catalogRateLimit?: RequestHandler;
  /** Further control-plane routes mounted before the 404 (usage read-back, admin API, health). */
  readonly mount?: (app: Express, add: AddRoute, guard: RequestHandler[]) => void;
  /** Counts the handlers still running, for a graceful shutdown. */
  readonly inFlight?: InFlight;
  /**
   * Where a request comes from, for every per-address rule (see {@link clientAddressResolver}); default: the socket's
   * peer.
   */
  readonly addressOf?: (req: IncomingMessage) => string;
  /** Caps each client address's requests still sending their body; none: no cap. */
  readonly pendingRequests?: PendingRequests;
}

/** Which error envelope a path answers with: read from the route table. */
export { errorFamilyOf } from '../core/route-table.ts';

/** Registers a control-plane route so that a wrong method on its path answers 405. */
export type AddRoute = (method: 'get' | 'post' | 'delete', path: string, ...handlers: RequestHandler[]) => void;

const pass: RequestHandler = (_req, _res, next) => next();

/**
 * The gateway's request listener: the one way in ({@link createWayIn}) in front of the data plane (the
 * model routes of the route table) and the control plane (this Express app: everything else).
 */
export function createApp(options: AppOptions): WayIn {
  const { logger } = options;
  const dataPlane = createDataPlane({ routes: options.routes, inFlight: options.inFlight, logger });
  return createWayIn({
    source: options.source,
    dataPlane,
    control: controlPlane(options),
    addressOf: options.addressOf,
    pendingRequests: options.pendingRequests,
    bodyLimitBytes: options.bodyLimitBytes,
  });
}

/**
 * The control plane: catalog, usage, admin, account, health, metrics, OpenAPI, and the 404/405 of
 * every path the data plane does not take. No model route is registered here.
 */
export function controlPlane(options: AppOptions): Express {
  const { logger } = options;
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);

  app.use((req, res, next) => {
    // What the access log learns once the answer is done: the matched route's pattern (bounded), never the raw path.
    const observation = observationOf(res);
    if (observation) {
      observation.labelOf = () => (req.route?.path ? `${req.baseUrl}${String(req.route.path)}` : 'unmatched');
      observation.keyIdOf = () => (res.locals.apiKey as CallerKey | undefined)?.id;
    }
    next(duplicateHost(req));
  });
  // The guard of the control plane's keyed routes: the data plane's authentication and rate limit, as middleware.
  const guard = [options.authenticate ?? pass, options.modelRateLimit ?? pass];
  const routes = new Map<string, string[]>();
  const add: AddRoute = (method, path, ...handlers) => {
    app[method](path, ...handlers.map((handler) => options.inFlight?.track(handler) ?? handler));
    routes.set(path, [...(routes.get(path) ?? []), method.toUpperCase()]);
  };

  add('get', '/v1/models', options.catalogRateLimit ?? pass, catalogRoute(options.registry));
  options.mount?.(app, add, guard);

  app.use((req, _res, next) => {
    const allowed = routes.get(req.path);
    next(allowed ? methodNotAllowed(req.method, req.path, allowed) : routeNotFound(req.method, req.path));
  });
  // The error's code for the access log (the rate-limit metric tells quotas from request limits by it).
  app.use(((error, _req, res, next) => {
    const observation = observationOf(res);
    const known = isGatewayError(error) ? error : clientErrorOf(error);
    if (observation) observation.errorCode = known?.code ?? 'GW_ERR_INTERNAL';
    next(known ?? error);
  }) as ErrorRequestHandler);
  app.use(errorMiddleware((req: Request) => errorFamilyOf(req.path), logger));
  return app;
}
