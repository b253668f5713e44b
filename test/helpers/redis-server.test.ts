import { expect } from 'chai';
import { Cluster, Redis } from 'ioredis';
import { TestRedisCluster, TestRedisServer } from './redis-server.ts';

describe('test helper: redis-server', () => {
  it('starts a server on a free port, and restarts it empty on the same port', async () => {
    const server = await TestRedisServer.start();
    const client = new Redis(server.url, { maxRetriesPerRequest: 1 });
    client.on('error', () => {});
    try {
      await client.set('k', 'v');
      expect(await client.get('k')).to.equal('v');
      await server.restart();
      expect(await client.get('k')).to.equal(null);
    } finally {
      client.disconnect();
      await server.close();
    }
  });

  it('starts a three-master cluster', async function () {
    this.timeout(30000);
    const cluster = await TestRedisCluster.start();
    const client = new Cluster(cluster.startupNodes);
    try {
      await Promise.all(['a', 'b', 'c', 'd', 'e'].map((key) => client.set(key, key)));
      expect(await client.get('e')).to.equal('e');
      const masters = await client.cluster('NODES');
      expect(
        String(masters)
          .split('\n')
          .filter((line) => line.includes('master')).length,
      ).to.equal(3);
    } finally {
      client.disconnect();
      await cluster.close();
    }
  });
});
