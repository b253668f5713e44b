import type { CallerKey } from '../core/exchange.ts';
import type { AlertSetting, Limits, LimitPeriod, LimitScope, Meter, EndUserLimits } from '../core/limits.ts';
import { costNanoUsd } from './usage-accounting.ts';
import { createHash } from 'node:crypto';
import type { RateLimitHeaderStyle } from '../core/route-table.ts';

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

const UNITS: readonly (readonly [number, string])[] = [
  [86_400_000, 'day'],
  [3_600_000, 'hour'],
  [60_000, 'minute'],
  [1000, 'second'],
];

/** A window as the 429 text names it: `60000` → `1 minute`, `90000` → `90 seconds`, `7200000` → `2 hours`. */
export function describeWindow(windowMs: number): string {
  for (const [size, unit] of UNITS) {
    if (windowMs % size === 0) {
      const count = windowMs / size;
      return `${count} ${unit}${count === 1 ? '' : 's'}`;
    }
  }
  return `${windowMs} milliseconds`;
}

/** The 429 detail for a limit: `Rate limit exceeded: 100 per 1 minute`. */
export function rateLimitText(max: number, windowMs: number): string {
  return `Rate limit exceeded: ${max} per ${describeWindow(windowMs)}`;
}

/** Where a caller stands against one limit: what it allows, what is left, when its window ends. */
export interface LimitState {
  readonly limit: number;
  readonly remaining: number;
  /** Epoch ms. */
  readonly resetAt: number;
}

/**
 * A wait as OpenAI's `x-ratelimit-reset-*` headers write it (Go's duration format): `250ms`, `1.5s`,
 * `59s`, `6m0s`, `1h2m3s`.
 */
export function openAiDuration(ms: number): string {
  const wait = Math.max(0, Math.ceil(ms));
  if (wait < 1000) return `${wait}ms`;
  // Whole milliseconds over 1000 print with at most three decimals.
  if (wait < 60_000) return `${wait / 1000}s`;
  const totalSeconds = Math.ceil(wait / 1000);
  const hours = Math.floor(totalSeconds / 3600);
  const minutes = Math.floor((totalSeconds % 3600) / 60);
  const seconds = totalSeconds % 60;
  return hours > 0 ? `${hours}h${minutes}m${seconds}s` : `${minutes}m${seconds}s`;
}

/** An instant as Anthropic's `anthropic-ratelimit-*-reset` headers write it (RFC 3339, whole seconds). */
export function rfc3339(epochMs: number): string {
  return new Date(Math.ceil(epochMs / 1000) * 1000).toISOString().replace('.000Z', 'Z');
}

const NAMES: Readonly<
  Record<
    RateLimitHeaderStyle,
    Readonly<Record<'requests' | 'tokens', readonly [limit: string, remaining: string, reset: string]>>
  >
> = {
  openai: {
    requests: ['x-ratelimit-limit-requests', 'x-ratelimit-remaining-requests', 'x-ratelimit-reset-requests'],
    tokens: ['x-ratelimit-limit-tokens', 'x-ratelimit-remaining-tokens', 'x-ratelimit-reset-tokens'],
  },
  anthropic: {
    requests: [
      'anthropic-ratelimit-requests-limit',
      'anthropic-ratelimit-requests-remaining',
      'anthropic-ratelimit-requests-reset',
    ],
    tokens: [
      'anthropic-ratelimit-tokens-limit',
      'anthropic-ratelimit-tokens-remaining',
      'anthropic-ratelimit-tokens-reset',
    ],
  },
};

/** Where headers are set (a node:http response). */
export interface HeaderTarget {
  setHeader(name: string, value: string): unknown;
}

/**
 * Sets the headers of one limit in the style the route's clients read: OpenAI's
 * `x-ratelimit-{limit,remaining,reset}-{requests,tokens}`, or Anthropic's
 * `anthropic-ratelimit-{requests,tokens}-{limit,remaining,reset}`.
 */
export function writeRateLimitHeaders(
  target: HeaderTarget,
  style: RateLimitHeaderStyle,
  unit: 'requests' | 'tokens',
  state: LimitState,
  now: number,
): void {
  const [limit, remaining, reset] = NAMES[style][unit];
  target.setHeader(limit, String(state.limit));
  target.setHeader(remaining, String(Math.max(0, Math.floor(state.remaining))));
  target.setHeader(reset, style === 'openai' ? openAiDuration(state.resetAt - now) : rfc3339(state.resetAt));
}

/** The tighter of two states (the one with less left); either may be absent. */
export function tighter(a: LimitState | undefined, b: LimitState | undefined): LimitState | undefined {
  if (!a) return b;
  if (!b) return a;
  return b.remaining < a.remaining ? b : a;
}

/**
 * The draft-8 `RateLimit-Policy` value of an owner's request limit, e.g. `"100-in-1min"; q=100; w=60;
 * pk=:<partition key>:`, and the quoted name the `RateLimit` header starts with (as express-rate-limit
 * names a policy and derives its partition key: 12 hex digits of a SHA-256, base64).
 */
function policyOf(owner: string, limit: number, windowMs: number): { name: string; policy: string } {
  const seconds = windowMs / 1e3;
  const minutes = seconds / 60;
  const hours = minutes / 60;
  const days = hours / 24;
  let duration: string;
  if (seconds < 60) duration = `${seconds}sec`;
  else if (minutes < 60) duration = `${minutes}min`;
  else if (hours < 24) duration = `${hours}hr${hours > 1 ? 's' : ''}`;
  else duration = `${days}day${days > 1 ? 's' : ''}`;
  const name = `"${limit}-in-${duration}"`;
  const partitionKey = Buffer.from(createHash('sha256').update(owner).digest('hex').slice(0, 12)).toString('base64');
  return { name, policy: `${name}; q=${limit}; w=${Math.ceil(windowMs / 1e3)}; pk=:${partitionKey}:` };
}

const POLICY_CACHE_LIMIT = 10_000;
const policies = new Map<string, { name: string; policy: string }>();

/**
 * Sets the IETF draft-8 `RateLimit` and `RateLimit-Policy` headers of a request limit (the per-key and
 * per-address request rates carry them on every route), its policy computed once per owner and limit.
 */
export function writeDraftRateLimitHeaders(
  target: HeaderTarget,
  owner: string,
  windowMs: number,
  state: LimitState,
  now: number,
): void {
  const cacheKey = `${state.limit}:${windowMs}:${owner}`;
  let policy = policies.get(cacheKey);
  if (policy === undefined) {
    if (policies.size >= POLICY_CACHE_LIMIT) policies.clear();
    policy = policyOf(owner, state.limit, windowMs);
    policies.set(cacheKey, policy);
  }
  target.setHeader(
    'RateLimit',
    `${policy.name}; r=${Math.max(0, Math.floor(state.remaining))}; t=${Math.max(0, Math.ceil((state.resetAt - now) / 1e3))}`,
  );
  target.setHeader('RateLimit-Policy', policy.policy);
}

const CONCURRENCY_NAMES: Readonly<Record<RateLimitHeaderStyle, readonly [limit: string, remaining: string]>> = {
  openai: ['x-ratelimit-limit-concurrency', 'x-ratelimit-remaining-concurrency'],
  anthropic: ['anthropic-ratelimit-concurrency-limit', 'anthropic-ratelimit-concurrency-remaining'],
};

/**
 * The headers of a refusal for want of a concurrency slot, named as the route's other limits are
 * (`x-ratelimit-{limit,remaining}-concurrency`, or Anthropic's `anthropic-ratelimit-concurrency-*`;
 * the OpenAI spelling on a route without a client format of its own), with `Retry-After: 1`.
 */
export function concurrencyRefusalHeaders(
  style: RateLimitHeaderStyle | undefined,
  limit: number,
): Record<string, string> {
  const [limitName, remainingName] = CONCURRENCY_NAMES[style ?? 'openai'];
  return { [limitName]: String(limit), [remainingName]: '0', 'Retry-After': '1' };
}
