import type { ServerResponse } from 'node:http';
import type { RequestHandler } from 'express';
import { rateLimited } from '../../core/gateway-errors.ts';
import type { CallerKey } from '../../core/exchange.ts';
import type { Meter, RateSettings } from '../../core/limits.ts';
import { clientAddress } from '../../core/client-address.ts';
import {
  tighter,
  writeDraftRateLimitHeaders,
  type HeaderTarget,
  type LimitState,
} from '../../core/rate-limit-headers.ts';
import type { CounterDemand, LimitLedger, ReserveResult } from '../../usage/limit-ledger.ts';
import { requestMeter } from '../../usage/limit-meters.ts';
import { MemoryLedger } from '../../stores/limits/memory-ledger.ts';

const UNITS: readonly (readonly [number, string])[] = [
  [86_400_000, 'day'],
  [3_600_000, 'hour'],
  [60_000, 'minute'],
  [1000, 'second'],
];

/** A window as the 429 text names it: `60000` → `1 minute`, `90000` → `90 seconds`, `7200000` → `2 hours`. */
export function describeWindow(windowMs: number): string {
  for (const [size, unit] of UNITS) {
    if (windowMs % size === 0) {
      const count = windowMs / size;
      return `${count} ${unit}${count === 1 ? '' : 's'}`;
    }
  }
  return `${windowMs} milliseconds`;
}

/** The 429 detail for a limit: `Rate limit exceeded: 100 per 1 minute`. */
export function rateLimitText(max: number, windowMs: number): string {
  return `Rate limit exceeded: ${max} per ${describeWindow(windowMs)}`;
}

export type { RateSettings };

export interface RateLimiterOptions {
  /**
   * Where requests are counted: the ledger every other limit is counted in (Redis with its in-process
   * fallback, or the embedded one). A ledger of its own in process memory when absent.
   */
  readonly ledger?: LimitLedger;
  /** The limit and window in force, read per request (a reload changes them); else `max` per `windowMs`. */
  readonly settings?: () => RateSettings;
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
  const settingsOf = options.settings ?? (() => fixed);
  // Per caller object (the authenticator hands out one per key and team state), until its window ends.
  const measured = new WeakMap<object, Measured>();
  const anonymous = {};

  const measure = (caller: CallerKey | undefined, now: number): Measured => {
    const settings = settingsOf();
    const holder = caller ?? anonymous;
    const known = measured.get(holder);
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
    measured.set(holder, fresh);
    return fresh;
  };

  const counted = (
    meters: readonly Meter[],
    windowMs: number,
    result: ReserveResult,
    res: HeaderTarget,
    now: number,
  ): CountedRequest => {
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
  };

  const count: KeyRateLimit['count'] = (caller, res) => {
    const now = Date.now();
    const { settings, meters, demands } = measure(caller, now);
    const result = ledger.reserve(demands);
    if (result instanceof Promise)
      return result.then((settled) => counted(meters, settings.windowMs, settled, res, now));
    return counted(meters, settings.windowMs, result, res, now);
  };

  const perAddress: RequestHandler = (req, res, next) =>
    proceed(() => {
      const now = Date.now();
      const settings = settingsOf();
      const meters = [requestMeter('address', clientAddress(req), settings.max, settings.windowMs, now)];
      const pass = (result: ReserveResult) => decide(meters, settings.windowMs, result, res, now);
      const result = ledger.reserve(meters.map(ONE_REQUEST));
      return result instanceof Promise ? result.then(pass) : pass(result);
    }, next);

  const perKey: RequestHandler = (_req, res, next) =>
    proceed(() => count(res.locals.apiKey as CallerKey | undefined, res), next);

  return { perKey: Object.assign(perKey, { count }), perAddress, degraded: () => ledger.degraded() };
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
