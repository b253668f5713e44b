import { EVENTS } from '../../core/diagnostics.ts';
import { checkOutputCaps, choicesOf, outputCapOf, unboundedField } from '../upstream/upstream-client.ts';
import {
  writeRateLimitHeaders,
  type LimitState,
  rateLimitText,
  metersOf,
  endUserHolders,
  endUserMeters,
  type EndUserHolder,
} from '../../usage/limit-meters.ts';
import type { ModelRegistry, ResolvedModel } from '../../core/model-registry.ts';
import type { ModelPricing } from '../../plugins/plugin-contract.ts';
import {
  DEFAULT_OUTPUT_CAP,
  estimateRequest,
  highestPricing,
  demandsFor,
  Reservation,
  type RequestEstimate,
} from '../../usage/reservation.ts';
import { promptCharacters } from '../../usage/token-estimate.ts';
import type { FallbackTable } from '../routes/model-fallbacks.ts';

import type { Exchange, Stage } from './exchange.ts';
import type { Logger } from 'pino';
import type { CallerKey } from '../../core/exchange.ts';
import {
  budgetExceeded,
  fieldError,
  quotaExceeded,
  rateLimited,
  tokenRateLimited,
  validationError,
  type GatewayError,
} from '../../core/gateway-errors.ts';
import type { Meter } from '../../core/limits.ts';
import type { CounterDemand, LimitLedger, ReserveResult } from '../../usage/limit-ledger.ts';
import { EndUserRoster } from '../../usage/end-user-roster.ts';
import { formatCost } from '../../usage/usage-accounting.ts';

/** What the reserve stage uses: the budget gate (none while limits are off), the catalog and fallbacks in force. */
export interface ReserveParts {
  readonly budgets: Pick<BudgetGate, 'admit'> | undefined;
  readonly registry: ModelRegistry;
  readonly fallbacks: FallbackTable | undefined;
}

/**
 * The reserve stage of token and money limits, once the model is known and before any upstream call:
 * checks the output cap fields, then reserves the request's estimate (its prompt's size, images
 * included, and its output cap or the model's, times the answers it asks for, at the highest prices of
 * its fallback chain) on every limit of its key, its team and its end user, or throws the 429 of the one
 * without room. The route's tokens headers go on the answer; the reservation of an exchange that ended
 * without a usage record (nothing to settle it to) is released.
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
      const pricing = pricingOf(parts, resolved);
      const admitting = budgets.admit(exchange.caller, estimate, pricing, unboundedField(body), exchange.endUser);
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
  const fallbacks = parts.fallbacks?.get(resolved.canonicalId);
  if (!fallbacks?.length) return resolved.model.pricing;
  const { registry } = parts;
  return highestPricing([resolved.model.pricing, ...fallbacks.flatMap((id) => registry.model(id)?.pricing ?? [])]);
}

function hold(exchange: Exchange, admitted: Admitted | undefined): void {
  if (!admitted) return;
  exchange.reservation = admitted.reservation;
  if (EVENTS.reserved.activeFor(exchange)) {
    EVENTS.reserved.publish({
      exchange,
      meters: admitted.reservation.meters.map((meter) => `${meter.scope}:${meter.kind}:${meter.period}`),
    });
  }
  const style = exchange.route.rateLimitHeaders;
  if (style && admitted.tokens) writeRateLimitHeaders(exchange.res, style, 'tokens', admitted.tokens, Date.now());
}

/** Nano-USD as USD, every significant digit kept (`0.00099999`, `1.5`). */
const usd = (nano: number): string => formatCost(nano / 1e9, 9);

/** A request let in: what it holds on its limits, and where its tightest tokens-per-minute limit stands. */
export interface Admitted {
  readonly reservation: Reservation;
  readonly tokens?: LimitState;
}

export interface BudgetGateOptions {
  /** The counters (the embedded ledger, or Redis with its in-process fallback). */
  readonly ledger: LimitLedger;
  readonly logger: Logger;
  readonly now?: () => number;
  /**
   * Serve keys with token or money limits requests the gateway cannot bound (`previous_response_id`,
   * `conversation`, `background`), reserving only what the request itself shows (off by default:
   * refused with 400 naming the field).
   */
  readonly allowUnbounded?: boolean;
  /** Distinct end users with counters of their own per key (and team) per UTC day (10,000 by default). */
  readonly endUsersPerKey?: number;
}

/**
 * The admission stage of token and money limits: for a caller whose key or team has a `tpm`, a
 * `quota`, a `budget` or per-end-user limits, reserves the request's estimate on every one of them at
 * once (all or none; an end user's requests per minute as one request), or refuses it with the 429 of
 * the first limit without room for its input, and a `Retry-After` until that limit's window ends. A
 * caller with none of them costs a lookup.
 */
export class BudgetGate {
  private readonly now: () => number;
  private readonly roster: EndUserRoster;

  constructor(private readonly options: BudgetGateOptions) {
    this.now = options.now ?? Date.now;
    this.roster = new EndUserRoster(options.ledger, options.logger, options.endUsersPerKey);
  }

  /**
   * Reserves for one request (undefined when no limit applies); throws or rejects with the 429 of the
   * limit that refused. The estimate is asked for only when a limit applies. `endUser` is the end user
   * the request names; one that names none is counted as its key.
   */
  admit(
    caller: CallerKey | undefined,
    estimate: () => RequestEstimate,
    pricing: ModelPricing,
    unbounded?: string,
    endUser?: string,
  ): Admitted | undefined | Promise<Admitted | undefined> {
    const now = this.now();
    const own = metersOf(caller, now);
    const holders = endUserHolders(caller);
    if (own.length === 0 && holders.length === 0) return undefined;
    if (unbounded !== undefined && !this.options.allowUnbounded && (own.length > 0 || holders.some(boundsTokens))) {
      throw unboundedRefusal(unbounded);
    }
    const reserveFor = (owners: readonly string[]): Admitted | undefined | Promise<Admitted | undefined> => {
      const meters = [...own, ...holders.flatMap((holder, index) => endUserMeters(holder, owners[index]!, now))];
      if (meters.length === 0) return undefined;
      const demands = demandsFor(meters, estimate(), pricing);
      const result = this.options.ledger.reserve(demands);
      if (result instanceof Promise) return result.then((settled) => this.decide(meters, demands, settled, now));
      return this.decide(meters, demands, result, now);
    };
    const named = endUser ?? caller!.id;
    const owners = holders.map((holder) => this.roster.bucket(holder, named, now));
    if (owners.some((owner) => owner instanceof Promise)) return Promise.all(owners).then(reserveFor);
    return reserveFor(owners as string[]);
  }

  private decide(
    meters: readonly Meter[],
    demands: readonly CounterDemand[],
    result: ReserveResult,
    now: number,
  ): Admitted {
    if (result.refused !== undefined)
      throw refusal(meters[result.refused]!, result.used[result.refused]!, demands[result.refused]!.need, now);
    // The tightest tokens-per-minute limit (the key's, its team's, its group's or its end user's) is the one the
    // headers show.
    let tightest = -1;
    for (let index = 0; index < meters.length; index += 1) {
      const meter = meters[index]!;
      if (
        meter.kind === 'tpm' &&
        (tightest < 0 || meter.limit - result.used[index]! < meters[tightest]!.limit - result.used[tightest]!)
      )
        tightest = index;
    }
    const tpm = meters[tightest];
    const tokens = tpm && { limit: tpm.limit, remaining: tpm.limit - result.used[tightest]!, resetAt: tpm.resetAt };
    return { reservation: new Reservation(this.options.ledger, meters, result.reserved), tokens };
  }
}

const PERIOD_TEXT = { minute: 'per 1 minute', day: 'today (UTC)', month: 'this month (UTC)' } as const;

/**
 * The 429 of a limit without room for the request's whole reservation, waiting until its window ends;
 * the text says what the request needs, and when that is more than the limit itself, that it can only
 * pass with a lower output cap.
 */
function refusal(meter: Meter, used: number, need: number, now: number): GatewayError {
  const headers = { 'Retry-After': String(Math.max(1, Math.ceil((meter.resetAt - now) / 1000))) };
  const limit = { kind: meter.kind, scope: meter.scope } as const;
  const whose =
    meter.scope === 'team' || meter.scope === 'group'
      ? ` (${meter.scope} '${meter.owner}')`
      : meter.endUserOf
        ? ` (${endUserText(meter)})`
        : '';
  const tooLarge = need > meter.limit ? '; that is more than the whole limit: lower the output cap (max_tokens)' : '';
  if (meter.kind === 'rpm') return rateLimited(`${rateLimitText(meter.limit, 60_000)}${whose}`, headers, limit);
  if (meter.kind === 'tpm')
    return tokenRateLimited(
      `${meter.limit} tokens ${PERIOD_TEXT.minute}${whose}; ${Math.max(0, meter.limit - used)} left this minute, this request reserves ${need}${tooLarge}`,
      headers,
      limit,
    );
  if (meter.kind === 'quota')
    return quotaExceeded(
      `${used} of ${meter.limit} charged tokens used ${PERIOD_TEXT[meter.period]}${whose}, this request reserves ${need}${tooLarge}`,
      headers,
      limit,
    );
  return budgetExceeded(
    `$${usd(used)} of $${usd(meter.limit)} used ${PERIOD_TEXT[meter.period]}${whose}, this request reserves up to $${usd(need)}${tooLarge}`,
    headers,
    limit,
  );
}

/** Whose end-user limit a meter is: `end user 'alice' of key key_1`, `end user 'bob' of team 'research'`. */
function endUserText(meter: Meter): string {
  const of = meter.endUserOf!;
  return `end user '${meter.owner}' of ${of.scope === 'team' ? `team '${of.owner}'` : `key ${of.owner}`}`;
}

/** Whether per-end-user limits bound tokens or money (requests alone do not). */
const boundsTokens = (holder: EndUserHolder): boolean =>
  holder.limits.tpm !== undefined || holder.limits.quota !== undefined || holder.limits.budget !== undefined;

/** The 400 of a request whose upstream work the gateway cannot bound, from a key with token or money limits. */
function unboundedRefusal(field: string): GatewayError {
  return validationError(
    [
      fieldError(
        field,
        'cannot be used by a key with token or money limits: the gateway cannot bound what it makes the upstream read or do (an operator may allow it with GATEWAY_LIMITS_ALLOW_UNBOUNDED=true)',
      ),
    ],
    field,
  );
}
