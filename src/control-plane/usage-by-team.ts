import type { ApiKeyRecord } from '../core/api-keys.ts';
import { sumRows } from '../usage/key-id-aliases.ts';
import type { UsageRow } from '../usage/usage-store.ts';

/**
 * Rows per key id (`group_by=key`) summed per team: each key's usage under the team its record names
 * now, `team: null` for keys in no team (and ids no key record has: static keys, deleted keys, the
 * anonymous id). Sorted by team name, null last.
 */
export function usageByTeam(rows: readonly UsageRow[], keys: readonly Pick<ApiKeyRecord, 'id' | 'team'>[]): UsageRow[] {
  const teamOf = new Map(keys.flatMap((key) => (key.team === undefined ? [] : [[key.id, key.team] as const])));
  return sumRows(
    rows.map(({ key_id: keyId, ...counts }) => ({ team: teamOf.get(keyId ?? '') ?? null, ...counts })),
    'team',
  );
}
