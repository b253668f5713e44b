import { expect } from 'chai';
import { Redis } from 'ioredis';
import { FallbackLedger } from '../../../src/stores/limits/fallback-ledger.ts';
import { limitKey } from '../../../src/stores/limits/redis-ledger.ts';
import {
  createRedisClient,
  isReady,
  waitUntilReady,
  type RedisConnection,
} from '../../../src/stores/redis/redis-client.ts';
import type { CounterDemand } from '../../../src/usage/limit-ledger.ts';
import { captureLogs, eventually, sleep } from '../../data-plane/pipeline/guarded-app.ts';
import { TestRedisServer } from '../../helpers/redis-server.ts';

const count = (text: string, message: string) => text.split('\n').filter((line) => line.includes(message)).length;

describe('FallbackLedger', function () {
  this.timeout(60_000);
  let server: TestRedisServer;
  let client: RedisConnection;
  let ledger: FallbackLedger;
  let logs: ReturnType<typeof captureLogs>;
  let resetAt: number;
  // Ten reservations of 10 fit the limit of 100.
  const demands = (): CounterDemand[] => [{ counter: 'team:eng:quota:d:x', limit: 100, want: 10, need: 10, resetAt }];
  const reserveTimes = async (times: number): Promise<number> => {
    let granted = 0;
    for (let index = 0; index < times; index += 1)
      if ((await ledger.reserve(demands())).refused === undefined) granted += 1;
    return granted;
  };
  const redisValue = async () => {
    const raw = new Redis(server.url);
    try {
      return {
        value: await raw.get(limitKey('team:eng:quota:d:x')),
        expiresAt: await raw.call('PEXPIRETIME', limitKey('team:eng:quota:d:x')),
      };
    } finally {
      raw.disconnect();
    }
  };

  beforeEach(async () => {
    server = await TestRedisServer.start();
    client = createRedisClient(server.url);
    expect(await waitUntilReady(client, 5000)).to.equal(true);
    logs = captureLogs();
    ledger = new FallbackLedger(client, { logger: logs.logger });
    resetAt = Date.now() + 3_600_000;
  });
  afterEach(async () => {
    server.resume();
    await ledger.close();
    client.disconnect();
    await server.close();
  });

  it('never serves more than the limit across a stall (SIGSTOP), and writes what it counted meanwhile to Redis once it answers', async () => {
    const before = await reserveTimes(3);
    expect(ledger.degraded()).to.equal(false);
    server.pause();
    const during = await reserveTimes(10);
    expect(ledger.degraded()).to.equal(true);
    // Started from the 30 Redis last gave: 7 more fit.
    expect(during).to.equal(7);
    await sleep(3000);
    server.resume();
    await eventually(() => !ledger.degraded(), 'the ledger to count in Redis again', 10_000);
    const after = await reserveTimes(5);
    expect(before + during + after).to.equal(10);
    expect(after).to.equal(0);
    // 30 before, 70 caught up, plus the reservation that timed out at the stall's start and ran once Redis resumed.
    expect(Number((await redisValue()).value)).to.be.within(100, 110);
    expect(count(logs.text(), 'Redis unavailable, counting in process memory')).to.equal(1);
    expect(count(logs.text(), 'Redis back')).to.equal(1);
  });

  it('stays on memory until the catch-up is written: reservations right after the stall still count against the limit', async () => {
    await reserveTimes(5);
    server.pause();
    await reserveTimes(2);
    server.resume();
    // Whether or not the breaker has closed yet, the total holds.
    const rightAfter = await reserveTimes(10);
    expect(rightAfter).to.equal(3);
    await eventually(() => !ledger.degraded(), 'the catch-up', 10_000);
    expect(await reserveTimes(3)).to.equal(0);
  });

  it('recreates the counters a restarted Redis lost, with settlements made during the outage', async () => {
    await reserveTimes(3);
    await server.stop();
    await eventually(() => !isReady(client), 'the client to notice');
    // A settlement above what was reserved, during the outage: 35 used.
    ledger.adjust([{ counter: 'team:eng:quota:d:x', delta: 5, resetAt }]);
    expect(await reserveTimes(10)).to.equal(6);
    expect(ledger.degraded()).to.equal(true);
    expect(await ledger.peek(['team:eng:quota:d:x'])).to.deep.equal([95]);
    await server.restart();
    await eventually(() => !ledger.degraded(), 'the catch-up after the restart', 10_000);
    expect(await redisValue()).to.deep.equal({ value: '95', expiresAt: resetAt });
    expect(await reserveTimes(2)).to.equal(0);
    // Back on Redis: a release there frees room again.
    ledger.adjust([{ counter: 'team:eng:quota:d:x', delta: -5, resetAt }]);
    await ledger.flush();
    expect(await reserveTimes(2)).to.equal(1);
    expect((await redisValue()).value).to.equal('100');
  });
});
