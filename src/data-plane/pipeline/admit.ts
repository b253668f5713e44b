import { isGatewayError, rateLimited } from '../../core/gateway-errors.ts';
import {
  writeRateLimitHeaders,
  concurrencyRefusalHeaders,
  rateLimitText,
  requestMeter,
  tighter,
  writeDraftRateLimitHeaders,
  type HeaderTarget,
  type LimitState,
} from '../../usage/limit-meters.ts';
import type { Stage } from './exchange.ts';
import type { Current } from '../../core/current.ts';
import type { RequestHandler } from 'express';
import type { CallerKey } from '../../core/exchange.ts';
import type { Meter, RateSettings } from '../../core/limits.ts';
import { clientAddress } from '../../core/incoming-request.ts';
import type { CounterDemand, LimitLedger, ReserveResult } from '../../usage/limit-ledger.ts';
import { MemoryLedger } from '../../stores/limits/embedded-ledger.ts';
import type { RateLimitHeaderStyle } from '../../core/route-table.ts';
import type { ClientResponse } from '../http/client-connection.ts';

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

export type { RateSettings };

export interface RateLimiterOptions {
  /**
   * Where requests are counted: the ledger every other limit is counted in (Redis with its in-process
   * fallback, or the embedded one). A ledger of its own in process memory when absent.
   */
  readonly ledger?: LimitLedger;
  /** The limit and window in force, read per request (a reload changes them); else `max` per `windowMs`. */
  readonly settings?: Current<RateSettings>;
  /** Requests per window when no `settings` are given (100). */
  readonly max?: number;
  /** The window when no `settings` are given (60000: the UTC minute). */
  readonly windowMs?: number;
}

/**
 * The per-key request limit of the model routes. {@link count} is the one decision; the function itself
 * is the same decision as Express middleware (after authentication, `res.locals.apiKey`), for the
 * control plane's guarded routes (`/v1/usage`).
 */
export interface KeyRateLimit extends RequestHandler {
  /**
   * Counts one request of `caller` (`anonymous` when the routes are open) against its key's limit and,
   * when its team has an `rpm`, the team's, on both or neither; sets the draft-8 `RateLimit` headers
   * (the key's), and throws or rejects with the 429 (and its Retry-After) of the limit without room.
   * Gives where the tighter of the two stands, and how to give the request back (a request refused by
   * a later limit counts against none); synchronous on the embedded ledger.
   */
  count(caller: CallerKey | undefined, res: HeaderTarget): CountedRequest | Promise<CountedRequest>;
}

/** A request counted against its request-rate limits. */
export interface CountedRequest {
  /** Where the tighter of the key's and the team's limit stands after it. */
  readonly state: LimitState;
  /** Takes the request back off every counter it was counted on (once; later calls do nothing). */
  giveBack(): void;
}

export interface RateLimiters {
  /** Per API key id (and team), on the model routes; runs after authentication. */
  readonly perKey: KeyRateLimit;
  /** Per client address, on the public catalog (Express middleware on the same decision). */
  readonly perAddress: RequestHandler;
  /** True while Redis is configured but requests are counted in process memory. */
  degraded(): boolean;
}

interface Measured {
  readonly settings: RateSettings;
  readonly meters: readonly Meter[];
  readonly demands: readonly CounterDemand[];
  /** When the window ends: the meters are built again then. */
  readonly until: number;
}

const ONE_REQUEST = (meter: Meter): CounterDemand => ({
  counter: meter.counter,
  limit: meter.limit,
  want: 1,
  need: 1,
  resetAt: meter.resetAt,
});

/**
 * Request rates as meters of the limit ledger, in fixed windows aligned on the epoch (the UTC minute
 * by default), like tokens per minute: a request reserves one request on its key's meter and its
 * team's (all or none, atomically across instances on Redis), so a request refused by either counts on
 * neither. Redis outages fall back to process memory and catch up as every other limit does (one
 * mechanism: `FallbackLedger`). Every request gets the draft-8 `RateLimit` and `RateLimit-Policy`
 * headers; over the limit it fails with the 429 `Rate limit exceeded: <max> per <window>` and its
 * `Retry-After`.
 */
export function createRateLimiters(options: RateLimiterOptions = {}): RateLimiters {
  const ledger = options.ledger ?? new MemoryLedger();
  const fixed: RateSettings = { max: options.max ?? 100, windowMs: options.windowMs ?? 60_000 };
  const inForce = options.settings ?? { current: fixed };
  const callers = new CallerMeters(inForce);

  const count: KeyRateLimit['count'] = (caller, res) => {
    const now = Date.now();
    const { settings, meters, demands } = callers.measure(caller, now);
    const result = ledger.reserve(demands);
    if (result instanceof Promise)
      return result.then((settled) => countedRequest(ledger, meters, settings.windowMs, settled, res, now));
    return countedRequest(ledger, meters, settings.windowMs, result, res, now);
  };

  const perAddress: RequestHandler = (req, res, next) =>
    proceed(() => {
      const now = Date.now();
      const settings = inForce.current;
      const meters = [requestMeter('address', clientAddress(req), settings.max, settings.windowMs, now)];
      const pass = (result: ReserveResult) => decide(meters, settings.windowMs, result, res, now);
      const result = ledger.reserve(meters.map(ONE_REQUEST));
      return result instanceof Promise ? result.then(pass) : pass(result);
    }, next);

  const perKey: RequestHandler = (_req, res, next) =>
    proceed(() => count(res.locals.apiKey as CallerKey | undefined, res), next);

  return { perKey: Object.assign(perKey, { count }), perAddress, degraded: () => ledger.degraded() };
}

/** The request meters of each caller (its key's, and its team's when the team has an `rpm`) in the window in force. */
class CallerMeters {
  // Per caller object (the authenticator hands out one per key and team state), until its window ends.
  private readonly measured = new WeakMap<object, Measured>();
  private readonly anonymous = {};

  constructor(private readonly inForce: Current<RateSettings>) {}

  /** The caller's meters, built again when their window has ended or the settings changed. */
  measure(caller: CallerKey | undefined, now: number): Measured {
    const settings = this.inForce.current;
    const holder = caller ?? this.anonymous;
    const known = this.measured.get(holder);
    if (known && now < known.until && known.settings === settings) return known;
    const meters = [
      requestMeter('key', caller?.id ?? 'anonymous', caller?.rpm ?? settings.max, settings.windowMs, now),
    ];
    const team = caller?.team;
    // Counted under the team's id: a team created later under the same name starts at zero.
    if (team?.rpm !== undefined) {
      meters.push(requestMeter('team', team.name, team.rpm, settings.windowMs, now, team.id));
    }
    const fresh = { settings, meters, demands: meters.map(ONE_REQUEST), until: meters[0]!.resetAt };
    this.measured.set(holder, fresh);
    return fresh;
  }
}

/** A request reserved on its meters (or refused: {@link decide} throws), which can be given back once. */
function countedRequest(
  ledger: LimitLedger,
  meters: readonly Meter[],
  windowMs: number,
  result: ReserveResult,
  res: HeaderTarget,
  now: number,
): CountedRequest {
  const state = decide(meters, windowMs, result, res, now);
  let held = true;
  return {
    state,
    giveBack() {
      if (!held) return;
      held = false;
      ledger.adjust(meters.map((meter) => ({ counter: meter.counter, delta: -1, resetAt: meter.resetAt })));
    },
  };
}

/** Express's next step after a decision that is synchronous (the embedded ledger) or not (Redis). */
function proceed(decision: () => unknown, next: (error?: unknown) => void): void {
  try {
    const decided = decision();
    if (decided instanceof Promise) void decided.then(() => next(), next);
    else next();
  } catch (error) {
    next(error);
  }
}

/** The headers of the first meter (the key's or the address's), and the 429 of the one refused. */
function decide(
  meters: readonly Meter[],
  windowMs: number,
  result: ReserveResult,
  res: HeaderTarget,
  now: number,
): LimitState {
  const states = meters.map((meter, index) => ({
    limit: meter.limit,
    remaining: Math.max(0, meter.limit - result.used[index]!),
    resetAt: meter.resetAt,
  }));
  const own = meters[0]!;
  writeDraftRateLimitHeaders(res, own.owner, windowMs, states[0]!, now);
  if (result.refused !== undefined) {
    const meter = meters[result.refused]!;
    const retryAfter = String(Math.max(1, Math.ceil((meter.resetAt - now) / 1e3)));
    res.setHeader('Retry-After', retryAfter);
    throw rateLimited(
      `${rateLimitText(meter.limit, windowMs)}${meter.scope === 'team' ? ' (team)' : ''}`,
      { 'Retry-After': retryAfter },
      { kind: 'rpm', scope: meter.scope },
    );
  }
  return states.length === 1 ? states[0]! : tighter(states[0], states[1])!;
}

/**
 * Requests in flight at once, capped only where an operator asked for it: a key's own `concurrency`,
 * else `GATEWAY_KEY_CONCURRENCY` when set, and its team's `concurrency`. Without any, nothing is
 * counted: the providers limit requests and tokens per minute, not streams at once, and a batch job or
 * an agent fleet runs hundreds of streams on one key (clients that stop reading are cut by the client
 * write timeout, and the per-address caps bound what one address holds). One more request than a cap
 * allows is refused with 429, naming the cap, in the route's rate-limit header style and `Retry-After: 1`.
 *
 * A request holds its slots from authentication until its response closes: its last byte written (a
 * stream's included) or its client gone. Counted in this process's memory: a count shared through
 * Redis would need leases to survive an instance that dies holding slots, while a count in memory dies
 * with the requests it counts. With several instances (or workers) a key may hold up to its cap on each.
 */
export class KeyConcurrency {
  private readonly held = new Map<string, number>();

  /** @param defaultLimit `GATEWAY_KEY_CONCURRENCY`: the cap of keys without their own; none when undefined. */
  constructor(private readonly defaultLimit?: number) {}

  /** Takes the slots of `caller` (its key's, its team's) until `res` closes; throws the 429 of a cap with none left. */
  acquire(caller: CallerKey | undefined, res: ClientResponse, style?: RateLimitHeaderStyle): void {
    // The client left while the request was being authenticated: there is nothing to hold a slot for.
    if (res.destroyed) return;
    const keyLimit = caller?.concurrency ?? this.defaultLimit;
    const teamLimit = caller?.team?.concurrency;
    if (keyLimit === undefined && teamLimit === undefined) return;
    const key = keyLimit === undefined ? undefined : `key:${caller?.id ?? 'anonymous'}`;
    const team = teamLimit === undefined ? undefined : `team:${caller!.team!.id}`;
    if (key !== undefined) this.check(key, keyLimit!, style, '');
    if (team !== undefined) this.check(team, teamLimit!, style, ` (team '${caller!.team!.name}')`);
    for (const slot of [key, team]) {
      if (slot === undefined) continue;
      this.held.set(slot, (this.held.get(slot) ?? 0) + 1);
      res.once('close', () => this.release(slot));
    }
  }

  /** Requests of the key (by id) holding a slot now (counted only while the key has a cap). */
  inFlight(id: string): number {
    return this.held.get(`key:${id}`) ?? 0;
  }

  private check(slot: string, limit: number, style: RateLimitHeaderStyle | undefined, whose: string): void {
    if ((this.held.get(slot) ?? 0) < limit) return;
    const scope = whose ? 'team' : 'key';
    throw rateLimited(
      `Concurrency limit exceeded: at most ${limit} requests at once${whose}; retry when one of them has finished`,
      concurrencyRefusalHeaders(style, limit),
      { kind: 'concurrency', scope },
    );
  }

  private release(slot: string): void {
    const held = (this.held.get(slot) ?? 1) - 1;
    if (held > 0) this.held.set(slot, held);
    else this.held.delete(slot);
  }
}
