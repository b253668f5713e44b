import express, { type Express, type Request, type RequestHandler } from 'express';
import type { Logger } from 'pino';
import type { ErrorFamily } from './errors/error-body.ts';
import { errorMiddleware } from './errors/error-middleware.ts';
import type { InFlight } from './http/in-flight.ts';
import { methodNotAllowed, routeNotFound } from './errors/gateway-errors.ts';
import { catalogRoute } from './routes/catalog-route.ts';
import { compatibleRoute } from './routes/compatible-route.ts';
import type { RouteServices } from './routes/route-services.ts';

export interface AppOptions {
  readonly services: RouteServices;
  readonly logger: Logger;
  /** Sets `res.locals.apiKey` or fails with 401/403; none means the model routes are open (tests only). */
  readonly authenticate?: RequestHandler;
  /** Counts requests per API key on the model routes. */
  readonly modelRateLimit?: RequestHandler;
  /** Counts requests per client address on the public catalog. */
  readonly catalogRateLimit?: RequestHandler;
  /** `POST /v1/chat`, the native text route. */
  readonly nativeChat?: RequestHandler;
  /** Further routes mounted before the 404 (usage read-back, admin API, health). */
  readonly mount?: (app: Express, add: AddRoute, guard: RequestHandler[]) => void;
  /** Counts the handlers still running, for a graceful shutdown. */
  readonly inFlight?: InFlight;
}

/** Which error envelope a path answers with, so each official SDK shows the gateway's messages. */
export function errorFamilyOf(path: string): ErrorFamily {
  if (path.startsWith('/v1/messages')) return 'messages-envelope';
  if (path.startsWith('/v1/chat/completions') || path.startsWith('/v1/responses')) return 'completions-envelope';
  return 'plain';
}

/** Registers a route so that a wrong method on its path answers 405. */
export type AddRoute = (method: 'get' | 'post' | 'delete', path: string, ...handlers: RequestHandler[]) => void;

const pass: RequestHandler = (_req, _res, next) => next();

export function createApp(options: AppOptions): Express {
  const { services, logger } = options;
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  // Relayed upstream bodies (an HTML error page, say) must never be sniffed into something else.
  app.use((_req, res, next) => {
    res.setHeader('X-Content-Type-Options', 'nosniff');
    next();
  });

  const guard = [options.authenticate ?? pass, options.modelRateLimit ?? pass];
  const routes = new Map<string, string[]>();
  const add: AddRoute = (method, path, ...handlers) => {
    app[method](path, ...handlers.map((handler) => options.inFlight?.track(handler) ?? handler));
    routes.set(path, [...(routes.get(path) ?? []), method.toUpperCase()]);
  };

  add('get', '/v1/models', options.catalogRateLimit ?? pass, catalogRoute(services.registry));
  add('post', '/v1/chat/completions', ...guard, compatibleRoute('chat-completions', services));
  add('post', '/v1/messages', ...guard, compatibleRoute('messages', services));
  add('post', '/v1/messages/count_tokens', ...guard, compatibleRoute('count-tokens', services));
  add('post', '/v1/responses', ...guard, compatibleRoute('responses', services));
  if (options.nativeChat) add('post', '/v1/chat', ...guard, options.nativeChat);
  options.mount?.(app, add, guard);

  app.use((req, _res, next) => {
    const allowed = routes.get(req.path);
    next(allowed ? methodNotAllowed(req.method, req.path, allowed) : routeNotFound(req.method, req.path));
  });
  app.use(errorMiddleware((req: Request) => errorFamilyOf(req.path), logger));
  return app;
}
