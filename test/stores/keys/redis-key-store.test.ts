import { expect } from 'chai';
import { hashApiKey } from '../../../src/core/api-keys.ts';
import { createAuthenticator } from '../../../src/data-plane/pipeline/authenticate.ts';
import { RedisKeyStore } from '../../../src/stores/keys/redis-key-store.ts';
import {
  createRedisClient,
  isReady,
  waitUntilReady,
  type RedisConnection,
} from '../../../src/stores/redis/redis-client.ts';
import type { KeyStore } from '../../../src/stores/keys/key-store.ts';
import { ManualClock, withDateNow } from '../../helpers/manual-clock.ts';
import { TestRedisCluster, TestRedisServer } from '../../helpers/redis-server.ts';
import { settledAtOnce } from '../../helpers/settled-at-once.ts';
import { eventually, send, startGuardedApp } from '../../data-plane/pipeline/guarded-app.ts';

async function connect(target: Parameters<typeof createRedisClient>[0]): Promise<RedisConnection> {
  const client = createRedisClient(target);
  expect(await waitUntilReady(client, 5000)).to.equal(true);
  return client;
}

/** The same checks on one Redis and on a Cluster: two instances, each with its own connection. */
function behavesAsSharedKeyStore(
  open: () => Promise<[RedisConnection, RedisConnection]>,
  valuesOf: (client: RedisConnection) => Promise<string[]>,
): void {
  let clients: RedisConnection[] = [];
  let first: RedisKeyStore;
  let second: RedisKeyStore;

  beforeEach(async () => {
    clients = await open();
    first = new RedisKeyStore(clients[0]!);
    second = new RedisKeyStore(clients[1]!);
  });
  afterEach(() => clients.forEach((client) => client.disconnect()));

  it('updates a key atomically: set, replaced, removed with null, kept when absent; 409 once revoked', async () => {
    const { key, record } = await first.create({
      name: 'shared',
      rpm: 5,
      quota: { daily: 10, monthly: 100 },
      team: 'research',
    });
    expect((await second.findByHash(hashApiKey(key)))?.rpm).to.equal(5);
    const updated = await first.update(record.id, {
      rpm: 1,
      quota: { monthly: 7 },
      team: null,
      budget: { daily_usd: 2 },
      guardrails: [],
    });
    expect(updated).to.deep.equal({
      id: record.id,
      name: 'shared',
      hash: record.hash,
      createdAt: record.createdAt,
      revoked: false,
      rpm: 1,
      quota: { monthly: 7 },
      budget: { daily_usd: 2 },
      guardrails: [],
    });
    // The writing instance reads it again at once; the other within its 500 ms cache.
    expect(await first.findByHash(hashApiKey(key))).to.deep.equal(updated);
    await eventually(
      async () => (await second.findByHash(hashApiKey(key)))?.rpm === 1,
      'the other instance to see the change',
    );
    expect(await second.update('key_unknown', { rpm: 2 })).to.equal(undefined);
    // Changes racing from two instances are all kept.
    await Promise.all([
      first.update(record.id, { tpm: 10 }),
      second.update(record.id, { concurrency: 3 }),
      first.update(record.id, { name: 'renamed' }),
    ]);
    expect((await second.list()).find((listed) => listed.id === record.id)).to.deep.include({
      tpm: 10,
      concurrency: 3,
      name: 'renamed',
      rpm: 1,
    });
    expect(await second.revoke(record.id)).to.equal(true);
    let refused: unknown;
    await first.update(record.id, { rpm: 2 }).catch((error: unknown) => (refused = error));
    expect(refused).to.include({ status: 409 });
    expect((await first.list()).find((listed) => listed.id === record.id)).to.include({ rpm: 1, revoked: true });
  });

  it('creates, lists and finds keys by hash, storing no key', async () => {
    const { key, record } = await first.create({
      name: 'shared',
      rpm: 3,
      models: ['alpha/gen-5.5'],
      tpm: 900,
      budget: { daily_usd: 1.25 },
      team: 'research',
      cache: false,
      guardrails: ['no-emails'],
    });
    expect(record).to.deep.include({
      tpm: 900,
      budget: { daily_usd: 1.25 },
      team: 'research',
      cache: false,
      guardrails: ['no-emails'],
    });
    expect(key).to.match(/^sk-[A-Za-z0-9_-]{43}$/);
    expect(await second.findByHash(hashApiKey(key))).to.deep.equal(record);
    expect(await second.findByHash(hashApiKey('sk-never-created-0000'))).to.equal(undefined);
    expect((await second.list()).map((listed) => listed.id)).to.include(record.id);
    expect((await valuesOf(clients[0]!)).join('\n')).not.to.contain(key);
  });

  it('has a revoke on one instance refused by another within one second', async () => {
    // The other instance's authenticator and store on a clock the test moves (both read Date.now): what
    // they still trust is then a matter of their trust periods alone, never of how slow the machine is.
    const clock = new ManualClock(Date.now());
    const secondAtClock: KeyStore = {
      create: (input) => second.create(input),
      list: () => second.list(),
      revoke: (id) => second.revoke(id),
      update: (id, changes) => second.update(id, changes),
      findByHash: (hash) => withDateNow(clock, () => second.findByHash(hash)),
      get revision() {
        return second.revision;
      },
      close: () => second.close(),
    };
    const app = await startGuardedApp({
      model: [withDateNow(clock, () => createAuthenticator({ store: secondAtClock }))],
    });
    const status = async (key: string) => (await send(app.url, '/v1/chat/completions', { key })).status;
    try {
      // Worst cases: the other instance reads the key from Redis at the moment of the revoke, and reads it
      // again `lateBy` ms later (from its store's cache while that still holds it, then trusting what it
      // got for its own while). However late that second read, a second after the revoke it refuses.
      for (const lateBy of [
        0, 50, 100, 150, 200, 250, 300, 350, 400, 450, 499, 500, 550, 600, 650, 700, 750, 800, 850, 900, 950, 999,
      ]) {
        const { key, record } = await first.create({ name: `to revoke ${lateBy} ms late` });
        clock.advance(10_000);
        const revokedAt = clock.time;
        expect(await status(key)).to.equal(200);
        expect(await first.revoke(record.id)).to.equal(true);
        clock.time = revokedAt + lateBy;
        const late = await status(key);
        expect([200, 403], `read ${lateBy} ms after the revoke`).to.include(late);
        clock.time = revokedAt + 1000;
        expect(await status(key), `a second after the revoke (read again ${lateBy} ms after it)`).to.equal(403);
      }
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
      return Promise.all(
        keys.map(async (key) =>
          JSON.stringify((await client.type(key)) === 'set' ? await client.smembers(key) : await client.get(key)),
        ),
      );
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
      await eventually(() => !isReady(client), 'the client to notice');
      // Past the store's 500 ms cache (at least: a slower machine only waits longer), so the seen key is
      // answered from the state last read from Redis, not from the cache.
      await new Promise((resolve) => setTimeout(resolve, 600));
      expect((await store.findByHash(seen.record.hash))?.id).to.equal(seen.record.id);
      // Fails fast: refused before the event loop turns again, so without waiting on Redis (no command
      // timeout, no reconnect) for a key it has nothing on.
      const outcome = await settledAtOnce(store.findByHash(unseen.record.hash));
      expect(outcome.settled, 'the unseen key failed without waiting').to.equal('rejected');
      expect(outcome.settled === 'rejected' && outcome.reason).to.be.an('error');
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
      const keys = (
        await Promise.all((client as import('ioredis').Cluster).nodes('master').map((node) => node.keys('*')))
      ).flat();
      return Promise.all(
        keys.map(async (key) =>
          JSON.stringify((await client.type(key)) === 'set' ? await client.smembers(key) : await client.get(key)),
        ),
      );
    },
  );
});
