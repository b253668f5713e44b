import { randomBytes } from 'node:crypto';
import type { ApiKeyRecord } from './api-keys.ts';
import type { TeamRecord } from './limits.ts';

/** A new team's id: `team_` and 16 random hex digits, made at creation and never changed. */
export function generateTeamId(): string {
  return `team_${randomBytes(8).toString('hex')}`;
}

/** A team as the stores hold it: one stored before teams had ids carries none. */
export type StoredTeam = Omit<TeamRecord, 'id'> & { readonly id?: string };

/**
 * The team with its id. A team stored before teams had ids takes its name as its id, as read, so the
 * limit counters and response cache entries it had under its name stay its own after an upgrade; every
 * team created since (one that takes a deleted team's name too) has a random id and starts clean.
 */
export function withTeamId(team: StoredTeam): TeamRecord {
  return team.id === undefined ? { ...team, id: team.name } : (team as TeamRecord);
}

/**
 * Whether a key belongs to this team rather than to an earlier team of the same name. A key given its
 * team since teams have ids carries that id. One given its team before carries only the name: it belongs to
 * a team stored before ids too, or to one created before the key itself; a later team of the name is not its.
 */
export function keyInTeam(
  key: Pick<ApiKeyRecord, 'team' | 'teamId'> & { readonly createdAt?: string },
  team: Pick<TeamRecord, 'id' | 'name' | 'createdAt'>,
): boolean {
  if (key.team !== team.name) return false;
  if (key.teamId !== undefined) return key.teamId === team.id;
  return team.id === team.name || (key.createdAt !== undefined && key.createdAt >= team.createdAt);
}
