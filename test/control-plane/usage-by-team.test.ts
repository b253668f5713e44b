import { expect } from 'chai';
import { usageByTeam } from '../../src/control-plane/usage-by-team.ts';
import type { UsageRow } from '../../src/usage/usage-accounting.ts';

const row = (keyId: string, requests: number, cost: number): UsageRow => ({
  key_id: keyId,
  requests,
  input_tokens: requests * 10,
  output_tokens: requests,
  cached_tokens: 0,
  total_tokens: requests * 11,
  charged_tokens: requests * 11,
  cost_usd: cost,
  cache_hits: 0,
  saved_usd: 0,
});

describe('usage per team', () => {
  it("sums each key's row under the team its record names, sorted by team with the keys in no team last", () => {
    const rows = [
      row('key_a', 1, 0.1),
      row('key_b', 2, 0.2),
      row('key_c', 4, 0.4),
      row('key_static', 8, 0.8),
      row('key_d', 16, 1.6),
    ];
    const keys = [
      { id: 'key_a', team: 'red' },
      { id: 'key_b', team: 'red' },
      { id: 'key_c', team: 'blue' },
      { id: 'key_d', team: undefined },
    ];
    expect(usageByTeam(rows, keys)).to.deep.equal([
      {
        team: 'blue',
        requests: 4,
        input_tokens: 40,
        output_tokens: 4,
        cached_tokens: 0,
        total_tokens: 44,
        charged_tokens: 44,
        cost_usd: 0.4,
        cache_hits: 0,
        saved_usd: 0,
      },
      {
        team: 'red',
        requests: 3,
        input_tokens: 30,
        output_tokens: 3,
        cached_tokens: 0,
        total_tokens: 33,
        charged_tokens: 33,
        cost_usd: 0.3,
        cache_hits: 0,
        saved_usd: 0,
      },
      // key_d is in no team; key_static has no record (a static key): both under null.
      {
        team: null,
        requests: 24,
        input_tokens: 240,
        output_tokens: 24,
        cached_tokens: 0,
        total_tokens: 264,
        charged_tokens: 264,
        cost_usd: 2.4,
        cache_hits: 0,
        saved_usd: 0,
      },
    ]);
  });

  it('follows the team a key names now, and answers no rows for no usage', () => {
    expect(usageByTeam([row('key_a', 1, 0.1)], [{ id: 'key_a', team: 'green' }]).map((sum) => sum.team)).to.deep.equal([
      'green',
    ]);
    expect(usageByTeam([], [{ id: 'key_a', team: 'green' }])).to.deep.equal([]);
  });

  it('counts a key of an earlier team whose name a later team took under null, never under the later team', () => {
    const rows = [row('key_old', 2, 0.2), row('key_new', 1, 0.1), row('key_gone', 4, 0.4)];
    const keys = [
      { id: 'key_old', team: 'red', teamId: 'team_1111111111111111' },
      { id: 'key_new', team: 'red', teamId: 'team_2222222222222222' },
      // Its team was deleted and no team has taken the name: it stays under that name.
      { id: 'key_gone', team: 'blue', teamId: 'team_3333333333333333' },
    ];
    const teams = [{ id: 'team_2222222222222222', name: 'red', createdAt: '2026-06-01T00:00:00.000Z' }];
    expect(usageByTeam(rows, keys, teams).map((sum) => [sum.team, sum.requests])).to.deep.equal([
      ['blue', 4],
      ['red', 1],
      [null, 2],
    ]);
  });
});
