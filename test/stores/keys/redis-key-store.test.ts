import { expect } from 'chai';
import { hashApiKey } from '../../../src/core/api-keys.ts';
import { createAuthenticator } from '../../../src/data-plane/auth/authenticate.ts';
import { RedisKeyStore } from '../../../src/stores/keys/redis-key-store.ts';
import { createRedisClient, waitUntilReady, type RedisConnection } from '../../../src/stores/redis/redis-client.ts';
import { TestRedisCluster, TestRedisServer } from '../../helpers/redis-server.ts';
import { eventually, send, startGuardedApp } from '../../data-plane/auth/guarded-app.ts';

async function connect(target: Parameters<typeof createRedisClient>[0]): Promise<RedisConnection> {
  const client = createRedisClient(target);
  expect(await waitUntilReady(client, 5000)).to.equal(true);
  return client;
}

/** The same checks on one Redis and on a Cluster: two instances, each with its own connection. */
function behavesAsSharedKeyStore(open: () => Promise<[RedisConnection, RedisConnection]>, valuesOf: (client: RedisConnection) => Promise<string[]>): void {
  let clients: RedisConnection[] = [];
  let first: RedisKeyStore;
  let second: RedisKeyStore;

  beforeEach(async () => {
    clients = await open();
    first = new RedisKeyStore(clients[0]!);
    second = new RedisKeyStore(clients[1]!);
  });
  afterEach(() => clients.forEach((client) => client.disconnect()));

  it('creates, lists and finds keys by hash, storing no key', async () => {
    const { key, record } = await first.create({ name: 'shared', rpm: 3, models: ['alpha/gen-5.5'], tpm: 900, budget: { daily_usd: 1.25 }, team: 'research' });
    expect(record).to.deep.include({ tpm: 900, budget: { daily_usd: 1.25 }, team: 'research' });
    expect(key).to.match(/^sk-[A-Za-z0-9_-]{43}$/);
    expect(await second.findByHash(hashApiKey(key))).to.deep.equal(record);
    expect(await second.findByHash(hashApiKey('sk-never-created-0000'))).to.equal(undefined);
    expect((await second.list()).map((listed) => listed.id)).to.include(record.id);
    expect((await valuesOf(clients[0]!)).join('\n')).not.to.contain(key);
  });

  it('has a revoke on one instance refused by another within one second', async () => {
    const { key, record } = await first.create({ name: 'to revoke' });
    const app = await startGuardedApp({ model: [createAuthenticator({ store: second })] });
    try {
      expect((await send(app.url, '/v1/chat/completions', { key })).status).to.equal(200);
      const started = Date.now();
      expect(await first.revoke(record.id)).to.equal(true);
      await eventually(async () => (await send(app.url, '/v1/chat/completions', { key })).status === 403, 'the revoke to reach the other instance', 2000);
      expect(Date.now() - started).to.be.below(1000);
      expect(await first.revoke('key_unknown')).to.equal(false);
    } finally {
      await app.close();
    }
  });
}

describe('Redis key store on one Redis', () => {
  let server: TestRedisServer;
  before(async () => {
    server = await TestRedisServer.start();
  });
  after(async () => server.close());

  behavesAsSharedKeyStore(
    async () => [await connect(server.url), await connect(server.url)],
    async (client) => {
      const keys = await client.keys('*');
      expect(keys.every((key) => key.startsWith('{gateway-keys}:'))).to.equal(true);
      return Promise.all(keys.map(async (key) => JSON.stringify((await client.type(key)) === 'set' ? await client.smembers(key) : await client.get(key))));
    },
  );

  it('keeps answering for keys it saw while Redis is down, and fails fast for others', async () => {
    const client = await connect(server.url);
    try {
      const store = new RedisKeyStore(client);
      const seen = await store.create({ name: 'seen' });
      const unseen = await store.create({ name: 'unseen' });
      expect((await store.findByHash(seen.record.hash))?.id).to.equal(seen.record.id);
      await server.stop();
      await new Promise((resolve) => setTimeout(resolve, 600));
      expect((await store.findByHash(seen.record.hash))?.id).to.equal(seen.record.id);
      const started = Date.now();
      let failure: unknown;
      await store.findByHash(unseen.record.hash).catch((error: unknown) => (failure = error));
      expect(failure).to.be.an('error');
      expect(Date.now() - started).to.be.below(600);
    } finally {
      await server.restart();
      client.disconnect();
    }
  });
});

describe('Redis key store on a 3-master Redis Cluster', function () {
  this.timeout(60_000);
  let cluster: TestRedisCluster;
  before(async () => {
    cluster = await TestRedisCluster.start();
  });
  after(async () => cluster.close());

  behavesAsSharedKeyStore(
    async () => [await connect({ cluster: cluster.startupNodes }), await connect({ cluster: cluster.startupNodes })],
    async (client) => {
      const keys = (await Promise.all((client as import('ioredis').Cluster).nodes('master').map((node) => node.keys('*')))).flat();
      return Promise.all(keys.map(async (key) => JSON.stringify((await client.type(key)) === 'set' ? await client.smembers(key) : await client.get(key))));
    },
  );
});
