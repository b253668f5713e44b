import type { Request, RequestHandler, Response } from 'express';
import { ipKeyGenerator, MemoryStore, rateLimit, type Store } from 'express-rate-limit';
import type { Logger } from 'pino';
import { rateLimited } from '../errors/gateway-errors.ts';
import type { CallerKey } from '../routes/route-services.ts';
import type { RedisConnection } from '../store/redis-client.ts';
import { FallbackStore } from './fallback-store.ts';

const UNITS: [number, string][] = [
  [3_600_000, 'hour'],
  [60_000, 'minute'],
  [1000, 'second'],
];

/** `60000` → `1 minute`, `90000` → `90 seconds`, `7200000` → `2 hours`. */
export function describeWindow(windowMs: number): string {
  for (const [size, unit] of UNITS) {
    if (windowMs % size === 0) {
      const count = windowMs / size;
      return `${count} ${unit}${count === 1 ? '' : 's'}`;
    }
  }
  return `${windowMs} milliseconds`;
}

export interface RateLimiterOptions {
  readonly max: number;
  readonly windowMs: number;
  /** Shared counters across processes; per-process memory when absent. */
  readonly redis?: RedisConnection;
  readonly logger: Logger;
}

export interface RateLimiters {
  /** Per API key, on the model routes (after authentication). */
  readonly perKey: RequestHandler;
  /** Per client address, on the public catalog. */
  readonly perAddress: RequestHandler;
  /** True while Redis is unreachable and counting happens per process. */
  degraded(): boolean;
  shutdown(): void;
}

function limiter(options: RateLimiterOptions, store: Store, limitOf: (res: Response) => number, keyOf: (req: Request, res: Response) => string): RequestHandler {
  return rateLimit({
    windowMs: options.windowMs,
    limit: (_req, res) => limitOf(res),
    standardHeaders: 'draft-8',
    legacyHeaders: false,
    store,
    passOnStoreError: true,
    validate: { keyGeneratorIpFallback: false, ip: false, trustProxy: false, xForwardedForHeader: false },
    keyGenerator: keyOf,
    handler: (req, res, next) => {
      const info = (req as Request & { rateLimit?: { resetTime?: Date } }).rateLimit;
      const seconds = info?.resetTime ? Math.max(1, Math.ceil((info.resetTime.getTime() - Date.now()) / 1000)) : Math.ceil(options.windowMs / 1000);
      next(rateLimited(`Rate limit exceeded: ${limitOf(res)} per ${describeWindow(options.windowMs)}`, { 'Retry-After': String(seconds) }));
    },
  });
}

/**
 * The gateway's rate limits (express-rate-limit): counted in Redis when it is configured, so every
 * process enforces one limit, else in process memory.
 */
export function createRateLimiters(options: RateLimiterOptions): RateLimiters {
  const storeFor = (prefix: string): Store => (options.redis ? new FallbackStore(options.redis, prefix, options.logger) : new MemoryStore());
  const keyStore = storeFor('gw-rl:key:');
  const addressStore = storeFor('gw-rl:address:');
  const caller = (res: Response) => res.locals.apiKey as CallerKey | undefined;
  return {
    perKey: limiter(options, keyStore, (res) => caller(res)?.rpm ?? options.max, (_req, res) => caller(res)?.id ?? 'anonymous'),
    perAddress: limiter(options, addressStore, () => options.max, (req) => ipKeyGenerator(req.ip ?? req.socket.remoteAddress ?? 'unknown')),
    degraded: () => [keyStore, addressStore].some((store) => store instanceof FallbackStore && store.degraded),
    shutdown: () => [keyStore, addressStore].forEach((store) => store.shutdown?.()),
  };
}
