import { createHash } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import type { Request, RequestHandler, Response } from 'express';
import { MemoryStore, rateLimit, type Store } from 'express-rate-limit';
import { pino, type Logger } from 'pino';
import { rateLimited } from '../errors/gateway-errors.ts';
import type { CallerKey } from '../routes/route-services.ts';
import type { RedisConnection } from '../store/redis-client.ts';
import { FallbackStore } from './fallback-store.ts';
import { clientAddress } from '../http/client-address.ts';

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
 * The per-key limit as Express middleware (after authentication) and as {@link KeyRateLimit.count}, the
 * same decision for the model route dispatcher: both count in one store.
 */
export interface KeyRateLimit extends RequestHandler {
  /**
   * Counts one request of `caller` (`anonymous` when the routes are open), sets the RateLimit headers on
   * `res` as the middleware does, and rejects with the 429 (and its Retry-After) over the limit. A store
   * error lets the request through, as the middleware does.
   */
  count(caller: CallerKey | undefined, res: ServerResponse): Promise<void>;
}

export interface RateLimiters {
  /** Per API key id, on the model routes; runs after authentication. */
  readonly perKey: KeyRateLimit;
  /** Per client address, on the public catalog. */
  readonly perAddress: RequestHandler;
  /** True while Redis is configured but decisions are made per process. */
  degraded(): boolean;
  shutdown(): void;
}

interface LimiterSettings {
  readonly windowMs: number;
  readonly store: Store;
  readonly logger: Logger;
  readonly limitOf: (res: Response) => number;
  readonly keyOf: (req: Request, res: Response) => string;
}

function limiter(settings: LimiterSettings): RequestHandler {
  return rateLimit({
    windowMs: settings.windowMs,
    limit: (_req, res) => settings.limitOf(res),
    standardHeaders: 'draft-8',
    legacyHeaders: false,
    store: settings.store,
    passOnStoreError: true,
    logger: settings.logger,
    validate: { keyGeneratorIpFallback: false, ip: false, trustProxy: false, xForwardedForHeader: false },
    keyGenerator: settings.keyOf,
    handler: (_req, res, next) => {
      // express-rate-limit has set RateLimit, RateLimit-Policy and Retry-After on the response already.
      const retryAfter = res.getHeader('retry-after');
      const headers = retryAfter === undefined ? undefined : { 'Retry-After': String(retryAfter) };
      next(rateLimited(rateLimitText(settings.limitOf(res), settings.windowMs), headers));
    },
  });
}

/**
 * The gateway's rate limits on express-rate-limit: counted in Redis when it is configured (so all
 * processes enforce one limit, falling back to process memory while Redis is away), else in memory.
 * Over the limit, the request fails with the 429 `Rate limit exceeded: <max> per <window>`.
 */
export function createRateLimiters(options: RateLimiterOptions = {}): RateLimiters {
  const max = options.max ?? 100;
  const windowMs = options.windowMs ?? 60_000;
  const logger = options.logger ?? pino({ level: 'silent' });
  const prefix = options.prefix ?? 'gw-rl:';
  const { redis } = options;
  const storeFor = (scope: string): Store =>
    redis ? new FallbackStore(redis, { prefix: `${prefix}${scope}:`, logger, timeoutMs: options.redisTimeoutMs }) : new MemoryStore();
  const keyStore = storeFor('key');
  const addressStore = storeFor('address');
  const caller = (res: Response) => res.locals.apiKey as CallerKey | undefined;
  const stores = [keyStore, addressStore];
  // Built first: express-rate-limit initialises the store, which the direct count then shares.
  const perKeyMiddleware = limiter({ windowMs, store: keyStore, logger, limitOf: (res) => caller(res)?.rpm ?? max, keyOf: (_req, res) => caller(res)?.id ?? 'anonymous' });
  const count = directCount(keyStore, windowMs, max, logger);
  return {
    perKey: Object.assign(perKeyMiddleware, { count }),
    perAddress: limiter({ windowMs, store: addressStore, logger, limitOf: () => max, keyOf: clientAddress }),
    degraded: () => stores.some((store) => store instanceof FallbackStore && store.degraded),
    shutdown: () => stores.forEach((store) => store.shutdown?.()),
  };
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
 * The per-key decision without the middleware around it: one `increment` on the store (at most one
 * Redis round trip), headers from values computed once per key and limit.
 */
function directCount(store: Store, windowMs: number, max: number, logger: Logger): KeyRateLimit['count'] {
  const policies = new Map<string, { name: string; policy: string }>();
  return async function count(caller, res) {
    const key = caller?.id ?? 'anonymous';
    const limit = caller?.rpm ?? max;
    let totalHits: number;
    let resetTime: Date | undefined;
    try {
      ({ totalHits, resetTime } = await store.increment(key));
    } catch (error) {
      logger.error(error, 'express-rate-limit: error from store, allowing request without rate-limiting.');
      return;
    }
    const cacheKey = `${limit}:${key}`;
    let policy = policies.get(cacheKey);
    if (policy === undefined) {
      if (policies.size >= POLICY_CACHE_LIMIT) policies.clear();
      policy = policyOf(key, limit, windowMs);
      policies.set(cacheKey, policy);
    }
    const resetSeconds = resetTime ? Math.max(0, Math.ceil((resetTime.getTime() - Date.now()) / 1e3)) : Math.ceil(windowMs / 1e3);
    res.setHeader('RateLimit', `${policy.name}; r=${Math.max(limit - totalHits, 0)}; t=${resetSeconds}`);
    res.setHeader('RateLimit-Policy', policy.policy);
    if (totalHits > limit) {
      res.setHeader('Retry-After', String(resetSeconds));
      throw rateLimited(rateLimitText(limit, windowMs), { 'Retry-After': String(resetSeconds) });
    }
  };
}
