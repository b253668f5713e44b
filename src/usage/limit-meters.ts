import type { CallerKey } from '../core/exchange.ts';
import type { AlertSetting, Limits, LimitPeriod, LimitScope, Meter } from '../core/limits.ts';
import { costNanoUsd } from './pricing.ts';

const MINUTE = 60_000;

/**
 * The window of `windowMs` holding `now`, aligned on the epoch (on the UTC minute for the default
 * minute): its tag in counter names and when it ends (epoch ms).
 */
export function fixedWindowOf(windowMs: number, now: number): { tag: string; resetAt: number } {
  const index = Math.floor(now / windowMs);
  return { tag: windowMs === MINUTE ? `m:${index}` : `w${windowMs}:${index}`, resetAt: (index + 1) * windowMs };
}

/** The UTC window of `period` holding `now`: its tag in counter names and when it ends (epoch ms). */
export function windowOf(period: LimitPeriod, now: number): { tag: string; resetAt: number } {
  if (period === 'minute') return fixedWindowOf(MINUTE, now);
  const date = new Date(now);
  const year = date.getUTCFullYear();
  const month = date.getUTCMonth();
  if (period === 'day') {
    const day = date.getUTCDate();
    return { tag: `d:${date.toISOString().slice(0, 10)}`, resetAt: Date.UTC(year, month, day + 1) };
  }
  return { tag: `mo:${date.toISOString().slice(0, 7)}`, resetAt: Date.UTC(year, month + 1, 1) };
}

/**
 * The token and money meters of one owner's limits at `now` (rpm: see {@link requestMeter}), counted under
 * `id` (a team's id; the owner itself by default).
 */
export function metersOfLimits(
  scope: LimitScope,
  owner: string,
  limits: Limits & AlertSetting,
  now: number,
  id = owner,
): Meter[] {
  const meters: Meter[] = [];
  const { alerts } = limits;
  const add = (kind: Meter['kind'], period: LimitPeriod, limit: number | undefined) => {
    if (limit === undefined) return;
    const { tag, resetAt } = windowOf(period, now);
    const counter = `${scope}:${id}:${kind}:${tag}`;
    meters.push({ scope, owner, kind, period, limit, counter, resetAt, ...(alerts && { alerts }) });
  };
  add('tpm', 'minute', limits.tpm);
  add('quota', 'day', limits.quota?.daily);
  add('quota', 'month', limits.quota?.monthly);
  add('budget', 'day', limits.budget?.daily_usd === undefined ? undefined : costNanoUsd(limits.budget.daily_usd));
  add('budget', 'month', limits.budget?.monthly_usd === undefined ? undefined : costNanoUsd(limits.budget.monthly_usd));
  return meters;
}

/** The request-rate meter of one owner: `limit` requests per `windowMs` window holding `now`, counted under `id`. */
export function requestMeter(
  scope: LimitScope,
  owner: string,
  limit: number,
  windowMs: number,
  now: number,
  id = owner,
): Meter {
  const { tag, resetAt } = fixedWindowOf(windowMs, now);
  return { scope, owner, kind: 'rpm', period: 'minute', limit, counter: `${scope}:${id}:rpm:${tag}`, resetAt };
}

const NONE: readonly Meter[] = [];
// Per caller object (the authenticator hands out one per key and team state), until its first window ends.
const cached = new WeakMap<CallerKey, { readonly meters: readonly Meter[]; readonly until: number }>();

/**
 * Every token and money meter a caller's request is measured against: the key's, then its team's, then
 * its budget group's (owner: the group's name, counted under its id). Kept per caller object until the
 * first of its windows ends, so most requests build none.
 */
export function metersOf(caller: CallerKey | undefined, now: number): readonly Meter[] {
  if (!caller) return NONE;
  const known = cached.get(caller);
  if (known && now < known.until) return known.meters;
  const meters = metersOfLimits('key', caller.id, caller, now);
  if (caller.team) meters.push(...metersOfLimits('team', caller.team.name, caller.team, now, caller.team.id));
  if (caller.group) meters.push(...metersOfLimits('group', caller.group.name, caller.group, now, caller.group.id));
  cached.set(caller, { meters, until: meters.reduce((first, meter) => Math.min(first, meter.resetAt), Infinity) });
  return meters;
}
