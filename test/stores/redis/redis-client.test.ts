import { expect } from 'chai';
import type { Redis } from 'ioredis';
import { createRedisClient, isReady, redisHealth, waitUntilReady } from '../../../src/stores/redis/redis-client.ts';
import { captureLogs, eventually } from '../../data-plane/auth/guarded-app.ts';
import { freePort, TestRedisCluster, TestRedisServer } from '../../helpers/redis-server.ts';

const count = (text: string, message: string) => text.split('\n').filter((line) => line.includes(`"msg":"${message}"`)).length;

describe('Redis client', function () {
  this.timeout(30_000);

  it('fails commands at once while Redis is down, logs each transition once, and reconnects by itself', async () => {
    const server = await TestRedisServer.start();
    const logs = captureLogs();
    const client = createRedisClient(server.url, logs.logger);
    try {
      expect(await waitUntilReady(client, 5000)).to.equal(true);
      expect(redisHealth(client).ready).to.equal(true);
      await server.stop();
      await eventually(() => !redisHealth(client).ready, 'the client to notice');
      const started = Date.now();
      let failure: unknown;
      await client.get('anything').catch((error: unknown) => (failure = error));
      expect(failure).to.be.an('error');
      expect(Date.now() - started).to.be.below(100);
      // Several reconnect attempts fail meanwhile; the backoff stays at most 2 s.
      await new Promise((resolve) => setTimeout(resolve, 2500));
      await server.restart();
      const backIn = await eventually(() => isReady(client), 'the reconnect', 5000);
      expect(backIn).to.be.below(3000);
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
    expect(tls.options.tls).to.be.ok;
    expect(tls.options).to.include({ connectTimeout: 1000, commandTimeout: 500, maxRetriesPerRequest: 1, enableOfflineQueue: false });
    expect(() => createRedisClient({ sentinels: [{ host: '127.0.0.1', port: 1 }] })).to.throw(/Sentinel needs the name/);
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
    } finally {
      client.disconnect();
      await cluster.close();
    }
  });
});
