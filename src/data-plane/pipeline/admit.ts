import { isGatewayError } from '../../core/gateway-errors.ts';
import { writeRateLimitHeaders } from '../../core/rate-limit-headers.ts';
import type { KeyConcurrency } from '../limits/key-concurrency.ts';
import type { CountedRequest, KeyRateLimit } from '../limits/rate-limiter.ts';
import type { Stage } from './stage.ts';

/** What the admit stage uses: the per-key concurrency cap and request rate, either of them absent when off. */
export interface AdmitParts {
  readonly concurrency?: KeyConcurrency;
  readonly rateLimit?: Pick<KeyRateLimit, 'count'>;
}

/**
 * The admit stage: one admission per request, a slot under its key's (and team's) concurrency cap, held
 * until its response closes, then one request on its request-rate limits (a request refused for want
 * of a slot does not use up the key's requests). A request a later limit refuses (tokens, quota,
 * budget) is given back: it counts against none.
 */
export function admit(parts: AdmitParts): Stage {
  const { concurrency, rateLimit } = parts;
  return async function admit(exchange, next) {
    const { route, res } = exchange;
    if (concurrency) concurrency.acquire(exchange.caller, res, route.rateLimitHeaders);
    let counted: CountedRequest | undefined;
    if (rateLimit) {
      const counting = rateLimit.count(exchange.caller, res);
      counted = counting instanceof Promise ? await counting : counting;
      if (route.rateLimitHeaders)
        writeRateLimitHeaders(res, route.rateLimitHeaders, 'requests', counted.state, Date.now());
    }
    try {
      await next(exchange);
    } catch (error) {
      if (isGatewayError(error) && error.limit) counted?.giveBack();
      throw error;
    }
  };
}
