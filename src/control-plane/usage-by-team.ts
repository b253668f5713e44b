import type { ApiKeyRecord } from '../core/api-keys.ts';
import type { TeamRecord } from '../core/limits.ts';
import { keyInTeam } from '../core/team-identity.ts';
import { sumRows, type UsageRow } from '../usage/usage-accounting.ts';

type KeyOfTeam = Pick<ApiKeyRecord, 'id' | 'team' | 'teamId'> & { readonly createdAt?: string };

/**
 * Rows per key id (`group_by=key`) summed per team: each key's usage under the team its record names
 * now, `team: null` for keys in no team (and ids no key record has: static keys, deleted keys, the
 * anonymous id). Given the teams that exist, a key of an earlier team of a name that a later team has
 * taken (see {@link keyInTeam}) counts under null too, never under the later team; a key whose team was
 * deleted and whose name no team has taken counts under that name. Sorted by team name, null last.
 */
export function usageByTeam(
  rows: readonly UsageRow[],
  keys: readonly KeyOfTeam[],
  teams?: readonly Pick<TeamRecord, 'id' | 'name' | 'createdAt'>[],
): UsageRow[] {
  const byName = new Map(teams?.map((team) => [team.name, team]));
  const teamOf = new Map(
    keys.flatMap((key) => {
      if (key.team === undefined) return [];
      const named = byName.get(key.team);
      return named && !keyInTeam(key, named) ? [] : [[key.id, key.team] as const];
    }),
  );
  return sumRows(
    rows.map(({ key_id: keyId, ...counts }) => ({ team: teamOf.get(keyId ?? '') ?? null, ...counts })),
    'team',
  );
}
