import { serviceUnavailable } from '../../core/gateway-errors.ts';
import type { RedisConnection } from '../redis/redis-client.ts';
import { newServiceToken, type NewServiceToken, type ServiceTokenRecord, type TokenStore } from './token-store.ts';

const TOKENS = '{gateway-tokens}:records';
// KEYS: records; ARGV: id. The record marked revoked; 0 when there is none.
const REVOKE = `local value = redis.call('HGET', KEYS[1], ARGV[1])
if not value then return 0 end
local record = cjson.decode(value)
record['revoked'] = true
redis.call('HSET', KEYS[1], ARGV[1], cjson.encode(record))
return 1`;

/** Service tokens on Redis, shared by every instance: one hash of id → record (hashes of the tokens only). */
export class RedisTokenStore implements TokenStore {
  constructor(private readonly redis: RedisConnection) {}

  async create(input: NewServiceToken) {
    const made = newServiceToken(input);
    await this.call(() => this.redis.hset(TOKENS, made.record.id, JSON.stringify(made.record)));
    return made;
  }

  async list(): Promise<ServiceTokenRecord[]> {
    const all = await this.call(() => this.redis.hvals(TOKENS));
    return all
      .map((value) => JSON.parse(value) as ServiceTokenRecord)
      .sort((a, b) => a.createdAt.localeCompare(b.createdAt));
  }

  async revoke(id: string): Promise<boolean> {
    return (await this.call(() => this.redis.eval(REVOKE, 1, TOKENS, id))) === 1;
  }

  async findByHash(hash: string): Promise<ServiceTokenRecord | undefined> {
    return (await this.list()).find((record) => record.hash === hash);
  }

  async close(): Promise<void> {}

  private async call<T>(command: () => Promise<T>): Promise<T> {
    try {
      return await command();
    } catch (error) {
      // The message only: an ioredis error object may carry the connection options, password included.
      throw serviceUnavailable(
        'Service tokens cannot be read right now (Redis is unreachable); please retry shortly',
        new Error((error as Error).message),
      );
    }
  }
}
