import type { Logger } from 'pino';
import type { GatewayConfig } from '../../config/gateway-config.ts';
import { createRedisClient, waitUntilReady } from '../redis/redis-client.ts';
import { FileKeyStore } from './file-key-store.ts';
import type { KeyStore } from './key-store.ts';
import { RedisKeyStore } from './redis-key-store.ts';

/** A key store with what it holds open (a Redis connection), closed together. */
export interface OpenKeyStore {
  readonly keys: KeyStore;
  close(): Promise<void>;
}

/**
 * The key store the server of this config uses: Redis when `redis` is set, else `<dataDir>/keys.json`.
 * For one-shot callers such as the CLI: fails when Redis does not answer within `timeoutMs`.
 */
export async function openKeyStore(config: Pick<GatewayConfig, 'redis' | 'dataDir'>, logger?: Logger, timeoutMs = 3000): Promise<OpenKeyStore> {
  if (!config.redis) {
    const keys = new FileKeyStore(config.dataDir);
    return { keys, close: () => keys.close() };
  }
  const redis = createRedisClient(config.redis, logger);
  if (!(await waitUntilReady(redis, timeoutMs))) {
    redis.disconnect();
    throw new Error(`Redis is not reachable (waited ${timeoutMs} ms); the keys live there`);
  }
  const keys = new RedisKeyStore(redis);
  return {
    keys,
    async close() {
      await keys.close();
      await redis.quit().catch(() => redis.disconnect());
    },
  };
}
