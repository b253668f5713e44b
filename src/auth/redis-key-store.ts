import type { RedisConnection } from '../store/redis-client.ts';
import { generateApiKey, newKeyRecord, type ApiKeyRecord, type NewKeyInput } from './api-keys.ts';
import type { KeyStore } from './key-store.ts';

// One hash tag for every key of the store, so multi-key transactions stay in one Cluster slot.
const PREFIX = 'gw-keys:{keys}';

/**
 * Keys on Redis, shared by every gateway instance. Lookups are cached for `cacheMs` (default 500 ms),
 * so a revoke reaches every instance within one second while most requests cost no Redis round trip.
 */
export class RedisKeyStore implements KeyStore {
  private readonly cache = new Map<string, { record: ApiKeyRecord | undefined; until: number }>();

  constructor(
    private readonly redis: RedisConnection,
    private readonly cacheMs = 500,
  ) {}

  async create(input: NewKeyInput): Promise<{ key: string; record: ApiKeyRecord }> {
    const key = generateApiKey();
    const record = newKeyRecord(key, input);
    const results = await this.redis
      .multi()
      .set(`${PREFIX}:record:${record.id}`, JSON.stringify(record))
      .set(`${PREFIX}:hash:${record.hash}`, record.id)
      .sadd(`${PREFIX}:ids`, record.id)
      .exec();
    const failure = results?.find(([error]) => error)?.[0];
    if (!results || failure) throw failure ?? new Error('the key was not stored');
    return { key, record };
  }

  async list(): Promise<ApiKeyRecord[]> {
    const ids = await this.redis.smembers(`${PREFIX}:ids`);
    if (!ids.length) return [];
    const values = await this.redis.mget(ids.map((id) => `${PREFIX}:record:${id}`));
    return values
      .filter((value): value is string => value !== null)
      .map((value) => JSON.parse(value) as ApiKeyRecord)
      .sort((a, b) => a.createdAt.localeCompare(b.createdAt));
  }

  async revoke(id: string): Promise<boolean> {
    const value = await this.redis.get(`${PREFIX}:record:${id}`);
    if (value === null) return false;
    await this.redis.set(`${PREFIX}:record:${id}`, JSON.stringify({ ...(JSON.parse(value) as ApiKeyRecord), revoked: true }));
    this.cache.clear();
    return true;
  }

  async findByHash(hash: string): Promise<ApiKeyRecord | undefined> {
    const now = Date.now();
    const cached = this.cache.get(hash);
    if (cached && cached.until > now) return cached.record;
    let id: string | null;
    let value: string | null;
    try {
      id = await this.redis.get(`${PREFIX}:hash:${hash}`);
      value = id === null ? null : await this.redis.get(`${PREFIX}:record:${id}`);
    } catch (error) {
      // Redis is away: a key seen before keeps working on what was last known of it.
      if (cached) return cached.record;
      throw error;
    }
    const record = value === null ? undefined : (JSON.parse(value) as ApiKeyRecord);
    if (this.cache.size > 100_000) this.cache.clear();
    this.cache.set(hash, { record, until: now + this.cacheMs });
    return record;
  }

  async close(): Promise<void> {}
}
