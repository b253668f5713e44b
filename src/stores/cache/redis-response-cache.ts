import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import {
  decodeCachedAnswer,
  encodeCachedAnswer,
  type CacheEvents,
  type CachedAnswer,
  type CacheTenant,
  type ResponseCache,
} from '../../core/response-cache.ts';
import { RedisBreaker } from '../redis/redis-breaker.ts';
import { isCluster, isReady, type RedisConnection } from '../redis/redis-client.ts';
import { SharedDeadline } from '../redis/shared-deadline.ts';

/** Every entry's Redis key starts with this. */
export const CACHE_KEY_PREFIX = 'gw-cache:';

// Keys per UNLINK when emptying, and the SCAN page size.
const UNLINK_BATCH = 500;

/**
 * A tenant's part of an entry's Redis key: a digest, so that a team's name (which an operator chose)
 * never needs escaping in a SCAN pattern, and no name is readable in Redis.
 */
function tenantPart(tenant: CacheTenant): string {
  return createHash('sha256').update(tenant).digest('hex').slice(0, 32);
}

export interface RedisResponseCacheOptions {
  readonly logger: Logger;
  /** Longest wait for a read before the request goes upstream as a miss (250 ms by default). */
  readonly timeoutMs?: number;
  readonly events?: CacheEvents;
}

/**
 * Response cache entries in Redis, shared by every instance: one string per entry, expiring by its TTL
 * (bounded by the operator's Redis, e.g. `maxmemory` with `volatile-lru`). A Redis that is away or slow
 * makes a read a miss and a write a no-op: the cache never fails a request. While the connection's
 * breaker is open (another user saw Redis fail), the cache does not wait for Redis at all.
 */
export class RedisResponseCache implements ResponseCache {
  private readonly breaker: RedisBreaker;
  private readonly deadline: SharedDeadline;
  private readonly tenants = new Map<CacheTenant, string>();
  private warned = false;

  constructor(
    private readonly redis: RedisConnection,
    private readonly options: RedisResponseCacheOptions,
  ) {
    this.breaker = RedisBreaker.of(redis);
    this.deadline = new SharedDeadline(options.timeoutMs ?? 250);
  }

  async get(tenant: CacheTenant, key: string): Promise<CachedAnswer | undefined> {
    if (!this.usable()) return undefined;
    try {
      const stored = await this.deadline.race(this.redis.getBuffer(this.keyOf(tenant, key)));
      return stored ? decodeCachedAnswer(stored) : undefined;
    } catch (error) {
      this.failed(error as Error);
      return undefined;
    }
  }

  set(tenant: CacheTenant, key: string, answer: CachedAnswer, ttlMs: number): void {
    if (!this.usable()) return;
    const stored = encodeCachedAnswer(answer);
    this.deadline.race(this.redis.set(this.keyOf(tenant, key), stored, 'PX', Math.max(1, Math.round(ttlMs)))).then(
      () => this.options.events?.stored?.(stored.length),
      (error: Error) => this.failed(error),
    );
  }

  delete(tenant: CacheTenant, key: string): void {
    if (!this.usable()) return;
    this.deadline.race(this.redis.unlink(this.keyOf(tenant, key))).catch((error: Error) => this.failed(error));
  }

  async clear(tenant?: CacheTenant): Promise<number> {
    const pattern = `${CACHE_KEY_PREFIX}${tenant === undefined ? '' : `${tenantPart(tenant)}:`}*`;
    const nodes = isCluster(this.redis) ? this.redis.nodes('master') : [this.redis];
    let dropped = 0;
    for (const node of nodes) {
      let cursor = '0';
      do {
        const [next, keys] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', UNLINK_BATCH);
        cursor = next;
        // One key per call: on a Cluster, keys of one page may sit in different slots.
        if (keys.length)
          dropped += (await Promise.all(keys.map((found) => node.unlink(found)))).reduce(
            (sum, count) => sum + count,
            0,
          );
      } while (cursor !== '0');
    }
    return dropped;
  }

  async close(): Promise<void> {}

  private keyOf(tenant: CacheTenant, key: string): string {
    let part = this.tenants.get(tenant);
    if (part === undefined) {
      if (this.tenants.size >= 10_000) this.tenants.clear();
      part = tenantPart(tenant);
      this.tenants.set(tenant, part);
    }
    return `${CACHE_KEY_PREFIX}${part}:${key}`;
  }

  private usable(): boolean {
    return isReady(this.redis) && !this.breaker.open;
  }

  private failed(error: Error): void {
    this.breaker.trip();
    if (this.warned) return;
    this.warned = true;
    this.options.logger.warn(
      { reason: error.message },
      'response cache: Redis did not answer; requests go upstream until it does',
    );
    setTimeout(() => (this.warned = false), 60_000).unref();
  }
}
