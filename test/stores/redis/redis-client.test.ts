import { expect } from 'chai';
import type { Redis } from 'ioredis';
import {
  createRedisClient,
  isCluster,
  isReady,
  redisHealth,
  waitUntilReady,
} from '../../../src/stores/redis/redis-client.ts';
import { captureLogs, eventually } from '../../data-plane/pipeline/guarded-app.ts';
import { freePort, TestRedisCluster, TestRedisServer } from '../../helpers/redis-server.ts';
import { settledAtOnce } from '../../helpers/settled-at-once.ts';

const count = (text: string, message: string) =>
  text.split('\n').filter((line) => line.includes(`"msg":"${message}"`)).length;

describe('Redis client', function () {
  this.timeout(30_000);

  it('fails commands at once while Redis is down, logs each transition once, and reconnects by itself', async () => {
    const server = await TestRedisServer.start();
    const logs = captureLogs();
    const client = createRedisClient(server.url, logs.logger);
    // Each reconnect attempt the client schedules, with its delay (ioredis passes it with the event).
    const retryDelays: number[] = [];
    client.on('reconnecting', (delay: number) => retryDelays.push(delay));
    try {
      expect(await waitUntilReady(client, 5000)).to.equal(true);
      expect(redisHealth(client).ready).to.equal(true);
      await server.stop();
      await eventually(() => !redisHealth(client).ready, 'the client to notice');
      // At once: the command is refused before the event loop turns again, so no timer (the 500 ms
      // command timeout), no reconnect and no socket event can have answered it.
      const outcome = await settledAtOnce(client.get('anything'));
      expect(outcome.settled, 'the command failed without waiting').to.equal('rejected');
      expect(outcome.settled === 'rejected' && outcome.reason).to.be.an('error');
      // Several reconnect attempts fail meanwhile; the backoff stays at most 2 s.
      await new Promise((resolve) => setTimeout(resolve, 2500));
      await server.restart();
      const failedBeforeBack = retryDelays.length;
      await eventually(() => isReady(client), 'the reconnect', 15_000);
      // Back by the first attempt made once Redis answers again: at most one more failed attempt (one
      // refused while the server was still starting, reported late), and no wait between attempts over 2 s.
      expect(retryDelays.length - failedBeforeBack, 'failed attempts once Redis answered again').to.be.at.most(1);
      expect(Math.max(...retryDelays), 'longest wait between attempts').to.be.at.most(2000);
      const { retryStrategy } = (client as Redis).options;
      const strategyDelays = Array.from({ length: 50 }, (_, index) => retryStrategy!(index + 1));
      expect(
        strategyDelays.every((delay) => typeof delay === 'number' && delay > 0 && delay <= 2000),
        `backoff ${strategyDelays.join(', ')}`,
      ).to.equal(true);
      expect(redisHealth(client).ready).to.equal(true);
      expect(await client.ping()).to.equal('PONG');
      expect(count(logs.text(), 'redis unavailable')).to.equal(1);
      expect(count(logs.text(), 'redis back')).to.equal(1);
    } finally {
      client.disconnect();
      await server.close();
    }
  });

  it('says within the wait when Redis is not there', async () => {
    const logs = captureLogs();
    const client = createRedisClient(`redis://127.0.0.1:${await freePort()}`, logs.logger);
    try {
      expect(await waitUntilReady(client, 300)).to.equal(false);
      expect(redisHealth(client).ready).to.equal(false);
      expect(count(logs.text(), 'redis unavailable')).to.equal(1);
    } finally {
      client.disconnect();
    }
  });

  it('uses TLS for rediss:// URLs and needs a master name for Sentinel', () => {
    const tls = createRedisClient('rediss://127.0.0.1:1') as Redis;
    tls.disconnect();
    expect(tls.options.tls).to.not.equal(undefined);
    expect(tls.options).to.include({
      connectTimeout: 1000,
      commandTimeout: 500,
      maxRetriesPerRequest: 1,
      enableOfflineQueue: false,
    });
    expect(() => createRedisClient({ sentinels: [{ host: '127.0.0.1', port: 1 }] })).to.throw(
      /Sentinel needs the name/,
    );
    expect(() => createRedisClient({})).to.throw(/need a url, sentinels or cluster nodes/);
  });

  it('connects to a Cluster from its startup nodes', async () => {
    const cluster = await TestRedisCluster.start();
    const client = createRedisClient({ cluster: cluster.startupNodes });
    try {
      expect(await waitUntilReady(client, 10_000)).to.equal(true);
      await Promise.all(['a', 'b', 'c', 'd'].map((key) => client.set(key, key)));
      expect(await client.get('d')).to.equal('d');
      expect(redisHealth(client).ready).to.equal(true);
      expect(isCluster(client)).to.equal(true);
      const single = createRedisClient(`redis://127.0.0.1:${cluster.startupNodes[0]!.port}`);
      expect(isCluster(single)).to.equal(false);
      single.disconnect();
    } finally {
      client.disconnect();
      await cluster.close();
    }
  });
});
