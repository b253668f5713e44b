import { expect } from 'chai';
import { pino } from 'pino';
import { Writable } from 'node:stream';
import { endUserDigest, endUserHolders, endUserMeters, OTHER_END_USERS } from '../../src/usage/limit-meters.ts';
import { EndUserRoster } from '../../src/usage/end-user-roster.ts';
import { demandsFor, Reservation } from '../../src/usage/reservation.ts';
import { MemoryLedger } from '../../src/stores/limits/embedded-ledger.ts';
import { RedisLedger } from '../../src/stores/limits/redis-ledger.ts';
import { createRedisClient, waitUntilReady, type RedisConnection } from '../../src/stores/redis/redis-client.ts';
import type { CounterChange } from '../../src/usage/limit-ledger.ts';
import { TestRedisServer } from '../helpers/redis-server.ts';

const NOW = Date.UTC(2026, 10, 25, 18, 0, 15);

function capture() {
  const lines: Record<string, unknown>[] = [];
  const logger = pino(
    { level: 'info' },
    new Writable({ write: (chunk, _encoding, done) => (lines.push(JSON.parse(String(chunk))), done()) }),
  );
  return { logger, lines };
}

describe('end-user meters', () => {
  const caller = {
    id: 'key_1',
    end_user: { rpm: 5, tpm: 900, quota: { daily: 1000, monthly: 9000 }, budget: { daily_usd: 0.5, monthly_usd: 2 } },
    team: { id: 'team_9', name: 'research', end_user: { budget: { daily_usd: 1 } } },
  };

  it("are the key's end-user limits, then its team's, counted per end user under the key's or team's id", () => {
    const [key, team] = endUserHolders(caller);
    expect(key).to.deep.include({ scope: 'key', id: 'key_1', name: 'key_1' });
    expect(team).to.deep.include({ scope: 'team', id: 'team_9', name: 'research' });
    expect(endUserHolders({ id: 'k' })).to.deep.equal([]);
    const digest = endUserDigest('alice');
    expect(digest).to.match(/^[0-9a-f]{16}$/);
    const meters = endUserMeters(key!, 'alice', NOW);
    expect(meters.map((meter) => meter.counter)).to.deep.equal([
      `end_user:key:key_1:${digest}:rpm:m:${Math.floor(NOW / 60_000)}`,
      `end_user:key:key_1:${digest}:tpm:m:${Math.floor(NOW / 60_000)}`,
      `end_user:key:key_1:${digest}:quota:d:2026-11-25`,
      `end_user:key:key_1:${digest}:quota:mo:2026-11`,
      `end_user:key:key_1:${digest}:budget:d:2026-11-25`,
      `end_user:key:key_1:${digest}:budget:mo:2026-11`,
    ]);
    expect(meters[0]).to.deep.include({
      scope: 'end_user',
      owner: 'alice',
      kind: 'rpm',
      limit: 5,
      endUserOf: { scope: 'key', owner: 'key_1' },
    });
    expect(meters[4]).to.deep.include({ limit: 500_000_000, resetAt: Date.UTC(2026, 10, 26) });
    expect(endUserMeters(team!, 'alice', NOW).map((meter) => meter.counter)).to.deep.equal([
      `end_user:team:team_9:${digest}:budget:d:2026-11-25`,
    ]);
    expect(endUserMeters(key!, 'bob', NOW)[0]!.counter, 'each end user its own counters').to.not.equal(
      meters[0]!.counter,
    );
  });

  it('reserve one request on an rpm meter, which settlement never moves', () => {
    const meters = endUserMeters(endUserHolders(caller)[0]!, 'alice', NOW);
    const pricing = { input: 1, cachedInput: 0.1, output: 4 };
    const demands = demandsFor(meters, { inputTokens: 10, outputTokens: 90 }, pricing);
    expect(demands.map((demand) => [demand.want, demand.need])).to.deep.equal([
      [1, 1],
      [100, 100],
      [100, 100],
      [100, 100],
      [370_000, 370_000],
      [370_000, 370_000],
    ]);
    const changes: CounterChange[] = [];
    const reserved = demands.map((demand) => demand.want);
    const reservation = new Reservation({ adjust: (made) => changes.push(...made) }, meters, reserved);
    reservation.settle(undefined);
    expect(changes.map((change) => change.counter)).to.not.include(meters[0]!.counter);
    expect(changes).to.have.length(5);
  });
});

describe('end-user roster (GATEWAY_END_USERS_PER_KEY)', () => {
  const holder = { scope: 'key' as const, id: 'key_1', name: 'key_1', limits: { rpm: 1 } };

  it('gives the first `cap` end users of a day their own counters, the later ones the shared bucket, with one warning', () => {
    const { logger, lines } = capture();
    let now = NOW;
    const ledger = new MemoryLedger(() => now);
    const roster = new EndUserRoster(ledger, logger, 2);
    expect(roster.bucket(holder, 'alice', now)).to.equal('alice');
    expect(roster.bucket(holder, 'bob', now)).to.equal('bob');
    expect(roster.bucket(holder, 'carol', now)).to.equal(OTHER_END_USERS);
    expect(roster.bucket(holder, 'dave', now)).to.equal(OTHER_END_USERS);
    expect(roster.bucket(holder, 'alice', now), 'a member stays one').to.equal('alice');
    expect(new EndUserRoster(ledger, logger, 2).bucket(holder, 'erin', now), 'another instance on the ledger').to.equal(
      OTHER_END_USERS,
    );
    expect(
      roster.bucket({ ...holder, scope: 'team', id: 'team_1', name: 'research' }, 'carol', now),
      'per team apart',
    ).to.equal('carol');
    const warnings = lines.filter((line) => String(line.msg).startsWith('end users:'));
    expect(warnings).to.have.length(1);
    expect(warnings[0]).to.deep.include({ key_id: 'key_1', end_users: 2 });
    now = Date.UTC(2026, 10, 26, 0, 0, 1);
    expect(roster.bucket(holder, 'carol', now), 'a new UTC day starts a new roster').to.equal('carol');
  });

  it('is kept with the day counters of the embedded ledger (its counters end in the day tag)', () => {
    const ledger = new MemoryLedger(() => NOW);
    new EndUserRoster(ledger, capture().logger, 1).bucket(holder, 'alice', NOW);
    const names = [...(ledger as unknown as { counters: Map<string, unknown> }).counters.keys()];
    expect(names.length).to.equal(2);
    for (const name of names) expect(name).to.match(/:d:2026-11-25$/);
  });

  describe('on Redis', function () {
    this.timeout(30_000);
    let redis: TestRedisServer;
    let clients: RedisConnection[];
    before(async () => {
      redis = await TestRedisServer.start();
      clients = [0, 1, 2].map(() => createRedisClient(redis.url));
      await Promise.all(clients.map((client) => waitUntilReady(client, 10_000)));
    });
    after(async () => {
      await Promise.all(clients.map((client) => client.quit()));
      await redis.close();
    });

    it('admits exactly `cap` distinct end users across three instances racing, and warns once among them', async () => {
      const logs = [capture(), capture(), capture()];
      const rosterOf = (client: RedisConnection, index: number) =>
        new EndUserRoster(new RedisLedger(client), logs[index]!.logger, 10);
      const rosters = clients.map(rosterOf);
      const now = Date.now();
      const owners = await Promise.all(
        Array.from({ length: 30 }, (_, index) => rosters[index % 3]!.bucket(holder, `user-${index}`, now)),
      );
      expect(owners.filter((owner) => owner !== OTHER_END_USERS)).to.have.length(10);
      expect(owners.filter((owner) => owner === OTHER_END_USERS)).to.have.length(20);
      const warnings = logs.flatMap((log) => log.lines).filter((line) => String(line.msg).startsWith('end users:'));
      expect(warnings).to.have.length(1);
      const admitted = owners.find((owner) => owner !== OTHER_END_USERS)!;
      const fresh = new EndUserRoster(new RedisLedger(clients[0]!), capture().logger, 10);
      expect(await fresh.bucket(holder, admitted, now), 'a member on one instance is one on every instance').to.equal(
        admitted,
      );
      const ttl = await clients[0]!.pttl(
        `gw-lim:{gw-lim}:end_user:key:key_1:roster:d:${new Date(now).toISOString().slice(0, 10)}`,
      );
      expect(ttl).to.be.within(1, 86_400_000);
    });
  });
});
