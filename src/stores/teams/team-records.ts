import { badRequest } from '../../core/gateway-errors.ts';
import { TEAM_FIELDS, type TeamInput, type TeamRecord } from '../../core/limits.ts';
import { isTeamName, TEAM_NAME_RULE } from '../../core/team-name.ts';
import { generateTeamId, withTeamId, type StoredTeam } from '../../core/team-identity.ts';
import { applyFieldChanges, type NamedRecordKind } from '../named-records/named-record-kind.ts';
import type { TeamChanges } from './team-store.ts';

/**
 * A team record from its input, with a new id, stamped now; the name is checked again here, whatever
 * called the store.
 */
export function newTeamRecord(input: TeamInput, now = new Date()): TeamRecord {
  if (!isTeamName(input.name)) throw badRequest(`A team name ${TEAM_NAME_RULE}`, 'name');
  return { ...withoutUndefined(input), id: generateTeamId(), name: input.name, createdAt: now.toISOString() };
}

/** Teams as the named-record stores make, change and read them. */
export const TEAM_KIND: NamedRecordKind<TeamRecord, TeamInput, TeamChanges, StoredTeam> = {
  noun: 'team',
  newRecord: (input) => newTeamRecord(input),
  applyChanges: (record, changes) => applyFieldChanges(record, changes, TEAM_FIELDS),
  fromStored: withTeamId,
};

function withoutUndefined<T extends object>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, entry]) => entry !== undefined)) as T;
}
