import { expect } from 'chai';
import { createRedisClient, waitUntilReady, type RedisConnection } from '../../src/stores/redis/redis-client.ts';
import { TestRedisServer } from './redis-server.ts';

/** A client of `url`, ready (the test fails when it is not within 5 s). */
export async function connectReady(url: string): Promise<RedisConnection> {
  const client = createRedisClient(url);
  expect(await waitUntilReady(client, 5000)).to.equal(true);
  return client;
}

/**
 * Called in a `describe`: one Redis server for the suite, and two ready clients of it for each test (as two
 * gateway instances), the data flushed before each.
 */
export function redisStoreClients(): { readonly server: TestRedisServer; readonly clients: RedisConnection[] } {
  const fixture = { server: undefined as unknown as TestRedisServer, clients: [] as RedisConnection[] };
  before(async () => {
    fixture.server = await TestRedisServer.start();
  });
  after(async () => fixture.server.close());
  beforeEach(async () => {
    fixture.clients = [await connectReady(fixture.server.url), await connectReady(fixture.server.url)];
    await fixture.clients[0]!.flushall();
  });
  afterEach(() => fixture.clients.forEach((client) => client.disconnect()));
  return fixture;
}
