import { expect } from 'chai';
import type { Options } from 'express-rate-limit';
import { FallbackStore } from '../../../src/stores/counters/fallback-store.ts';
import { createRedisClient, waitUntilReady, type RedisConnection } from '../../../src/stores/redis/redis-client.ts';
import { captureLogs, eventually, sleep } from '../../data-plane/auth/guarded-app.ts';
import { TestRedisServer } from '../../helpers/redis-server.ts';

describe('FallbackStore across a stall', function () {
  this.timeout(60_000);
  let server: TestRedisServer;
  let client: RedisConnection;
  let store: FallbackStore;

  beforeEach(async () => {
    server = await TestRedisServer.start();
    client = createRedisClient(server.url);
    expect(await waitUntilReady(client, 5000)).to.equal(true);
    store = new FallbackStore(client, { prefix: 'gw-rl:key:', logger: captureLogs().logger });
    store.init({ windowMs: 60_000 } as Options);
  });
  afterEach(async () => {
    server.resume();
    store.shutdown();
    client.disconnect();
    await server.close();
  });

  /** Requests of `key` let through by a limit of 20 out of `times`. */
  const serve = async (key: string, times: number): Promise<number> => {
    let served = 0;
    for (let index = 0; index < times; index += 1) if ((await store.increment(key)).totalHits <= 20) served += 1;
    return served;
  };

  it('serves at most 20 in one window before, during and after a 3 s SIGSTOP stall (the hits counted in memory reach Redis)', async () => {
    const before = await serve('key_a', 5);
    server.pause();
    const during = await serve('key_a', 10);
    expect(store.degraded).to.equal(true);
    await sleep(3000);
    server.resume();
    await eventually(() => !store.degraded, 'counting in Redis again', 10_000);
    const after = await serve('key_a', 20);
    expect([before, during]).to.deep.equal([5, 10]);
    expect(before + during + after).to.be.at.most(20);
    // Only the hit that timed out at the stall's start (and ran in Redis once it resumed) is counted twice.
    expect(after).to.equal(4);
  });

  it('recreates a counter a restarted Redis lost at the count memory had, expiring when its window ends', async () => {
    await serve('key_b', 5);
    await server.stop();
    // Counted in memory from the 5 Redis last gave.
    expect(await serve('key_b', 3)).to.equal(3);
    await server.restart();
    await eventually(() => !store.degraded, 'counting in Redis again', 10_000);
    const raw = createRedisClient(server.url);
    try {
      await waitUntilReady(raw, 5000);
      expect(await raw.get('gw-rl:key:key_b')).to.equal('8');
      expect(await raw.pttl('gw-rl:key:key_b')).to.be.within(1, 60_000);
    } finally {
      raw.disconnect();
    }
  });
});
