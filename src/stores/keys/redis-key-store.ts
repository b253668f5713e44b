import { conflict, isGatewayError, serviceUnavailable } from '../../core/gateway-errors.ts';
import { RedisBreaker } from '../redis/redis-breaker.ts';
import type { RedisConnection } from '../redis/redis-client.ts';
import { generateApiKey, newKeyRecord, type ApiKeyRecord, type NewKeyInput } from '../../core/api-keys.ts';
import { applyKeyChanges } from './key-records.ts';
import type { KeyChanges, KeyStore } from './key-store.ts';

// One hash tag for every key of the store: on a Cluster they share a slot, so a MULTI never crosses slots.
const PREFIX = '{gateway-keys}';
const recordKey = (hash: string) => `${PREFIX}:hash:${hash}`;
const idKey = (id: string) => `${PREFIX}:id:${id}`;
const ID_SET = `${PREFIX}:ids`;
const CACHE_LIMIT = 10_000;
// A changed key is retried this often when another writer changed it meanwhile.
const UPDATE_ATTEMPTS = 10;
// KEYS: record; ARGV: the record as read, the changed record. 1 when replaced, 0 when it changed or went meanwhile.
const REPLACE = `if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('SET', KEYS[1], ARGV[2]) return 1 end return 0`;

/** What a key looked up before is worth while Redis cannot be read (`GATEWAY_AUTH_FAIL_MODE`). */
export type AuthFailMode = 'open' | 'closed';

export interface RedisKeyStoreOptions {
  /** How long a lookup is answered from memory before Redis is asked again (500 ms). */
  readonly cacheMs?: number;
  /**
   * While Redis cannot be read: `closed` (the default) answers a key from the state last read for
   * `graceMs` after that read, then fails (503); `open` answers it from that state for as long as
   * Redis is away, so a key revoked meanwhile keeps working here.
   */
  readonly failMode?: AuthFailMode;
  /** How long after its last read from Redis a key's state is trusted in `closed` mode (30 s). */
  readonly graceMs?: number;
}

interface CachedLookup {
  readonly record: ApiKeyRecord | undefined;
  /** Answered from memory until then. */
  readonly until: number;
  /** When Redis gave this state. */
  readonly readAt: number;
}

/**
 * Keys on Redis, shared by every gateway instance: the record under the key's hash, an id → hash index
 * and the set of ids. A change or revoke of a record is a compare-and-set Lua script (retried when another
 * writer came first). Lookups are cached for `cacheMs` (500 ms by default), so a revoke or a change
 * reaches every instance within one second while most requests cost no round trip. While Redis is unreachable a key
 * looked up before keeps the state last seen (in `closed` mode for `graceMs` at most); an unseen key
 * fails (the authenticator answers 503).
 */
export class RedisKeyStore implements KeyStore {
  private readonly cache = new Map<string, CachedLookup>();
  private readonly cacheMs: number;
  private readonly failMode: AuthFailMode;
  private readonly graceMs: number;
  revision = 0;

  constructor(
    private readonly redis: RedisConnection,
    options: RedisKeyStoreOptions = {},
  ) {
    this.cacheMs = options.cacheMs ?? 500;
    this.failMode = options.failMode ?? 'closed';
    this.graceMs = options.graceMs ?? 30_000;
  }

  async create(input: NewKeyInput): Promise<{ key: string; record: ApiKeyRecord }> {
    return whileReachable(() => this.createNow(input));
  }

  async list(): Promise<ApiKeyRecord[]> {
    return whileReachable(() => this.listNow());
  }

  async revoke(id: string): Promise<boolean> {
    return whileReachable(() => this.revokeNow(id));
  }

  async update(id: string, changes: KeyChanges): Promise<ApiKeyRecord | undefined> {
    return whileReachable(() => this.changeNow(id, (record) => applyKeyChanges(record, changes)));
  }

  /**
   * Replaces a key's record with what `change` makes of it, compare-and-set (a Lua script), read again and
   * retried when another writer changed it meanwhile; undefined when no key has that id.
   */
  private async changeNow(
    id: string,
    change: (record: ApiKeyRecord) => ApiKeyRecord,
  ): Promise<ApiKeyRecord | undefined> {
    for (let attempt = 0; attempt < UPDATE_ATTEMPTS; attempt += 1) {
      const hash = await this.redis.get(idKey(id));
      const read = hash === null ? null : await this.redis.get(recordKey(hash));
      if (hash === null || read === null) return undefined;
      const changed = change(JSON.parse(read) as ApiKeyRecord);
      if ((await this.redis.eval(REPLACE, 1, recordKey(hash), read, JSON.stringify(changed))) === 1) {
        this.cache.delete(hash);
        this.revision += 1;
        return changed;
      }
    }
    throw conflict(`API key '${id}' kept changing while this change was made; try again`);
  }

  private async createNow(input: NewKeyInput): Promise<{ key: string; record: ApiKeyRecord }> {
    const key = generateApiKey();
    const record = newKeyRecord(key, input);
    const replies = await this.redis
      .multi()
      .set(recordKey(record.hash), JSON.stringify(record))
      .set(idKey(record.id), record.hash)
      .sadd(ID_SET, record.id)
      .exec();
    const failure = replies?.find(([error]) => error)?.[0];
    if (!replies || failure) throw failure ?? new Error('the key was not stored (transaction aborted)');
    this.cache.delete(record.hash);
    this.revision += 1;
    return { key, record };
  }

  private async listNow(): Promise<ApiKeyRecord[]> {
    const ids = await this.redis.smembers(ID_SET);
    if (ids.length === 0) return [];
    const hashes = (await this.redis.mget(ids.map(idKey))).filter((hash): hash is string => hash !== null);
    if (hashes.length === 0) return [];
    return (await this.redis.mget(hashes.map(recordKey)))
      .filter((value): value is string => value !== null)
      .map((value) => JSON.parse(value) as ApiKeyRecord)
      .sort((a, b) => a.createdAt.localeCompare(b.createdAt));
  }

  private async revokeNow(id: string): Promise<boolean> {
    // Compare-and-set like a change, so that a change made at the same moment cannot undo the revoke (nor the revoke
    // lose it).
    return (await this.changeNow(id, (record) => ({ ...record, revoked: true }))) !== undefined;
  }

  async findByHash(hash: string): Promise<ApiKeyRecord | undefined> {
    const now = Date.now();
    const cached = this.cache.get(hash);
    if (cached && cached.until > now) return cached.record;
    const breaker = RedisBreaker.of(this.redis);
    // Redis failed moments ago: answer from what was last seen at once rather than wait out a stall.
    if (breaker.open)
      return this.lastSeen(cached, new Error('Redis is unavailable (a command failed or timed out moments ago)'));
    let value: string | null;
    try {
      value = await this.redis.get(recordKey(hash));
    } catch (error) {
      breaker.trip();
      return this.lastSeen(cached, error);
    }
    const record = value === null ? undefined : (JSON.parse(value) as ApiKeyRecord);
    if (this.cache.size >= CACHE_LIMIT) this.cache.clear();
    this.cache.set(hash, { record, until: now + this.cacheMs, readAt: now });
    return record;
  }

  // The state last read while Redis cannot be read: kept for ever when open, for `graceMs` when closed.
  private lastSeen(cached: CachedLookup | undefined, failure: unknown): ApiKeyRecord | undefined {
    if (!cached) throw failure;
    if (this.failMode === 'closed' && Date.now() - cached.readAt > this.graceMs) {
      throw new Error(
        `Redis is unavailable and this key's state was last read ${Date.now() - cached.readAt} ms ago (trusted for ${this.graceMs} ms)`,
      );
    }
    return cached.record;
  }

  /** The connection belongs to the caller, who closes it. */
  async close(): Promise<void> {
    this.cache.clear();
  }
}

/** Runs a key write or listing; a Redis that is away or stalled answers 503 with Retry-After, not 500. */
async function whileReachable<T>(operation: () => Promise<T>): Promise<T> {
  try {
    return await operation();
  } catch (error) {
    if (isGatewayError(error)) throw error;
    // The message only: an ioredis error object may carry the connection options, password included.
    throw serviceUnavailable(
      'The key store (Redis) is unavailable; please retry shortly',
      new Error((error as Error).message),
    );
  }
}
