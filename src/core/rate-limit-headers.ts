import { createHash } from 'node:crypto';
import type { RateLimitHeaderStyle } from './route-table.ts';

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
