import { expect } from 'chai';
import { newKeyRecord, type ApiKeyRecord } from '../../src/core/api-keys.ts';
import type { Limits, LimitScope } from '../../src/core/limits.ts';
import { limitUseView } from '../../src/control-plane/limit-use.ts';
import { MemoryLedger } from '../../src/stores/limits/embedded-ledger.ts';
import { metersOfLimits, requestMeter } from '../../src/usage/limit-meters.ts';
import { MemoryTeamStore } from '../helpers/memory-team-store.ts';

const NOW = Date.parse('2026-11-23T12:00:30Z');

function key(name: string, fields: Partial<ApiKeyRecord> = {}): ApiKeyRecord {
  return { ...newKeyRecord(`sk-test-${name}-0123456789`, { name }, new Date(NOW - 86_400_000)), ...fields };
}

/** Adds `amounts` to an owner's counters open at `at`, in the order of its meters (tpm, quota d/m, budget d/m). */
function use(
  ledger: MemoryLedger,
  scope: LimitScope,
  owner: string,
  limits: Limits,
  amounts: number[],
  at = NOW,
): void {
  metersOfLimits(scope, owner, limits, at).forEach((meter, index) => {
    if (amounts[index]) ledger.add(meter.counter, amounts[index]!, meter.resetAt, at);
  });
}

/** Counts `count` requests on an owner's request counter open at `at`, as the rate limiter does. */
function requests(
  ledger: MemoryLedger,
  scope: LimitScope,
  owner: string,
  count: number,
  limit: number,
  windowMs = 60_000,
  at = NOW,
): void {
  const meter = requestMeter(scope, owner, limit, windowMs, at);
  for (let i = 0; i < count; i++)
    ledger.reserve([{ counter: meter.counter, limit: meter.limit, want: 1, need: 1, resetAt: meter.resetAt }]);
}

describe('limit use view', () => {
  const alpha = key('alpha', {
    tpm: 10_000,
    quota: { daily: 100_000, monthly: 2_000_000 },
    budget: { daily_usd: 5, monthly_usd: 50 },
    team: 'research',
    rpm: 60,
  });
  const beta = key('beta');
  const revoked = key('gone', { revoked: true, tpm: 1000 });
  const expired = key('old', { expiresAt: new Date(NOW - 1000).toISOString(), quota: { daily: 500 } });
  let ledger: MemoryLedger;
  let teams: MemoryTeamStore;

  beforeEach(() => {
    ledger = new MemoryLedger(() => NOW);
    teams = new MemoryTeamStore(
      [{ name: 'research', rpm: 600, tpm: 50_000, budget: { monthly_usd: 100 }, cache: false }, { name: 'empty' }],
      () => NOW,
    );
  });

  it('shows each non-revoked key and each team with its limits and their use now, money in USD', async () => {
    use(ledger, 'key', alpha.id, alpha, [4000, 25_000, 1_250_000, 1_234_567_890, 20_500_000_000]);
    use(ledger, 'team', 'research', { tpm: 50_000, budget: { monthly_usd: 100 } }, [7000, 99_999_999_999]);
    const view = await limitUseView({
      keys: [revoked, beta, alpha, expired],
      teams: await teams.list(),
      ledger,
      now: NOW,
    });

    expect(view).to.deep.include({ object: 'limits', metered: true, generated_at: '2026-11-23T12:00:30.000Z' });
    expect(view.keys.map((k) => k.name)).to.deep.equal(['alpha', 'beta', 'old']);
    const [a, b, old] = view.keys;
    expect(a).to.deep.include({
      id: alpha.id,
      status: 'active',
      team: 'research',
      rpm: 60,
      tpm: 10_000,
      quota: { daily: 100_000, monthly: 2_000_000 },
      budget: { daily_usd: 5, monthly_usd: 50 },
    });
    expect(a!.use).to.deep.equal([
      {
        kind: 'rpm',
        period: 'minute',
        unit: 'requests',
        limit: 60,
        used: 0,
        remaining: 60,
        resets_at: '2026-11-23T12:01:00.000Z',
      },
      {
        kind: 'tpm',
        period: 'minute',
        unit: 'tokens',
        limit: 10_000,
        used: 4000,
        remaining: 6000,
        resets_at: '2026-11-23T12:01:00.000Z',
      },
      {
        kind: 'quota',
        period: 'day',
        unit: 'tokens',
        limit: 100_000,
        used: 25_000,
        remaining: 75_000,
        resets_at: '2026-11-24T00:00:00.000Z',
      },
      {
        kind: 'quota',
        period: 'month',
        unit: 'tokens',
        limit: 2_000_000,
        used: 1_250_000,
        remaining: 750_000,
        resets_at: '2026-12-01T00:00:00.000Z',
      },
      {
        kind: 'budget',
        period: 'day',
        unit: 'usd',
        limit: 5,
        used: 1.23456789,
        remaining: 3.76543211,
        resets_at: '2026-11-24T00:00:00.000Z',
      },
      {
        kind: 'budget',
        period: 'month',
        unit: 'usd',
        limit: 50,
        used: 20.5,
        remaining: 29.5,
        resets_at: '2026-12-01T00:00:00.000Z',
      },
    ]);
    expect(b).to.deep.include({ team: null, rpm: null, tpm: null, quota: null, budget: null });
    // A key always has a request limit: without its own, the gateway's default.
    expect(b!.use).to.deep.equal([
      {
        kind: 'rpm',
        period: 'minute',
        unit: 'requests',
        limit: 100,
        used: 0,
        remaining: 100,
        resets_at: '2026-11-23T12:01:00.000Z',
      },
    ]);
    expect(old).to.deep.include({ status: 'expired' });
    expect(old!.use.map((entry) => entry.kind)).to.deep.equal(['rpm', 'quota']);
    expect(old!.use[1]).to.deep.equal({
      kind: 'quota',
      period: 'day',
      unit: 'tokens',
      limit: 500,
      used: 0,
      remaining: 500,
      resets_at: '2026-11-24T00:00:00.000Z',
    });

    expect(view.teams.map((t) => t.name)).to.deep.equal(['empty', 'research']);
    expect(view.teams[0]).to.deep.include({ key_ids: [], rpm: null, cache: null, use: [] });
    expect(view.teams[1]).to.deep.include({
      key_ids: [alpha.id],
      rpm: 600,
      tpm: 50_000,
      quota: null,
      budget: { monthly_usd: 100 },
      cache: false,
    });
    expect(view.teams[1]!.use).to.deep.equal([
      {
        kind: 'rpm',
        period: 'minute',
        unit: 'requests',
        limit: 600,
        used: 0,
        remaining: 600,
        resets_at: '2026-11-23T12:01:00.000Z',
      },
      {
        kind: 'tpm',
        period: 'minute',
        unit: 'tokens',
        limit: 50_000,
        used: 7000,
        remaining: 43_000,
        resets_at: '2026-11-23T12:01:00.000Z',
      },
      {
        kind: 'budget',
        period: 'month',
        unit: 'usd',
        limit: 100,
        used: 99.999999999,
        remaining: 0.000000001,
        resets_at: '2026-12-01T00:00:00.000Z',
      },
    ]);
  });

  it('reads every counter with one peek, and none when there is nothing to read', async () => {
    const peeked: string[][] = [];
    const spy = { peek: (counters: readonly string[]) => (peeked.push([...counters]), ledger.peek(counters)) };
    await limitUseView({ keys: [alpha, beta], teams: await teams.list(), ledger: spy, now: NOW });
    expect(peeked).to.have.length(1);
    expect(peeked[0]).to.have.length(10);
    expect(peeked[0])
      .to.include(`key:${alpha.id}:tpm:m:${Math.floor(NOW / 60_000)}`)
      .and.include('team:research:budget:mo:2026-11');
    expect(peeked[0])
      .to.include(`key:${beta.id}:rpm:m:${Math.floor(NOW / 60_000)}`)
      .and.include(`team:research:rpm:m:${Math.floor(NOW / 60_000)}`);
    peeked.length = 0;
    await limitUseView({
      keys: [],
      teams: [{ id: 'team_empty', name: 'empty', createdAt: new Date(NOW).toISOString() }],
      ledger: spy,
      now: NOW,
    });
    expect(peeked).to.deep.equal([]);
  });

  it('counts only the window open now, and never shows less than 0 remaining', async () => {
    const limits = { tpm: 100 };
    const owner = key('owner', limits);
    use(ledger, 'key', owner.id, limits, [90], NOW - 60_000);
    let view = await limitUseView({ keys: [owner], teams: [], ledger, now: NOW });
    expect(view.keys[0]!.use[1]).to.deep.include({ kind: 'tpm', used: 0, remaining: 100 });
    // Settlement charges what a request really used, which can pass the limit.
    use(ledger, 'key', owner.id, limits, [130]);
    view = await limitUseView({ keys: [owner], teams: [], ledger, now: NOW });
    expect(view.keys[0]!.use[1]).to.deep.include({ kind: 'tpm', used: 130, remaining: 0 });
  });

  it('lists the limits without use figures when no ledger is given', async () => {
    use(ledger, 'key', alpha.id, alpha, [4000]);
    const view = await limitUseView({ keys: [alpha], teams: await teams.list(), now: NOW });
    expect(view.metered).to.equal(false);
    expect(view.keys[0]!.use).to.have.length(6);
    expect(view.keys[0]!.use[0]).to.deep.equal({
      kind: 'rpm',
      period: 'minute',
      unit: 'requests',
      limit: 60,
      used: null,
      remaining: null,
      resets_at: '2026-11-23T12:01:00.000Z',
    });
    expect(view.keys[0]!.use[1]).to.deep.equal({
      kind: 'tpm',
      period: 'minute',
      unit: 'tokens',
      limit: 10_000,
      used: null,
      remaining: null,
      resets_at: '2026-11-23T12:01:00.000Z',
    });
    expect(view.teams[1]!.use.every((entry) => entry.used === null && entry.remaining === null)).to.equal(true);
  });

  it('shows the requests counted by the rate limiter in the window open now, against the rate settings in force', async () => {
    const rate = { max: 20, windowMs: 60_000 };
    requests(ledger, 'key', beta.id, 7, rate.max);
    requests(ledger, 'key', alpha.id, 60, 60);
    requests(ledger, 'team', 'research', 61, 600);
    requests(ledger, 'key', beta.id, 5, rate.max, 60_000, NOW - 60_000); // the minute before: over
    const view = await limitUseView({ keys: [alpha, beta], teams: await teams.list(), ledger, rate, now: NOW });
    const [a, b] = view.keys;
    expect(b!.use).to.deep.equal([
      {
        kind: 'rpm',
        period: 'minute',
        unit: 'requests',
        limit: 20,
        used: 7,
        remaining: 13,
        resets_at: '2026-11-23T12:01:00.000Z',
      },
    ]);
    // The key's own rpm replaces the default; a full counter leaves nothing.
    expect(a!.use[0]).to.deep.include({ kind: 'rpm', unit: 'requests', limit: 60, used: 60, remaining: 0 });
    expect(view.teams[1]!.use[0]).to.deep.include({ kind: 'rpm', limit: 600, used: 61, remaining: 539 });
    // A team without an rpm has no request limit of its own.
    expect(view.teams[0]!.use).to.deep.equal([]);
  });

  it('reads the request counters of the configured window', async () => {
    const rate = { max: 5, windowMs: 10_000 };
    requests(ledger, 'key', beta.id, 2, rate.max, rate.windowMs);
    const view = await limitUseView({ keys: [beta], teams: [], ledger, rate, now: NOW });
    expect(view.keys[0]!.use).to.deep.equal([
      {
        kind: 'rpm',
        period: 'minute',
        unit: 'requests',
        limit: 5,
        used: 2,
        remaining: 3,
        resets_at: '2026-11-23T12:00:40.000Z',
      },
    ]);
  });
});
