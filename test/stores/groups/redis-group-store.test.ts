import { expect } from 'chai';
import { RedisGroupStore } from '../../../src/stores/groups/redis-group-store.ts';
import { createRedisClient, waitUntilReady, type RedisConnection } from '../../../src/stores/redis/redis-client.ts';
import { TestRedisServer } from '../../helpers/redis-server.ts';
import { behavesAsGroupStore } from './group-store-behaviour.ts';

async function connect(url: string): Promise<RedisConnection> {
  const client = createRedisClient(url);
  expect(await waitUntilReady(client, 5000)).to.equal(true);
  return client;
}

describe('Redis group store', () => {
  let server: TestRedisServer;
  let clients: RedisConnection[] = [];
  before(async () => {
    server = await TestRedisServer.start();
  });
  after(async () => server.close());
  beforeEach(async () => {
    clients = [await connect(server.url), await connect(server.url)];
    await clients[0]!.flushall();
  });
  afterEach(() => clients.forEach((client) => client.disconnect()));

  behavesAsGroupStore(async () => [new RedisGroupStore(clients[0]!), new RedisGroupStore(clients[1]!)]);

  it('keeps every key under one hash tag', async () => {
    await new RedisGroupStore(clients[0]!).create({ name: 'tagged', tpm: 1 });
    expect((await clients[0]!.keys('*')).sort()).to.deep.equal([
      '{gateway-groups}:group:tagged',
      '{gateway-groups}:names',
    ]);
  });

  it('answers 503, not 500, while Redis is away, saying nothing of the connection', async () => {
    const store = new RedisGroupStore(clients[0]!);
    clients[0]!.disconnect();
    const error = await store.get('any').then(
      () => undefined,
      (failure: unknown) => failure as { status: number; detail: string },
    );
    expect(error).to.deep.include({
      status: 503,
      detail: 'The group store (Redis) is unavailable; please retry shortly',
    });
  });
});
