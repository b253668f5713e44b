import type { Request, RequestHandler, Response } from 'express';
import { ipKeyGenerator, MemoryStore, rateLimit, type Store } from 'express-rate-limit';
import { pino, type Logger } from 'pino';
import { rateLimited } from '../errors/gateway-errors.ts';
import type { CallerKey } from '../routes/route-services.ts';
import type { RedisConnection } from '../store/redis-client.ts';
import { FallbackStore } from './fallback-store.ts';

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

export interface RateLimiters {
  /** Per API key id, on the model routes; runs after authentication. */
  readonly perKey: RequestHandler;
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
  return {
    perKey: limiter({ windowMs, store: keyStore, logger, limitOf: (res) => caller(res)?.rpm ?? max, keyOf: (_req, res) => caller(res)?.id ?? 'anonymous' }),
    perAddress: limiter({ windowMs, store: addressStore, logger, limitOf: () => max, keyOf: (req) => ipKeyGenerator(req.ip ?? req.socket.remoteAddress ?? 'unknown') }),
    degraded: () => stores.some((store) => store instanceof FallbackStore && store.degraded),
    shutdown: () => stores.forEach((store) => store.shutdown?.()),
  };
}
