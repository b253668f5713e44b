import type { IncomingMessage, ServerResponse } from 'node:http';
import express, { type ErrorRequestHandler, type Express, type Request, type RequestHandler } from 'express';
import type { Logger } from 'pino';
import type { KeyAuthenticator } from './auth/authenticate.ts';
import { errorFamilyOf } from './core/route-table.ts';
import { errorMiddleware, sendError } from './errors/error-middleware.ts';
import { clientAddressResolver, stampClientAddress } from './http/client-address.ts';
import { duplicateHost } from './http/host-header.ts';
import type { InFlight } from './http/in-flight.ts';
import { lingerLimits, stampLingerLimits } from './http/linger-close.ts';
import { isGatewayError, methodNotAllowed, routeNotFound } from './errors/gateway-errors.ts';
import { modelDispatcher } from './http/model-dispatcher.ts';
import type { PendingRequests } from './http/pending-requests.ts';
import type { KeyConcurrency } from './limits/key-concurrency.ts';
import type { KeyRateLimit } from './limits/rate-limiter.ts';
import { stampRequestId } from './ops/request-id.ts';
import type { RequestObserver } from './ops/request-observer.ts';
import { catalogRoute } from './routes/catalog-route.ts';
import { compatibleRoute } from './routes/compatible-route.ts';
import type { RouteServices } from './routes/route-services.ts';

export interface AppOptions {
  readonly services: RouteServices;
  readonly logger: Logger;
  /** Sets `res.locals.apiKey` or fails with 401/403; none means the model routes are open (tests only). */
  readonly authenticate?: KeyAuthenticator;
  /** Counts requests per API key on the model routes. */
  readonly modelRateLimit?: KeyRateLimit;
  /** Caps the requests of an API key in flight at once on the model routes. */
  readonly keyConcurrency?: KeyConcurrency;
  /** Counts requests per client address on the public catalog. */
  readonly catalogRateLimit?: RequestHandler;
  /** `POST /v1/chat`, the native text route. */
  readonly nativeChat?: RequestHandler;
  /** Further routes mounted before the 404 (usage read-back, admin API, health). */
  readonly mount?: (app: Express, add: AddRoute, guard: RequestHandler[]) => void;
  /** Counts the handlers still running, for a graceful shutdown. */
  readonly inFlight?: InFlight;
  /** Access log and metrics of the requests answered without an exchange. */
  readonly observer?: RequestObserver;
  /** Where a request comes from, for every per-address rule (see {@link clientAddressResolver}); default: the socket's peer. */
  readonly addressOf?: (req: IncomingMessage) => string;
  /** Caps each client address's requests still sending their body; none: no cap. */
  readonly pendingRequests?: PendingRequests;
}

/** Which error envelope a path answers with: read from the route table. */
export { errorFamilyOf } from './core/route-table.ts';

/** Registers a route so that a wrong method on its path answers 405. */
export type AddRoute = (method: 'get' | 'post' | 'delete', path: string, ...handlers: RequestHandler[]) => void;

type ExpressHandle = (req: IncomingMessage, res: ServerResponse, callback?: unknown) => void;

const pass: RequestHandler = (_req, _res, next) => next();

export function createApp(options: AppOptions): Express {
  const { services, logger } = options;
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  // Relayed upstream bodies (an HTML error page, say) must never be sniffed into something else
  // (set in the handle wrapper below, through which both the dispatcher and Express are reached).

  if (options.observer) app.use(options.observer.express());
  app.use((req, _res, next) => next(duplicateHost(req)));
  const guard = [options.authenticate ?? pass, options.modelRateLimit ?? pass];
  const modelGuard = [options.authenticate ?? pass, options.keyConcurrency?.middleware() ?? pass, options.modelRateLimit ?? pass];
  const routes = new Map<string, string[]>();
  const add: AddRoute = (method, path, ...handlers) => {
    app[method](path, ...handlers.map((handler) => options.inFlight?.track(handler) ?? handler));
    routes.set(path, [...(routes.get(path) ?? []), method.toUpperCase()]);
  };

  const modelRoutes = new Map<string, RequestHandler>();
  const addModelRoute = (path: string, handler: RequestHandler) => {
    // Counted while running, so a shutdown waits for its usage record, on either path in.
    modelRoutes.set(path, options.inFlight?.track(handler) ?? handler);
    add('post', path, ...modelGuard, handler);
  };

  add('get', '/v1/models', options.catalogRateLimit ?? pass, catalogRoute(services.registry));
  addModelRoute('/v1/chat/completions', compatibleRoute('chat-completions', services));
  addModelRoute('/v1/messages', compatibleRoute('messages', services));
  addModelRoute('/v1/messages/count_tokens', compatibleRoute('count-tokens', services));
  addModelRoute('/v1/responses', compatibleRoute('responses', services));
  if (options.nativeChat) addModelRoute('/v1/chat', options.nativeChat);
  options.mount?.(app, add, guard);

  app.use((req, _res, next) => {
    const allowed = routes.get(req.path);
    next(allowed ? methodNotAllowed(req.method, req.path, allowed) : routeNotFound(req.method, req.path));
  });
  // The error's code for the access log (the rate-limit metric tells quotas from request limits by it).
  app.use(((error, _req, res, next) => {
    res.locals.errorCode = isGatewayError(error) ? error.code : 'GW_ERR_INTERNAL';
    next(error);
  }) as ErrorRequestHandler);
  app.use(errorMiddleware((req: Request) => errorFamilyOf(req.path), logger));

  // The model routes skip Express: `app` itself is `(req, res, next) => app.handle(req, res, next)`, so
  // whatever serves it (`app.listen`, `http.createServer(app)`) reaches the dispatcher first.
  const dispatch = modelDispatcher({
    routes: modelRoutes,
    authenticate: options.authenticate,
    rateLimit: options.modelRateLimit,
    concurrency: options.keyConcurrency,
    familyOf: errorFamilyOf,
    logger,
    observer: options.observer,
  });
  const addressOf = options.addressOf ?? clientAddressResolver([]);
  const linger = lingerLimits(services.bodyLimitBytes);
  const expressHandle = (app as unknown as { handle: ExpressHandle }).handle.bind(app);
  (app as unknown as { handle: ExpressHandle }).handle = (req, res, callback) => {
    res.setHeader('X-Content-Type-Options', 'nosniff');
    stampRequestId(req, res);
    stampClientAddress(req, addressOf);
    stampLingerLimits(req, linger);
    const serve = () => {
      if (!dispatch(req, res)) expressHandle(req, res, callback);
    };
    if (options.pendingRequests) options.pendingRequests.admit(req, serve, (error) => sendError(res, error, errorFamilyOf(req.url ?? '')));
    else serve();
  };
  return app;
}
