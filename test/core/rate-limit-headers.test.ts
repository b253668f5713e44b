import { expect } from 'chai';
import {
  openAiDuration,
  rfc3339,
  tighter,
  writeRateLimitHeaders,
  type LimitState,
} from '../../src/usage/limit-meters.ts';

import type { RateLimitHeaderStyle } from '../../src/core/route-table.ts';

/** The headers written, as name and value pairs in order. */
function rateLimitHeaders(
  style: RateLimitHeaderStyle,
  unit: 'requests' | 'tokens',
  state: LimitState,
  now: number,
): [string, string][] {
  const pairs: [string, string][] = [];
  writeRateLimitHeaders({ setHeader: (name, value) => pairs.push([name, value]) }, style, unit, state, now);
  return pairs;
}

describe('rate-limit headers', () => {
  it('writes waits as OpenAI does (Go durations)', () => {
    expect(openAiDuration(0)).to.equal('0ms');
    expect(openAiDuration(250)).to.equal('250ms');
    expect(openAiDuration(1500)).to.equal('1.5s');
    expect(openAiDuration(59_000)).to.equal('59s');
    expect(openAiDuration(360_000)).to.equal('6m0s');
    expect(openAiDuration(3_723_000)).to.equal('1h2m3s');
    expect(openAiDuration(-5)).to.equal('0ms');
  });

  it('writes Anthropic resets in RFC 3339, rounded up to the second', () => {
    expect(rfc3339(Date.UTC(2026, 10, 25, 20, 1, 0))).to.equal('2026-11-25T20:01:00Z');
    expect(rfc3339(Date.UTC(2026, 10, 25, 20, 0, 59, 1))).to.equal('2026-11-25T20:01:00Z');
  });

  it('names the headers of each style and never shows a negative remainder', () => {
    const now = Date.UTC(2026, 10, 25, 20, 0, 30);
    const state = { limit: 1000, remaining: -40, resetAt: now + 30_000 };
    expect(rateLimitHeaders('openai', 'tokens', state, now)).to.deep.equal([
      ['x-ratelimit-limit-tokens', '1000'],
      ['x-ratelimit-remaining-tokens', '0'],
      ['x-ratelimit-reset-tokens', '30s'],
    ]);
    expect(
      rateLimitHeaders('anthropic', 'requests', { limit: 7, remaining: 6, resetAt: now + 30_000 }, now),
    ).to.deep.equal([
      ['anthropic-ratelimit-requests-limit', '7'],
      ['anthropic-ratelimit-requests-remaining', '6'],
      ['anthropic-ratelimit-requests-reset', '2026-11-25T20:01:00Z'],
    ]);
  });

  it("shows the tighter of a key's and a team's limit", () => {
    const key = { limit: 100, remaining: 50, resetAt: 1 };
    const team = { limit: 1000, remaining: 20, resetAt: 2 };
    expect(tighter(key, team)).to.equal(team);
    expect(tighter(key, undefined)).to.equal(key);
    expect(tighter(undefined, team)).to.equal(team);
  });
});
