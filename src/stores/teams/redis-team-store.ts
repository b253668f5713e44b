import { conflict, isGatewayError, serviceUnavailable } from '../../core/gateway-errors.ts';
import type { TeamInput, TeamRecord } from '../../core/limits.ts';
import { withTeamId, type StoredTeam } from '../../core/team-identity.ts';
import type { RedisConnection } from '../redis/redis-client.ts';
import { applyTeamChanges, newTeamRecord } from './team-records.ts';
import type { TeamChanges, TeamStore } from './team-store.ts';

// One hash tag for every key of the store: on a Cluster they share a slot, so a script never crosses slots.
const PREFIX = '{gateway-teams}';
const teamKey = (name: string) => `${PREFIX}:team:${name}`;
const NAME_SET = `${PREFIX}:names`;
// The id of the last deleted team of a name, kept after it.
const deletedKey = (name: string) => `${PREFIX}:deleted:${name}`;
// A changed team is retried this often when another writer changed it meanwhile.
const UPDATE_ATTEMPTS = 10;

// KEYS: team, names; ARGV: record, name. 1 when created, 0 when the name is taken.
const CREATE = `if redis.call('SET', KEYS[1], ARGV[1], 'NX') then redis.call('SADD', KEYS[2], ARGV[2]) return 1 end return 0`;
// KEYS: team; ARGV: the record as read, the changed record. 1 when replaced, 0 when it changed or went meanwhile.
const REPLACE = `if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('SET', KEYS[1], ARGV[2]) return 1 end return 0`;
// KEYS: team, names, deleted; ARGV: name. 1 when removed (its id kept under deleted), 0 when there was no such team.
// A team stored before teams had ids has its name as its id.
const REMOVE = `redis.call('SREM', KEYS[2], ARGV[1])
local record = redis.call('GET', KEYS[1])
if not record then return 0 end
local ok, team = pcall(cjson.decode, record)
local id = ok and type(team) == 'table' and team.id
if type(id) ~= 'string' then id = ARGV[1] end
redis.call('DEL', KEYS[1])
redis.call('SET', KEYS[3], id)
return 1`;

/**
 * Teams on Redis, shared by every gateway instance: each record as JSON under its name, the set of
 * names, and the id of the last deleted team of each name. Writes are Lua scripts (create-if-absent,
 * compare-and-set, delete), so two admins racing never lose a change. Nothing is cached here: the
 * authenticator keeps its own short cache in front.
 */
export class RedisTeamStore implements TeamStore {
  revision = 0;

  constructor(private readonly redis: RedisConnection) {}

  async create(input: TeamInput): Promise<TeamRecord> {
    const record = newTeamRecord(input);
    const created = await whileReachable(() =>
      this.redis.eval(CREATE, 2, teamKey(record.name), NAME_SET, JSON.stringify(record), record.name),
    );
    if (created !== 1) throw conflict(`A team named '${record.name}' exists already`);
    this.revision += 1;
    return record;
  }

  async list(): Promise<TeamRecord[]> {
    return whileReachable(async () => {
      const names = await this.redis.smembers(NAME_SET);
      if (names.length === 0) return [];
      return (await this.redis.mget(names.map(teamKey)))
        .filter((value): value is string => value !== null)
        .map((value) => withTeamId(JSON.parse(value) as StoredTeam))
        .sort((a, b) => a.createdAt.localeCompare(b.createdAt) || a.name.localeCompare(b.name));
    });
  }

  async get(name: string): Promise<TeamRecord | undefined> {
    const value = await whileReachable(() => this.redis.get(teamKey(name)));
    return value === null ? undefined : withTeamId(JSON.parse(value) as StoredTeam);
  }

  async update(name: string, changes: TeamChanges): Promise<TeamRecord | undefined> {
    return whileReachable(async () => {
      for (let attempt = 0; attempt < UPDATE_ATTEMPTS; attempt += 1) {
        const read = await this.redis.get(teamKey(name));
        if (read === null) return undefined;
        const updated = applyTeamChanges(withTeamId(JSON.parse(read) as StoredTeam), changes);
        if ((await this.redis.eval(REPLACE, 1, teamKey(name), read, JSON.stringify(updated))) === 1) {
          this.revision += 1;
          return updated;
        }
      }
      throw conflict(`Team '${name}' kept changing while this change was made; try again`);
    });
  }

  async remove(name: string): Promise<boolean> {
    const keys = [teamKey(name), NAME_SET, deletedKey(name)];
    const removed = await whileReachable(() => this.redis.eval(REMOVE, keys.length, ...keys, name));
    if (removed === 1) this.revision += 1;
    return removed === 1;
  }

  async deletedId(name: string): Promise<string | undefined> {
    return (await whileReachable(() => this.redis.get(deletedKey(name)))) ?? undefined;
  }

  /** The connection belongs to the caller, who closes it. */
  async close(): Promise<void> {}
}

/** Runs a team operation; a Redis that is away or stalled answers 503 with Retry-After, not 500. */
async function whileReachable<T>(operation: () => Promise<T>): Promise<T> {
  try {
    return await operation();
  } catch (error) {
    if (isGatewayError(error)) throw error;
    // The message only: an ioredis error object may carry the connection options, password included.
    throw serviceUnavailable(
      'The team store (Redis) is unavailable; please retry shortly',
      new Error((error as Error).message),
    );
  }
}
