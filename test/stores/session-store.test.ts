import { expect } from 'chai';
import { MemorySessionStore, RedisSessionStore } from '../../src/stores/session-store.ts';
import { isGatewayError } from '../../src/core/gateway-errors.ts';
import { createRedisClient, waitUntilReady, type RedisConnection } from '../../src/stores/redis/redis-client.ts';
import { TestRedisServer } from '../helpers/redis-server.ts';
import { startTestGateway, type TestGateway } from '../helpers/test-gateway.ts';

const START = Date.parse('2026-11-23T12:00:00Z');

describe('account session stores', () => {
  it('memory: keeps a session until it expires, forgets it on delete', async () => {
    let clock = START;
    const store = new MemorySessionStore(() => clock);
    await store.put('a', { csrfToken: 'csrf-a', expiresAt: START + 1000 });
    await store.put('b', { csrfToken: 'csrf-b', expiresAt: START + 5000 });
    expect(await store.get('a')).to.deep.equal({ csrfToken: 'csrf-a', expiresAt: START + 1000 });
    clock += 1000;
    expect(await store.get('a')).to.equal(undefined);
    await store.delete('b');
    expect(await store.get('b')).to.equal(undefined);
  });

  describe('redis', function () {
    this.timeout(30_000);
    let redis: TestRedisServer;
    let client: RedisConnection;

    before(async () => {
      redis = await TestRedisServer.start();
      client = createRedisClient(redis.url);
      expect(await waitUntilReady(client, 5000)).to.equal(true);
    });
    after(async () => {
      client.disconnect();
      await redis.close();
    });

    it('stores a session under its hash with the session as its Redis expiry, and deletes it', async () => {
      let clock = START;
      const store = new RedisSessionStore(client, 'test-session:', () => clock);
      const putAt = performance.now();
      await store.put('hash-1', { csrfToken: 'csrf-1', expiresAt: START + 60_000 });
      const pttl = await client.pttl('test-session:hash-1');
      const sincePut = performance.now() - putAt;
      // The session's 60 s, counted down by Redis since the put: by at most the time measured around the
      // put and this read (and 1 ms for Redis's whole milliseconds).
      expect(pttl).to.be.within(60_000 - Math.ceil(sincePut) - 1, 60_000);
      expect(await store.get('hash-1')).to.deep.equal({ csrfToken: 'csrf-1', expiresAt: START + 60_000 });
      clock += 60_000;
      expect(await store.get('hash-1')).to.equal(undefined);
      clock = START;
      await store.delete('hash-1');
      expect(await client.exists('test-session:hash-1')).to.equal(0);
    });

    it('answers 503 while Redis is unreachable', async () => {
      const store = new RedisSessionStore(client, 'test-session:');
      await redis.stop();
      try {
        const failure = await store.get('hash-2').then(
          () => undefined,
          (error: unknown) => error,
        );
        expect(isGatewayError(failure) && failure.status).to.equal(503);
      } finally {
        await redis.restart();
        await waitUntilReady(client, 5000);
      }
    });
  });

  describe('two gateways sharing one Redis', function () {
    this.timeout(60_000);
    let redis: TestRedisServer;
    let first: TestGateway;
    let second: TestGateway;
    const env = () => ({ GATEWAY_ADMIN_TOKEN: 'shared-admin-token-0001-0123456789abcdef', REDIS_URL: redis.url });

    before(async () => {
      redis = await TestRedisServer.start();
      first = await startTestGateway({ env: env() });
      second = await startTestGateway({ env: env() });
    });
    after(async () => {
      await first?.close();
      await second?.close();
      await redis?.close();
    });

    it('a session made on one works on the other, and signing out on either ends it', async () => {
      const signedIn = await fetch(`${first.url}/account/api/session`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ token: 'shared-admin-token-0001-0123456789abcdef' }),
      });
      expect(signedIn.status).to.equal(201);
      const cookie = signedIn.headers.get('set-cookie')!.split(';')[0]!;
      const { csrf_token: csrf } = (await signedIn.json()) as { csrf_token: string };
      expect((await fetch(`${second.url}/account/api/keys`, { headers: { cookie } })).status).to.equal(200);
      expect(
        (
          await fetch(`${second.url}/account/api/session`, {
            method: 'DELETE',
            headers: { cookie, 'x-csrf-token': csrf },
          })
        ).status,
      ).to.equal(204);
      expect((await fetch(`${first.url}/account/api/keys`, { headers: { cookie } })).status).to.equal(401);
    });
  });
});
