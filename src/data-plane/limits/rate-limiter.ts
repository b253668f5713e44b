import { createHash } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import type { RequestHandler } from 'express';
import { MemoryStore, type Options, type Store } from 'express-rate-limit';
import { pino, type Logger } from 'pino';
import { rateLimited } from '../../core/gateway-errors.ts';
import type { CallerKey } from '../../core/exchange.ts';
import type { RedisConnection } from '../../stores/redis/redis-client.ts';
import { FallbackStore } from '../../stores/counters/fallback-store.ts';
import { clientAddress } from '../../core/client-address.ts';
import { tighter, type LimitState } from '../../core/rate-limit-headers.ts';

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

export interface RateLimiterOptions {
  /** Requests per window and counter (100 by default); a key's own `rpm` replaces it for that key. */
  readonly max?: number;
  /** 60000 by default. */
  readonly windowMs?: number;
  /** Counters shared by every process; per-process memory when absent. */
  readonly redis?: RedisConnection;
  readonly logger?: Logger;
  /** Counter key prefix in Redis, the same for every process (`gw-rl:`). */
  readonly prefix?: string;
  /** Longest wait for Redis per decision before counting in memory (250 ms). */
  readonly redisTimeoutMs?: number;
}

/**
 * The per-key limit of the model routes. {@link count} is the one decision; the function itself is the
 * same decision as Express middleware (after authentication, `res.locals.apiKey`), for the control
 * plane's guarded routes (`/v1/usage`).
 */
export interface KeyRateLimit extends RequestHandler {
  /**
   * Counts one request of `caller` (`anonymous` when the routes are open) against its key's limit and,
   * when its team has an `rpm`, the team's; sets the RateLimit headers on `res` (the key's), and
   * rejects with the 429 (and its Retry-After) of the limit exceeded. Resolves with where the tighter
   * of the two stands (undefined when the store failed: a store error lets the request through).
   */
  count(caller: CallerKey | undefined, res: ServerResponse): Promise<LimitState | undefined>;
}

export interface RateLimiters {
  /** Per API key id, on the model routes; runs after authentication. */
  readonly perKey: KeyRateLimit;
  /** Per client address, on the public catalog (Express middleware on the same decision). */
  readonly perAddress: RequestHandler;
  /** True while Redis is configured but decisions are made per process. */
  degraded(): boolean;
  shutdown(): void;
}

/**
 * One counter store (express-rate-limit's `Store`: memory, Redis, or Redis falling back to memory) behind
 * the one decision; `headers` false counts without writing the RateLimit headers (a team's count).
 */
export type LimitDecision = (key: string, limit: number, res: ServerResponse, scope?: 'key' | 'team', headers?: boolean) => Promise<LimitState | undefined>;

/**
 * The gateway's rate limits, counted in express-rate-limit's stores: in Redis when it is configured
 * (so all processes enforce one limit, falling back to process memory while Redis is away), else in
 * memory. Each request is one `increment` (at most one Redis round trip) and the draft-8 `RateLimit`
 * and `RateLimit-Policy` headers, as express-rate-limit writes them; over the limit, the request fails
 * with the 429 `Rate limit exceeded: <max> per <window>` and its `Retry-After`.
 */
export function createRateLimiters(options: RateLimiterOptions = {}): RateLimiters {
  const max = options.max ?? 100;
  const windowMs = options.windowMs ?? 60_000;
  const logger = options.logger ?? pino({ level: 'silent' });
  const prefix = options.prefix ?? 'gw-rl:';
  const { redis } = options;
  const storeFor = (scope: string): Store => {
    const store = redis ? new FallbackStore(redis, { prefix: `${prefix}${scope}:`, logger, timeoutMs: options.redisTimeoutMs }) : new MemoryStore();
    initStore(store, windowMs, logger);
    return store;
  };
  const keyStore = storeFor('key');
  const addressStore = storeFor('address');
  const stores = [keyStore, addressStore];
  const perKeyDecision = limitDecision(keyStore, windowMs, logger);
  const perAddressDecision = limitDecision(addressStore, windowMs, logger);
  const count: KeyRateLimit['count'] = async (caller, res) => {
    const teamRpm = caller?.team?.rpm;
    if (teamRpm === undefined) return perKeyDecision(caller?.id ?? 'anonymous', caller?.rpm ?? max, res);
    // Both counted at once (one Redis round trip when pipelined); either refusing refuses the request.
    const [key, team] = await Promise.allSettled([perKeyDecision(caller!.id, caller!.rpm ?? max, res), perKeyDecision(`team:${caller!.team!.name}`, teamRpm, res, 'team', false)]);
    if (key.status === 'rejected') throw key.reason;
    if (team.status === 'rejected') throw team.reason;
    return tighter(key.value, team.value);
  };
  const perKey: RequestHandler = (_req, res, next) => void count(res.locals.apiKey as CallerKey | undefined, res).then(() => next(), next);
  return {
    perKey: Object.assign(perKey, { count }),
    perAddress: (req, res, next) => void perAddressDecision(clientAddress(req), max, res).then(() => next(), next),
    degraded: () => stores.some((store) => store instanceof FallbackStore && store.degraded),
    shutdown: () => stores.forEach((store) => store.shutdown?.()),
  };
}

// What express-rate-limit does with a store it is given, before its first count.
function initStore(store: Store, windowMs: number, logger: Logger): void {
  try {
    const initialised = store.init?.({ windowMs } as Options);
    if (initialised instanceof Promise) initialised.catch((error: unknown) => logger.error(error, 'express-rate-limit: async error during store initialization.'));
  } catch (error) {
    logger.error(error, 'express-rate-limit: error during store initialization.');
  }
}

/**
 * express-rate-limit's draft-8 `RateLimit-Policy` value for a key and limit, e.g.
 * `"100-in-1min"; q=100; w=60; pk=:<partition key>:`, and the quoted name the `RateLimit` header starts with.
 */
function policyOf(key: string, limit: number, windowMs: number): { name: string; policy: string } {
  // As express-rate-limit names a policy and derives its partition key (12 hex digits of a SHA-256, base64).
  const seconds = windowMs / 1e3;
  const minutes = windowMs / (1e3 * 60);
  const hours = windowMs / (1e3 * 60 * 60);
  const days = windowMs / (1e3 * 60 * 60 * 24);
  let duration: string;
  if (seconds < 60) duration = `${seconds}sec`;
  else if (minutes < 60) duration = `${minutes}min`;
  else if (hours < 24) duration = `${hours}hr${hours > 1 ? 's' : ''}`;
  else duration = `${days}day${days > 1 ? 's' : ''}`;
  const name = `"${limit}-in-${duration}"`;
  const partitionKey = Buffer.from(createHash('sha256').update(key).digest('hex').slice(0, 12)).toString('base64');
  return { name, policy: `${name}; q=${limit}; w=${Math.ceil(windowMs / 1e3)}; pk=:${partitionKey}:` };
}

const POLICY_CACHE_LIMIT = 10_000;

/**
 * The decision on one store: one `increment` (at most one Redis round trip), headers from values
 * computed once per key and limit.
 */
function limitDecision(store: Store, windowMs: number, logger: Logger): LimitDecision {
  const policies = new Map<string, { name: string; policy: string }>();
  return async function count(key, limit, res, scope = 'key', headers = true) {
    let totalHits: number;
    let resetTime: Date | undefined;
    try {
      ({ totalHits, resetTime } = await store.increment(key));
    } catch (error) {
      logger.error(error, 'express-rate-limit: error from store, allowing request without rate-limiting.');
      return undefined;
    }
    const now = Date.now();
    const resetSeconds = resetTime ? Math.max(0, Math.ceil((resetTime.getTime() - now) / 1e3)) : Math.ceil(windowMs / 1e3);
    const state: LimitState = { limit, remaining: Math.max(limit - totalHits, 0), resetAt: resetTime?.getTime() ?? now + windowMs };
    if (!headers) {
      if (totalHits > limit) throw rateLimited(`${rateLimitText(limit, windowMs)} (team)`, { 'Retry-After': String(resetSeconds) }, { kind: 'rpm', scope });
      return state;
    }
    const cacheKey = `${limit}:${key}`;
    let policy = policies.get(cacheKey);
    if (policy === undefined) {
      if (policies.size >= POLICY_CACHE_LIMIT) policies.clear();
      policy = policyOf(key, limit, windowMs);
      policies.set(cacheKey, policy);
    }
    res.setHeader('RateLimit', `${policy.name}; r=${Math.max(limit - totalHits, 0)}; t=${resetSeconds}`);
    res.setHeader('RateLimit-Policy', policy.policy);
    if (totalHits > limit) {
      res.setHeader('Retry-After', String(resetSeconds));
      throw rateLimited(rateLimitText(limit, windowMs), { 'Retry-After': String(resetSeconds) }, { kind: 'rpm', scope });
    }
    return state;
  };
}
