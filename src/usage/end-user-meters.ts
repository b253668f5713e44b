import { createHash } from 'node:crypto';
import type { CallerKey } from '../core/exchange.ts';
import type { EndUserLimits, Meter } from '../core/limits.ts';
import { metersOfLimits, requestMeter, windowOf } from './limit-meters.ts';

// An end user's requests are counted per UTC minute (not the gateway's rate-limit window).
const MINUTE_MS = 60_000;

/** The bucket the end users past the day's cap of a key (or team) share. */
export const OTHER_END_USERS = '(other end users)';

/** Whose end-user limits apply: a key's (for each of its end users) or a team's (for each end user of its keys). */
export interface EndUserHolder {
  readonly scope: 'key' | 'team';
  /** The key id or the team's id: what the counters are kept under. */
  readonly id: string;
  /** The key id or the team's name: what refusals name. */
  readonly name: string;
  readonly limits: EndUserLimits;
}

/** The 16 hex digits of an end user's SHA-256 that its counters carry (never the end user itself). */
export const endUserDigest = (endUser: string): string =>
  createHash('sha256').update(endUser).digest('hex').slice(0, 16);

/** The owners of per-end-user limits a caller's request meets: its key's, then its team's. */
export function endUserHolders(caller: CallerKey | undefined): EndUserHolder[] {
  const holders: EndUserHolder[] = [];
  if (caller?.end_user) holders.push({ scope: 'key', id: caller.id, name: caller.id, limits: caller.end_user });
  const team = caller?.team;
  if (team?.end_user) holders.push({ scope: 'team', id: team.id, name: team.name, limits: team.end_user });
  return holders;
}

/** The roster of a holder's end users on the UTC day of `now` (see `EndUserRoster`). */
export function rosterOf(holder: EndUserHolder, now: number): { roster: string; resetAt: number } {
  const { tag, resetAt } = windowOf('day', now);
  return { roster: `end_user:${holder.scope}:${holder.id}:roster:${tag}`, resetAt };
}

/**
 * The meters of one end user (`owner`: the end user, the key id when the request named none, or
 * {@link OTHER_END_USERS}) under a holder's end-user limits at `now`: requests and tokens per UTC minute,
 * charged tokens and money per UTC day and month, each counted as
 * `end_user:<key|team>:<holder id>:<digest>:<kind>:<window tag>`.
 */
export function endUserMeters(holder: EndUserHolder, owner: string, now: number): Meter[] {
  const { limits } = holder;
  const id = `${holder.scope}:${holder.id}:${endUserDigest(owner)}`;
  const endUserOf = { scope: holder.scope, owner: holder.name };
  const meters = metersOfLimits('end_user', owner, limits, now, id);
  if (limits.rpm !== undefined) meters.unshift(requestMeter('end_user', owner, limits.rpm, MINUTE_MS, now, id));
  return meters.map((meter) => ({ ...meter, endUserOf }));
}
