import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import type { KeyAuthenticator } from './auth/authenticate.ts';
import type { ModelRoute } from '../core/route-table.ts';
import { answerError } from './answer-error.ts';
import { isGatewayError, methodNotAllowed } from '../core/gateway-errors.ts';
import { clientAddress } from '../core/client-address.ts';
import { duplicateHost } from './http/host-header.ts';
import type { InFlight } from './http/in-flight.ts';
import type { KeyConcurrency } from './limits/key-concurrency.ts';
import type { CountedRequest, KeyRateLimit } from './limits/rate-limiter.ts';
import type { RouteId } from '../plugins/plugin-contract.ts';
import type { ModelHandler, RequestContext } from './request-context.ts';
import { writeRateLimitHeaders } from '../core/rate-limit-headers.ts';
import { ATTR, EVENT } from '../ops/tracing/span-names.ts';

export interface DataPlaneOptions {
  /** The handler of each model route served; a route without one is left to the control plane (404). */
  readonly handlers: Partial<Record<RouteId, ModelHandler>>;
  /** The caller, or 401/403/429/503; none means the routes are open (tests only). */
  readonly authenticate?: Pick<KeyAuthenticator, 'check'>;
  /** Counts requests per API key. */
  readonly rateLimit?: Pick<KeyRateLimit, 'count'>;
  /** Caps the requests of an API key (and its team) in flight at once, where a cap is set. */
  readonly concurrency?: KeyConcurrency;
  /** Counts the handlers still running, for a graceful shutdown. */
  readonly inFlight?: InFlight;
  readonly logger: Logger;
}

/** Serves one request on a model route's path (any method), its context made by the way in. */
export interface DataPlane {
  /** Whether a route has a handler here (a route without one is answered by the control plane). */
  serves(route: ModelRoute): boolean;
  serve(req: IncomingMessage, res: ServerResponse, pathname: string, context: RequestContext): Promise<void>;
}

/**
 * The model routes on plain node:http: the method (405 naming the route's), the Host header,
 * authentication, the per-key concurrency cap and rate limit (with the route's rate-limit headers), then
 * the route's handler (which reads the body, checks the model permission, reserves on the token and
 * money limits, and answers); every error answered in the route's envelope. Nothing reaches a handler
 * without the authentication and the rate limit, and a reservation the handler did not hand to usage
 * accounting is released when it ends.
 */
export function createDataPlane(options: DataPlaneOptions): DataPlane {
  const { authenticate, rateLimit, concurrency, logger } = options;
  const handlers = new Map<RouteId, ModelHandler>();
  for (const [id, handler] of Object.entries(options.handlers) as [RouteId, ModelHandler | undefined][]) {
    // Counted while running, so a shutdown waits for its usage record.
    if (handler) handlers.set(id, options.inFlight?.track(handler) ?? handler);
  }

  async function serve(req: IncomingMessage, res: ServerResponse, pathname: string, context: RequestContext): Promise<void> {
    const { route } = context;
    let requests: CountedRequest | undefined;
    try {
      const hostError = duplicateHost(req);
      if (hostError) throw hostError;
      // Named by its canonical path, so every spelling of the path gets the same answer.
      if (req.method !== route.method) throw methodNotAllowed(req.method ?? '', route.path, [route.method]);
      context.label = route.metricsLabel;
      if (authenticate) {
        const checked = authenticate.check(req.headers, route.keyHeaders, () => clientAddress(req));
        context.caller = checked instanceof Promise ? await checked : checked;
        context.keyId = context.caller.id;
        if (context.trace?.recording) {
          context.trace.set({ [ATTR.keyId]: context.caller.id, [ATTR.team]: context.caller.team?.name });
          context.trace.event(EVENT.auth);
        }
      }
      // Before the rate limit: a request refused for want of a slot does not use up the key's requests.
      if (concurrency) concurrency.acquire(context.caller, res, route.rateLimitHeaders);
      if (rateLimit) {
        const counting = rateLimit.count(context.caller, res);
        requests = counting instanceof Promise ? await counting : counting;
        if (route.rateLimitHeaders) writeRateLimitHeaders(res, route.rateLimitHeaders, 'requests', requests.state, Date.now());
      }
      await handlers.get(route.id)!(req, res, context);
    } catch (error) {
      const known = isGatewayError(error);
      context.errorCode = known ? error.code : 'GW_ERR_INTERNAL';
      context.trace?.refused(context.errorCode, known ? error.limit : undefined);
      if (known && error.limit) {
        context.refusedBy = error.limit;
        // Refused by a token, quota or budget limit: the request counts against none, its rpm included.
        requests?.giveBack();
      }
      answerError(error, pathname, res, route.family, logger);
    } finally {
      // A reservation its handler did not hand to usage accounting costs nothing: given back.
      context.reservation?.release();
      context.trace?.end(res.statusCode);
    }
  }

  return { serves: (route) => handlers.has(route.id), serve };
}
