import { endUserOf } from '../../core/end-user.ts';
import type { Stage } from './stage.ts';

/**
 * The identify-end-user stage, once the body is read: the end user the request names (its body's
 * `user` or `metadata.user_id`, else the `x-gateway-end-user` header), or the 400 naming a bad one. Its
 * limits are reserved by `reserve`; its usage record carries it.
 */
export function identifyEndUser(): Stage {
  return async function identifyEndUser(exchange, next) {
    exchange.endUser = endUserOf(exchange.route.endUserField, exchange.body!.body, exchange.headers);
    return next(exchange);
  };
}
