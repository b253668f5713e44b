import type { TeamInput, TeamRecord } from '../../core/limits.ts';
import type { StoredTeam } from '../../core/team-identity.ts';
import { RedisNamedRecordStore } from '../named-records/redis-named-record-store.ts';
import type { RedisConnection } from '../redis/redis-client.ts';
import { TEAM_KIND } from './team-records.ts';
import type { TeamChanges, TeamStore } from './team-store.ts';

/**
 * Teams on Redis, shared by every gateway instance: each record as JSON under `{gateway-teams}:team:<name>`,
 * the set of names, and the id of the last deleted team of each name under `{gateway-teams}:deleted:<name>`
 * (see {@link RedisNamedRecordStore}).
 */
export class RedisTeamStore
  extends RedisNamedRecordStore<TeamRecord, TeamInput, TeamChanges, StoredTeam>
  implements TeamStore
{
  constructor(redis: RedisConnection) {
    super(redis, TEAM_KIND, { prefix: '{gateway-teams}', keepsDeletedIds: true });
  }

  async deletedId(name: string): Promise<string | undefined> {
    return this.deletedIdOf(name);
  }
}
