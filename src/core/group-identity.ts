import { randomBytes } from 'node:crypto';
import { TEAM_NAME } from './team-name.ts';

/** What a group name may be: the same characters as a team name (safe in a URL path, a Redis key and a log line). */
export const GROUP_NAME = TEAM_NAME;

export const GROUP_NAME_RULE = 'must be 1 to 64 characters of letters, digits, ., _ and -';

export function isGroupName(value: unknown): value is string {
  return typeof value === 'string' && GROUP_NAME.test(value);
}

/**
 * A new group's id: `group_` and 16 random hex digits, made at creation and never changed, so a group
 * created later under a deleted one's name starts its counters clean.
 */
export function generateGroupId(): string {
  return `group_${randomBytes(8).toString('hex')}`;
}
