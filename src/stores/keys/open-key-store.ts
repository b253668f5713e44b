import type { Logger } from 'pino';
import type { GatewayConfig } from '../../config/gateway-config.ts';
import { createRedisClient, waitUntilReady, type RedisConnection } from '../redis/redis-client.ts';
import { FileKeyStore } from './file-key-store.ts';
import type { KeyStore } from './key-store.ts';
import { RedisKeyStore } from './redis-key-store.ts';
import { FileTeamStore } from '../teams/file-team-store.ts';
import { RedisTeamStore } from '../teams/redis-team-store.ts';
import type { TeamStore } from '../teams/team-store.ts';

/** A key store and the team store beside it, with what they hold open (a Redis connection), closed together. */
export interface OpenKeyStore {
  readonly keys: KeyStore;
  readonly teams: TeamStore;
  /** The Redis connection they use, when `redis` is set (closed with them). */
  readonly redis?: RedisConnection;
  close(): Promise<void>;
}

/**
 * The key and team stores the server of this config uses: Redis when `redis` is set, else
 * `<dataDir>/keys.json` and `<dataDir>/teams.json`.
 * For one-shot callers such as the CLI: fails when Redis does not answer within `timeoutMs`.
 */
export async function openKeyStore(config: Pick<GatewayConfig, 'redis' | 'dataDir'>, logger?: Logger, timeoutMs = 3000): Promise<OpenKeyStore> {
  if (!config.redis) {
    const keys = new FileKeyStore(config.dataDir);
    return { keys, teams: new FileTeamStore(config.dataDir), close: () => keys.close() };
  }
  const redis = createRedisClient(config.redis, logger);
  if (!(await waitUntilReady(redis, timeoutMs))) {
    redis.disconnect();
    throw new Error(`Redis is not reachable (waited ${timeoutMs} ms); the keys live there`);
  }
  const keys = new RedisKeyStore(redis);
  return {
    keys,
    teams: new RedisTeamStore(redis),
    redis,
    async close() {
      await keys.close();
      await redis.quit().catch(() => redis.disconnect());
    },
  };
}
