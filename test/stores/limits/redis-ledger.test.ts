import { expect } from 'chai';
import { Redis } from 'ioredis';
import { MemoryLedger } from '../../../src/stores/limits/embedded-ledger.ts';
import { limitKey, RedisLedger } from '../../../src/stores/limits/redis-ledger.ts';
import { createRedisClient, waitUntilReady, type RedisConnection } from '../../../src/stores/redis/redis-client.ts';
import type { CounterDemand } from '../../../src/usage/limit-ledger.ts';
import { commandCalls, TestRedisCluster, TestRedisServer } from '../../helpers/redis-server.ts';

describe('RedisLedger', function () {
  this.timeout(30_000);
  let server: TestRedisServer;
  let clients: RedisConnection[];
  let raw: Redis;

  const connect = async (): Promise<RedisConnection> => {
    const client = createRedisClient(server.url);
    expect(await waitUntilReady(client, 5000)).to.equal(true);
    clients.push(client);
    return client;
  };

  before(async () => {
    server = await TestRedisServer.start();
  });
  after(() => server.close());
  beforeEach(async () => {
    clients = [];
    raw = new Redis(server.url);
    await raw.flushall();
  });
  afterEach(() => {
    clients.forEach((client) => client.disconnect());
    raw.disconnect();
  });

  it('reserves atomically across instances: 50 concurrent reservations from three instances, room for exactly 10', async () => {
    const ledgers = await Promise.all([0, 1, 2].map(async () => new RedisLedger(await connect())));
    const resetAt = Date.now() + 3_600_000;
    // Every reservation is on both counters; only the team's limit is tight.
    const demands: CounterDemand[] = [
      { counter: 'key:k1:quota:d:x', limit: 1_000_000, want: 10, need: 10, resetAt },
      { counter: 'team:eng:quota:d:x', limit: 100, want: 10, need: 10, resetAt },
    ];
    const results = await Promise.all(
      Array.from({ length: 50 }, (_unused, index) => ledgers[index % 3]!.reserve(demands)),
    );
    const granted = results.filter((result) => result.refused === undefined);
    expect(granted).to.have.length(10);
    expect(results.filter((result) => result.refused === 1)).to.have.length(40);
    results
      .filter((result) => result.refused !== undefined)
      .forEach((result) => expect(result.reserved).to.deep.equal([0, 0]));
    // A refused reservation left the key's counter alone as well.
    expect(await raw.mget(limitKey('key:k1:quota:d:x'), limitKey('team:eng:quota:d:x'))).to.deep.equal(['100', '100']);
    expect(await ledgers[1]!.peek(['key:k1:quota:d:x', 'team:eng:quota:d:x', 'never'])).to.deep.equal([100, 100, 0]);
  });

  it('answers as the memory ledger does (capping, refusal by need), with each counter expiring when its window ends', async () => {
    const ledger = new RedisLedger(await connect());
    const memory = new MemoryLedger();
    const resetAt = Date.now() + 3_600_000;
    const sequence: CounterDemand[][] = [
      [{ counter: 'a', limit: 100, want: 70, need: 5, resetAt }],
      [
        { counter: 'a', limit: 100, want: 70, need: 5, resetAt },
        { counter: 'b', limit: 5_000_000_000_000, want: 4_000_000_000_000, need: 1, resetAt },
      ],
      [{ counter: 'a', limit: 100, want: 70, need: 1, resetAt }],
      [
        { counter: 'b', limit: 5_000_000_000_000, want: 4_000_000_000_000, need: 1_000_000_000_001, resetAt },
        { counter: 'a', limit: 100, want: 1, need: 0, resetAt },
      ],
      [{ counter: 'a', limit: 100, want: 5, need: 0, resetAt }],
    ];
    for (const demands of sequence) expect(await ledger.reserve(demands)).to.deep.equal(memory.reserve(demands));
    expect(await ledger.peek(['a', 'b'])).to.deep.equal([100, 4_000_000_000_000]);
    expect(await raw.call('PEXPIRETIME', limitKey('a'))).to.equal(resetAt);
  });

  it('sends settlements in one script call per batch, coalesced, never recreating a counter', async () => {
    const ledger = new RedisLedger(await connect());
    const resetAt = Date.now() + 3_600_000;
    await ledger.reserve([
      { counter: 'a', limit: 1000, want: 100, need: 0, resetAt },
      { counter: 'b', limit: 1000, want: 100, need: 0, resetAt },
    ]);
    const before = await commandCalls(server.port, /^(evalsha|eval)$/);
    for (let index = 0; index < 20; index += 1) ledger.adjust([{ counter: 'a', delta: -3, resetAt }]);
    ledger.adjust([
      { counter: 'b', delta: 7, resetAt },
      { counter: 'gone', delta: 50, resetAt },
      { counter: 'b', delta: 1000, resetAt: Date.now() - 1 },
    ]);
    await ledger.flush();
    expect((await commandCalls(server.port, /^(evalsha|eval)$/)) - before).to.equal(1);
    expect(await ledger.peek(['a', 'b', 'gone'])).to.deep.equal([40, 107, 0]);
    expect(await raw.exists(limitKey('gone'))).to.equal(0);
    // The settlement kept the counter's expiry.
    expect(await raw.call('PEXPIRETIME', limitKey('b'))).to.equal(resetAt);
  });
});

describe('RedisLedger on a Redis Cluster', function () {
  this.timeout(120_000);
  let cluster: TestRedisCluster;
  let client: RedisConnection;

  before(async () => {
    cluster = await TestRedisCluster.start();
    client = createRedisClient({ cluster: cluster.startupNodes });
    expect(await waitUntilReady(client, 10_000)).to.equal(true);
  });
  after(async () => {
    client.disconnect();
    await cluster.close();
  });

  it("reserves on a key's and a team's counters in one script and settles them, all in one slot", async () => {
    const ledger = new RedisLedger(client);
    const resetAt = Date.now() + 3_600_000;
    const demands: CounterDemand[] = [
      { counter: 'key:key_c1:tpm:m:1', limit: 1000, want: 300, need: 10, resetAt },
      { counter: 'team:eng:budget:d:2026-11-25', limit: 5_000_000, want: 2_000_000, need: 1000, resetAt },
    ];
    expect(await ledger.reserve(demands)).to.deep.equal({ used: [300, 2_000_000], reserved: [300, 2_000_000] });
    ledger.adjust([
      { counter: demands[0]!.counter, delta: -100, resetAt },
      { counter: demands[1]!.counter, delta: 500_000, resetAt },
    ]);
    await ledger.flush();
    expect(await ledger.peek(demands.map((demand) => demand.counter))).to.deep.equal([200, 2_500_000]);
  });
});
