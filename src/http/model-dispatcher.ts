import type { IncomingMessage, ServerResponse } from 'node:http';
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import type { Logger } from 'pino';
import type { KeyAuthenticator } from '../auth/authenticate.ts';
import { clientAddress } from './client-address.ts';
import { duplicateHost } from './host-header.ts';
import type { ErrorFamily } from '../errors/error-body.ts';
import { answerError } from '../errors/error-middleware.ts';
import { internalError } from '../errors/gateway-errors.ts';
import type { KeyConcurrency } from '../limits/key-concurrency.ts';
import type { KeyRateLimit } from '../limits/rate-limiter.ts';
import type { CallerKey } from '../routes/route-services.ts';

export interface ModelDispatcherOptions {
  /** `POST` handlers by exact path. They use only node's req/res and `res.locals.apiKey`. */
  readonly routes: ReadonlyMap<string, RequestHandler>;
  /** Sets the caller or fails with 401/403/503; none means the routes are open (tests only). */
  readonly authenticate?: KeyAuthenticator;
  /** Counts requests per API key. */
  readonly rateLimit?: KeyRateLimit;
  /** Caps the requests of an API key in flight at once. */
  readonly concurrency?: KeyConcurrency;
  /** The error envelope of a path, as the Express app's error middleware uses it. */
  readonly familyOf: (path: string) => ErrorFamily;
  readonly logger: Logger;
  /** Told of each request answered with an error before its route recorded an exchange (access log, metrics). */
  readonly observer?: { rejected(req: IncomingMessage, res: ServerResponse, path: string, error: unknown, durationMs: number): void };
}

/**
 * Takes a request when it is a `POST` on one of `routes` (exact path, any query) and returns true;
 * anything else returns false for the Express app to handle.
 */
export type ModelDispatcher = (req: IncomingMessage, res: ServerResponse) => boolean;

/**
 * The model routes on plain node:http, in front of Express: authentication, the per-key concurrency cap
 * and rate limit, then the route handler (which reads the body, checks the model permission and quota,
 * and answers), errors answered as the Express error middleware answers them. Express's router and its
 * req/res wrapping cost more per request than everything else the gateway does on its own; the rest of
 * the gateway (catalog, usage, admin, health, 404 and 405) stays in Express, which also still serves the
 * model routes for paths spelled otherwise (case, trailing slash), so every answer stays the same.
 */
export function modelDispatcher(options: ModelDispatcherOptions): ModelDispatcher {
  const { routes, authenticate, rateLimit, concurrency, familyOf, logger, observer } = options;

  async function serve(handler: RequestHandler, path: string, req: IncomingMessage, res: ServerResponse): Promise<void> {
    const locals: Record<string, unknown> = Object.create(null);
    (res as ServerResponse & { locals: Record<string, unknown> }).locals = locals;
    const startedAt = performance.now();
    const fail = (error: unknown) => {
      answerError(error, path, res, familyOf(path), logger);
      if (!locals.recorded) observer?.rejected(req, res, path, error, performance.now() - startedAt);
    };
    try {
      const hostError = duplicateHost(req);
      if (hostError) throw hostError;
      let caller: CallerKey | undefined;
      if (authenticate) {
        const checked = authenticate.check(req.headers, path, () => clientAddress(req));
        caller = checked instanceof Promise ? await checked : checked;
        locals.apiKey = caller;
      }
      // Before the rate limit: a request refused for want of a slot does not use up the key's requests.
      if (concurrency) concurrency.acquire(caller, res);
      if (rateLimit) await rateLimit.count(caller, res);
      // The handlers never pass a request on; one that did would otherwise leave it unanswered.
      const next: NextFunction = (error?: unknown) => fail(error ?? internalError(new Error(`the handler of ${path} passed the request on`)));
      await handler(req as Request, res as unknown as Response, next);
    } catch (error) {
      fail(error);
    }
  }

  return function dispatch(req, res) {
    if (req.method !== 'POST') return false;
    const url = req.url ?? '';
    const query = url.indexOf('?');
    const path = query === -1 ? url : url.slice(0, query);
    const handler = routes.get(path);
    if (handler === undefined) return false;
    void serve(handler, path, req, res);
    return true;
  };
}
