import { clientAddress } from '../../core/client-address.ts';
import { EVENTS } from '../../core/diagnostics.ts';
import type { KeyAuthenticator } from '../auth/authenticate.ts';
import type { Stage } from './stage.ts';

/**
 * The authenticate stage: the caller presenting the request's key (the route's key headers), or the
 * 401, 403, 429 (an address past the failed-key throttle) or 503 that refuses it.
 */
export function authenticate(authenticator: Pick<KeyAuthenticator, 'check'>): Stage {
  return async function authenticate(exchange, next) {
    const checked = authenticator.check(exchange.headers, exchange.route.keyHeaders, () => clientAddress(exchange.req));
    exchange.caller = checked instanceof Promise ? await checked : checked;
    if (EVENTS.authenticated.active) EVENTS.authenticated.publish(exchange);
    return next(exchange);
  };
}
