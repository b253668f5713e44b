import { conflict, isGatewayError, serviceUnavailable } from '../../core/gateway-errors.ts';
import type { RedisConnection } from '../redis/redis-client.ts';
import { capitalised, type NamedRecord, type NamedRecordKind } from './named-record-kind.ts';

// A changed record is retried this often when another writer changed it meanwhile.
const UPDATE_ATTEMPTS = 10;

// KEYS: record, names; ARGV: record, name. 1 when created, 0 when the name is taken.
const CREATE = `if redis.call('SET', KEYS[1], ARGV[1], 'NX') then redis.call('SADD', KEYS[2], ARGV[2]) return 1 end return 0`;
// KEYS: record; ARGV: the record as read, the changed record. 1 when replaced, 0 when it changed or went meanwhile.
const REPLACE = `if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('SET', KEYS[1], ARGV[2]) return 1 end return 0`;
// KEYS: record, names; ARGV: name. 1 when removed, 0 when there was no such record.
const REMOVE = `redis.call('SREM', KEYS[2], ARGV[1]) return redis.call('DEL', KEYS[1])`;
// KEYS: record, names, deleted; ARGV: name. 1 when removed (its id kept under deleted), 0 when there was no such
// record. A record stored before records had ids has its name as its id.
const REMOVE_KEEPING_ID = `redis.call('SREM', KEYS[2], ARGV[1])
local record = redis.call('GET', KEYS[1])
if not record then return 0 end
local ok, stored = pcall(cjson.decode, record)
local id = ok and type(stored) == 'table' and stored.id
if type(id) ~= 'string' then id = ARGV[1] end
redis.call('DEL', KEYS[1])
redis.call('SET', KEYS[3], id)
return 1`;

/** Where a Redis store keeps its records, and whether it remembers the ids of removed ones. */
export interface RedisNamedRecordLayout {
  /**
   * The hash tag every key of the store starts with (`{gateway-teams}`): on a Cluster they share a slot, so a
   * script never crosses slots. A record lives under `<prefix>:<noun>:<name>`, the names in `<prefix>:names`.
   */
  readonly prefix: string;
  /** Whether a removal keeps the record's id under `<prefix>:deleted:<name>` (see {@link deletedIdOf}). */
  readonly keepsDeletedIds?: boolean;
}

/**
 * Named records on Redis, shared by every gateway instance: each record as JSON under its name, and the set of
 * names. Writes are Lua scripts (create-if-absent, compare-and-set, delete), so two admins racing never lose a
 * change. Nothing is cached here: the authenticator keeps its own short cache in front.
 */
export class RedisNamedRecordStore<R extends NamedRecord, I, C, S = R> {
  revision = 0;
  private readonly nameSet: string;

  constructor(
    private readonly redis: RedisConnection,
    private readonly kind: NamedRecordKind<R, I, C, S>,
    private readonly layout: RedisNamedRecordLayout,
  ) {
    this.nameSet = `${layout.prefix}:names`;
  }

  async create(input: I): Promise<R> {
    const record = this.kind.newRecord(input);
    const created = await this.whileReachable(() =>
      this.redis.eval(CREATE, 2, this.recordKey(record.name), this.nameSet, JSON.stringify(record), record.name),
    );
    if (created !== 1) throw conflict(`A ${this.kind.noun} named '${record.name}' exists already`);
    this.revision += 1;
    return record;
  }

  async list(): Promise<R[]> {
    return this.whileReachable(async () => {
      const names = await this.redis.smembers(this.nameSet);
      if (names.length === 0) return [];
      return (await this.redis.mget(names.map((name) => this.recordKey(name))))
        .filter((value): value is string => value !== null)
        .map((value) => this.parse(value))
        .sort((a, b) => a.createdAt.localeCompare(b.createdAt) || a.name.localeCompare(b.name));
    });
  }

  async get(name: string): Promise<R | undefined> {
    const value = await this.whileReachable(() => this.redis.get(this.recordKey(name)));
    return value === null ? undefined : this.parse(value);
  }

  async update(name: string, changes: C): Promise<R | undefined> {
    return this.whileReachable(async () => {
      for (let attempt = 0; attempt < UPDATE_ATTEMPTS; attempt += 1) {
        const read = await this.redis.get(this.recordKey(name));
        if (read === null) return undefined;
        const updated = this.kind.applyChanges(this.parse(read), changes);
        if ((await this.redis.eval(REPLACE, 1, this.recordKey(name), read, JSON.stringify(updated))) === 1) {
          this.revision += 1;
          return updated;
        }
      }
      throw conflict(`${capitalised(this.kind.noun)} '${name}' kept changing while this change was made; try again`);
    });
  }

  async remove(name: string): Promise<boolean> {
    const removed = await this.whileReachable(() =>
      this.layout.keepsDeletedIds
        ? this.redis.eval(REMOVE_KEEPING_ID, 3, this.recordKey(name), this.nameSet, this.deletedKey(name), name)
        : this.redis.eval(REMOVE, 2, this.recordKey(name), this.nameSet, name),
    );
    if (removed === 1) this.revision += 1;
    return removed === 1;
  }

  /** The connection belongs to the caller, who closes it. */
  async close(): Promise<void> {}

  /** The id of the last removed record of that name, when the layout keeps them (undefined when none was). */
  protected async deletedIdOf(name: string): Promise<string | undefined> {
    return (await this.whileReachable(() => this.redis.get(this.deletedKey(name)))) ?? undefined;
  }

  private recordKey(name: string): string {
    return `${this.layout.prefix}:${this.kind.noun}:${name}`;
  }

  private deletedKey(name: string): string {
    return `${this.layout.prefix}:deleted:${name}`;
  }

  private parse(value: string): R {
    return this.kind.fromStored(JSON.parse(value) as S);
  }

  /** Runs an operation; a Redis that is away or stalled answers 503 with Retry-After, not 500. */
  private async whileReachable<T>(operation: () => Promise<T>): Promise<T> {
    try {
      return await operation();
    } catch (error) {
      if (isGatewayError(error)) throw error;
      // The message only: an ioredis error object may carry the connection options, password included.
      throw serviceUnavailable(
        `The ${this.kind.noun} store (Redis) is unavailable; please retry shortly`,
        new Error((error as Error).message),
      );
    }
  }
}
