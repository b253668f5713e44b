import { badRequest } from '../../core/gateway-errors.ts';
import type { TeamInput, TeamRecord } from '../../core/limits.ts';
import { isTeamName, TEAM_NAME_RULE } from '../../core/team-name.ts';
import { generateTeamId } from '../../core/team-identity.ts';
import type { TeamChanges } from './team-store.ts';

/** What the stores keep of a deleted team: the id of the last team of each name, for emptying what it left. */
export interface DeletedTeam {
  readonly name: string;
  readonly id: string;
  /** ISO date-time. */
  readonly deletedAt: string;
}

// Every field of a team a change may set or remove: its limits, its cache setting, its guardrails, its group, its
// end users' limits and its alerts.
const CHANGEABLE = [
  'rpm',
  'tpm',
  'quota',
  'budget',
  'concurrency',
  'cache',
  'guardrails',
  'group',
  'end_user',
  'alerts',
] as const;

/**
 * A team record from its input, with a new id, stamped now; the name is checked again here, whatever
 * called the store.
 */
export function newTeamRecord(input: TeamInput, now = new Date()): TeamRecord {
  if (!isTeamName(input.name)) throw badRequest(`A team name ${TEAM_NAME_RULE}`, 'name');
  return { ...withoutUndefined(input), id: generateTeamId(), name: input.name, createdAt: now.toISOString() };
}

/**
 * The record with the changes made: a `null` removes the field (a limit, or the cache setting), an absent one keeps it.
 */
export function applyTeamChanges(record: TeamRecord, changes: TeamChanges): TeamRecord {
  const next: Record<string, unknown> = { ...record };
  for (const field of CHANGEABLE) {
    const value = changes[field];
    if (value === null) delete next[field];
    else if (value !== undefined) next[field] = value;
  }
  return { ...(next as unknown as TeamRecord), id: record.id, name: record.name, createdAt: record.createdAt };
}

function withoutUndefined<T extends object>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, entry]) => entry !== undefined)) as T;
}
