import { EVENTS } from '../../core/diagnostics.ts';
import type { ModelRegistry, ResolvedModel } from '../../core/model-registry.ts';
import { writeRateLimitHeaders } from '../../core/rate-limit-headers.ts';
import type { ModelPricing } from '../../plugins/plugin-contract.ts';
import { DEFAULT_OUTPUT_CAP, estimateRequest, highestPricing } from '../../usage/reservation.ts';
import { promptCharacters } from '../../usage/token-estimate.ts';
import type { Admitted, BudgetGate } from '../limits/budget-gate.ts';
import type { FallbackTable } from '../routes/model-fallbacks.ts';
import { checkOutputCaps, choicesOf, outputCapOf, unboundedField } from '../routes/output-caps.ts';
import type { Exchange } from './exchange.ts';
import type { Stage } from './stage.ts';

/** What the reserve stage uses: the budget gate (none while limits are off), the catalog and fallbacks in force. */
export interface ReserveParts {
  readonly budgets: Pick<BudgetGate, 'admit'> | undefined;
  readonly registry: () => ModelRegistry;
  readonly fallbacks: () => FallbackTable | undefined;
}

/**
 * The reserve stage of token and money limits, once the model is known and before any upstream call:
 * checks the output cap fields, then reserves the request's estimate (its prompt's size, images
 * included, and its output cap or the model's, times the answers it asks for, at the highest prices of
 * its fallback chain) on every limit of its key and team, or throws the 429 of the one without room. The
 * route's tokens headers go on the answer; the reservation of an exchange that ended without a usage
 * record (nothing to settle it to) is released.
 */
export function reserve(parts: ReserveParts): Stage {
  return async function reserve(exchange, next) {
    const fields = exchange.route.outputCapFields!;
    const body = exchange.body!.body;
    const resolved = exchange.requested!;
    checkOutputCaps(body, fields, resolved);
    const { budgets } = parts;
    if (budgets) {
      const estimate = () =>
        estimateRequest(
          promptCharacters(body),
          outputCapOf(body, fields) ?? resolved.model.maxOutputTokens ?? DEFAULT_OUTPUT_CAP,
          choicesOf(body),
        );
      const admitting = budgets.admit(exchange.caller, estimate, pricingOf(parts, resolved), unboundedField(body));
      hold(exchange, admitting instanceof Promise ? await admitting : admitting);
    }
    try {
      await next(exchange);
    } finally {
      // An exchange that ended goes to usage accounting with its reservation (the record stage, as it unwinds).
      if (exchange.ending === undefined) exchange.reservation?.release();
    }
  };
}

/** The highest prices the request may be served at: its model's, or a fallback's if higher. */
function pricingOf(parts: ReserveParts, resolved: ResolvedModel): ModelPricing {
  const fallbacks = parts.fallbacks()?.get(resolved.canonicalId);
  if (!fallbacks?.length) return resolved.model.pricing;
  const registry = parts.registry();
  return highestPricing([resolved.model.pricing, ...fallbacks.flatMap((id) => registry.model(id)?.pricing ?? [])]);
}

function hold(exchange: Exchange, admitted: Admitted | undefined): void {
  if (!admitted) return;
  exchange.reservation = admitted.reservation;
  if (EVENTS.reserved.active) {
    EVENTS.reserved.publish({
      exchange,
      meters: admitted.reservation.meters.map((meter) => `${meter.scope}:${meter.kind}:${meter.period}`),
    });
  }
  const style = exchange.route.rateLimitHeaders;
  if (style && admitted.tokens) writeRateLimitHeaders(exchange.res, style, 'tokens', admitted.tokens, Date.now());
}
