import type { Logger } from 'pino';
import type { GatewayConfig } from '../config/gateway-config.ts';
import type { ResponseCache } from '../core/response-cache.ts';
import type { Current } from '../core/current.ts';
import type { ResponseCaching } from '../data-plane/cache/response-caching.ts';
import type { GatewayMetrics } from '../ops/metrics.ts';
import { MemoryResponseCache } from '../stores/cache/memory-response-cache.ts';
import { RedisResponseCache } from '../stores/cache/redis-response-cache.ts';
import type { RedisConnection } from '../stores/redis/redis-client.ts';

/**
 * The response cache's store: in Redis when the gateway has one (every instance shares it), else in
 * this process's memory, bounded by the `cache.maxBytes` in force. It exists whether or not the cache
 * is on, so that a reload can turn it on or off.
 */
export function openResponseCache(
  redis: RedisConnection | undefined,
  maxBytes: Current<number | undefined>,
  metrics: GatewayMetrics,
  logger: Logger,
): ResponseCache {
  const events = { stored: metrics.cacheStored.bind(metrics), evicted: metrics.cacheEvicted.bind(metrics) };
  if (redis) return new RedisResponseCache(redis, { logger, events });
  return new MemoryResponseCache(maxBytes, events);
}

/** What the routes built from a configuration see of the cache: its store and settings; none while it is off. */
export function responseCaching(store: ResponseCache, cache: GatewayConfig['cache']): ResponseCaching | undefined {
  return cache && { store, settings: { ttlMs: cache.ttlSeconds * 1000, maxEntryBytes: cache.maxEntryBytes } };
}
