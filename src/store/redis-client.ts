import { Cluster, Redis, type RedisOptions } from 'ioredis';
import type { Logger } from 'pino';
import type { RedisSettings } from '../config/gateway-config.ts';

export type RedisConnection = Redis | Cluster;

// Short timeouts and no offline queue: when Redis is away a command fails at once, and the caller
// falls back (rate limits to memory, usage to its queue) instead of hanging requests.
const COMMON: RedisOptions = {
  connectTimeout: 1000,
  commandTimeout: 500,
  maxRetriesPerRequest: 1,
  enableOfflineQueue: false,
  retryStrategy: (times) => Math.min(100 * 2 ** Math.min(times, 6), 2000),
};

/**
 * One Redis connection from the settings: a `redis://` / `rediss://` URL (TLS), Sentinel, or Cluster.
 * Logs once per transition when Redis goes away and when it returns.
 */
export function createRedisClient(settings: RedisSettings, logger: Logger): RedisConnection {
  let client: RedisConnection;
  if (settings.cluster?.length) {
    client = new Cluster([...settings.cluster], {
      redisOptions: { ...COMMON },
      enableOfflineQueue: false,
      clusterRetryStrategy: (times) => Math.min(100 * 2 ** Math.min(times, 6), 2000),
    });
  } else if (settings.sentinels?.length) {
    client = new Redis({ ...COMMON, sentinels: [...settings.sentinels], name: settings.sentinelName });
  } else {
    client = new Redis(settings.url!, COMMON);
  }
  let up: boolean | undefined;
  client.on('ready', () => {
    if (up === false) logger.info('redis: connection back');
    up = true;
  });
  client.on('error', (error: Error) => {
    if (up !== false) logger.warn({ err: { message: error.message } }, 'redis: unavailable; falling back until it returns');
    up = false;
  });
  return client;
}

export function isReady(client: RedisConnection): boolean {
  return client.status === 'ready';
}
