import { conflict, isGatewayError, serviceUnavailable } from '../../core/gateway-errors.ts';
import type { GroupInput, GroupRecord } from '../../core/limits.ts';
import type { RedisConnection } from '../redis/redis-client.ts';
import { applyGroupChanges, newGroupRecord } from './group-records.ts';
import type { GroupChanges, GroupStore } from './group-store.ts';

// One hash tag for every key of the store: on a Cluster they share a slot, so a script never crosses slots.
const PREFIX = '{gateway-groups}';
const groupKey = (name: string) => `${PREFIX}:group:${name}`;
const NAME_SET = `${PREFIX}:names`;
// A changed group is retried this often when another writer changed it meanwhile.
const UPDATE_ATTEMPTS = 10;

// KEYS: group, names; ARGV: record, name. 1 when created, 0 when the name is taken.
const CREATE = `if redis.call('SET', KEYS[1], ARGV[1], 'NX') then redis.call('SADD', KEYS[2], ARGV[2]) return 1 end return 0`;
// KEYS: group; ARGV: the record as read, the changed record. 1 when replaced, 0 when it changed or went meanwhile.
const REPLACE = `if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('SET', KEYS[1], ARGV[2]) return 1 end return 0`;
// KEYS: group, names; ARGV: name. 1 when removed, 0 when there was no such group.
const REMOVE = `redis.call('SREM', KEYS[2], ARGV[1]) return redis.call('DEL', KEYS[1])`;

/**
 * Budget groups on Redis, shared by every gateway instance: each record as JSON under its name, and the
 * set of names. Writes are Lua scripts (create-if-absent, compare-and-set, delete), so two admins racing
 * never lose a change. Nothing is cached here: the authenticator keeps its own short cache in front.
 */
export class RedisGroupStore implements GroupStore {
  revision = 0;

  constructor(private readonly redis: RedisConnection) {}

  async create(input: GroupInput): Promise<GroupRecord> {
    const record = newGroupRecord(input);
    const created = await whileReachable(() =>
      this.redis.eval(CREATE, 2, groupKey(record.name), NAME_SET, JSON.stringify(record), record.name),
    );
    if (created !== 1) throw conflict(`A group named '${record.name}' exists already`);
    this.revision += 1;
    return record;
  }

  async list(): Promise<GroupRecord[]> {
    return whileReachable(async () => {
      const names = await this.redis.smembers(NAME_SET);
      if (names.length === 0) return [];
      return (await this.redis.mget(names.map(groupKey)))
        .filter((value): value is string => value !== null)
        .map((value) => JSON.parse(value) as GroupRecord)
        .sort((a, b) => a.createdAt.localeCompare(b.createdAt) || a.name.localeCompare(b.name));
    });
  }

  async get(name: string): Promise<GroupRecord | undefined> {
    const value = await whileReachable(() => this.redis.get(groupKey(name)));
    return value === null ? undefined : (JSON.parse(value) as GroupRecord);
  }

  async update(name: string, changes: GroupChanges): Promise<GroupRecord | undefined> {
    return whileReachable(async () => {
      for (let attempt = 0; attempt < UPDATE_ATTEMPTS; attempt += 1) {
        const read = await this.redis.get(groupKey(name));
        if (read === null) return undefined;
        const updated = applyGroupChanges(JSON.parse(read) as GroupRecord, changes);
        if ((await this.redis.eval(REPLACE, 1, groupKey(name), read, JSON.stringify(updated))) === 1) {
          this.revision += 1;
          return updated;
        }
      }
      throw conflict(`Group '${name}' kept changing while this change was made; try again`);
    });
  }

  async remove(name: string): Promise<boolean> {
    const removed = await whileReachable(() => this.redis.eval(REMOVE, 2, groupKey(name), NAME_SET, name));
    if (removed === 1) this.revision += 1;
    return removed === 1;
  }

  /** The connection belongs to the caller, who closes it. */
  async close(): Promise<void> {}
}

/** Runs a group operation; a Redis that is away or stalled answers 503 with Retry-After, not 500. */
async function whileReachable<T>(operation: () => Promise<T>): Promise<T> {
  try {
    return await operation();
  } catch (error) {
    if (isGatewayError(error)) throw error;
    // The message only: an ioredis error object may carry the connection options, password included.
    throw serviceUnavailable(
      'The group store (Redis) is unavailable; please retry shortly',
      new Error((error as Error).message),
    );
  }
}
