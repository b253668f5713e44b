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

const NAMES: Readonly<Record<RateLimitHeaderStyle, Readonly<Record<'requests' | 'tokens', readonly [limit: string, remaining: string, reset: string]>>>> = {
  openai: {
    requests: ['x-ratelimit-limit-requests', 'x-ratelimit-remaining-requests', 'x-ratelimit-reset-requests'],
    tokens: ['x-ratelimit-limit-tokens', 'x-ratelimit-remaining-tokens', 'x-ratelimit-reset-tokens'],
  },
  anthropic: {
    requests: ['anthropic-ratelimit-requests-limit', 'anthropic-ratelimit-requests-remaining', 'anthropic-ratelimit-requests-reset'],
    tokens: ['anthropic-ratelimit-tokens-limit', 'anthropic-ratelimit-tokens-remaining', 'anthropic-ratelimit-tokens-reset'],
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
export function writeRateLimitHeaders(target: HeaderTarget, style: RateLimitHeaderStyle, unit: 'requests' | 'tokens', state: LimitState, now: number): void {
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
