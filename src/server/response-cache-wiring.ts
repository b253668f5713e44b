import type { Logger } from 'pino';
import type { GatewayConfig } from '../config/gateway-config.ts';
import type { ResponseCache } from '../core/response-cache.ts';
import type { CacheSettings, ResponseCaching } from '../data-plane/cache/response-caching.ts';
import type { GatewayMetrics } from '../ops/metrics.ts';
import { MemoryResponseCache } from '../stores/cache/memory-response-cache.ts';
import { RedisResponseCache } from '../stores/cache/redis-response-cache.ts';
import type { RedisConnection } from '../stores/redis/redis-client.ts';

/** The embedded store's bound when none is configured (the cache off, then turned on by a reload). */
const DEFAULT_MAX_BYTES = 64 * 1024 * 1024;

/**
 * The response cache's store: in Redis when the gateway has one (every instance shares it), else in
 * this process's memory, bounded by the `cache.maxBytes` in force. It exists whether or not the cache
 * is on, so that a reload can turn it on or off.
 */
export function openResponseCache(
  redis: RedisConnection | undefined,
  config: () => GatewayConfig,
  metrics: GatewayMetrics,
  logger: Logger,
): ResponseCache {
  const events = {
    stored: (bytes: number) => metrics.cacheStored(bytes),
    evicted: (bytes: number) => metrics.cacheEvicted(bytes),
  };
  if (redis) return new RedisResponseCache(redis, { logger, events });
  return new MemoryResponseCache(() => config().cache?.maxBytes ?? DEFAULT_MAX_BYTES, events);
}

/** What the routes see of the cache: its store and the settings of the configuration in force. */
export function responseCaching(store: ResponseCache, config: () => GatewayConfig): ResponseCaching {
  // Built once per configuration object, not per request.
  let seen: GatewayConfig['cache'] | null = null;
  let settings: CacheSettings | undefined;
  return {
    store,
    settings() {
      const cache = config().cache;
      if (cache !== seen) {
        seen = cache;
        settings = cache && { ttlMs: cache.ttlSeconds * 1000, maxEntryBytes: cache.maxEntryBytes };
      }
      return settings;
    },
  };
}
