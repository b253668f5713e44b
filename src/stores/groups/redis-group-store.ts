import type { GroupInput, GroupRecord } from '../../core/limits.ts';
import { RedisNamedRecordStore } from '../named-records/redis-named-record-store.ts';
import type { RedisConnection } from '../redis/redis-client.ts';
import { GROUP_KIND } from './group-records.ts';
import type { GroupChanges, GroupStore } from './group-store.ts';

/**
 * Budget groups on Redis, shared by every gateway instance: each record as JSON under
 * `{gateway-groups}:group:<name>`, and the set of names (see {@link RedisNamedRecordStore}).
 */
export class RedisGroupStore
  extends RedisNamedRecordStore<GroupRecord, GroupInput, GroupChanges>
  implements GroupStore
{
  constructor(redis: RedisConnection) {
    super(redis, GROUP_KIND, { prefix: '{gateway-groups}' });
  }
}
