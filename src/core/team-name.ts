/**
 * What a team name may be: 1 to 64 letters, digits, `.`, `_` and `-` (safe in a URL path, a Redis key and a log line).
 */
export const TEAM_NAME = /^[A-Za-z0-9._-]{1,64}$/;

export const TEAM_NAME_RULE = 'must be 1 to 64 characters of letters, digits, ., _ and -';

export function isTeamName(value: unknown): value is string {
  return typeof value === 'string' && TEAM_NAME.test(value);
}
