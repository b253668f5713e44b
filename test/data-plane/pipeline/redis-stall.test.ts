import { expect } from 'chai';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { request } from 'undici';
import { createAuthenticator } from '../../../src/data-plane/pipeline/authenticate.ts';
import { FileKeyStore } from '../../../src/stores/keys/file-key-store.ts';
import { createRateLimiters, type RateLimiters } from '../../../src/data-plane/pipeline/admit.ts';
import { FallbackLedger } from '../../../src/stores/limits/fallback-ledger.ts';
import { LIMIT_KEY_PREFIX } from '../../../src/stores/limits/redis-ledger.ts';
import { withinOneWindow } from '../../helpers/limit-window.ts';
import { pino } from 'pino';
import { createRedisClient, waitUntilReady, type RedisConnection } from '../../../src/stores/redis/redis-client.ts';
import { eventually, send, sleep, startGuardedApp, type GuardedApp } from './guarded-app.ts';
import { commandCalls, TestRedisServer } from '../../helpers/redis-server.ts';
import { startTestGateway, type TestGateway } from '../../helpers/test-gateway.ts';

const ADMIN_TOKEN = 'admin-token-for-stall-tests-0001';

/** Limit script calls Redis has run so far. */
const scriptCalls = (port: number) => commandCalls(port, /^(evalsha|eval)$/);

describe('Redis stall (SIGSTOP) and outage', function () {
  this.timeout(60_000);
  let server: TestRedisServer;

  beforeEach(async () => {
    server = await TestRedisServer.start();
  });
  afterEach(async () => {
    server.resume();
    await server.close();
  });

  describe('rate limits', () => {
    let dataDir: string;
    let keys: FileKeyStore;
    let client: RedisConnection;
    let limiters: RateLimiters;
    let ledger: FallbackLedger;
    let app: GuardedApp;

    beforeEach(async () => {
      dataDir = await mkdtemp(join(tmpdir(), 'gateway-stall-'));
      keys = new FileKeyStore(dataDir);
      client = createRedisClient(server.url);
      expect(await waitUntilReady(client, 10_000)).to.equal(true);
      ledger = new FallbackLedger(client, { logger: pino({ level: 'silent' }) });
      limiters = createRateLimiters({ ledger });
      app = await startGuardedApp({ model: [createAuthenticator({ store: keys }), limiters.perKey] });
    });
    afterEach(async () => {
      await app.close();
      await ledger.close();
      client.disconnect();
      await rm(dataDir, { recursive: true, force: true });
    });

    it('continues from the last count Redis gave: an rpm 20 key that used 15 gets 5 more during a stall', async () => {
      const { key } = await keys.create({ name: 'rpm 20', rpm: 20 });
      await withinOneWindow(15_000);
      for (let index = 0; index < 15; index += 1)
        expect((await send(app.url, '/v1/chat/completions', { key })).status).to.equal(200);
      server.pause();
      const during = [];
      for (let index = 0; index < 10; index += 1)
        during.push((await send(app.url, '/v1/chat/completions', { key })).status);
      expect(during).to.deep.equal([...Array(5).fill(200), ...Array(5).fill(429)]);
      expect(limiters.degraded()).to.equal(true);
    });

    it('opens a breaker: during a stall only the first decision waits for Redis, and it closes by itself once Redis answers', async () => {
      const { key } = await keys.create({ name: 'breaker', rpm: 1000 });
      await withinOneWindow(15_000);
      expect((await send(app.url, '/v1/chat/completions', { key })).status).to.equal(200);
      const before = await scriptCalls(server.port);
      server.pause();
      for (let index = 0; index < 10; index += 1)
        expect((await send(app.url, '/v1/chat/completions', { key })).status).to.equal(200);
      server.resume();
      // Commands sent during the stall are run once it ends: only the one that opened the breaker was.
      // The other script call is the catch-up, adding the 10 hits counted in memory to Redis's counter.
      await eventually(() => !limiters.degraded(), 'the breaker to close without any request');
      expect((await scriptCalls(server.port)) - before).to.equal(2);
      const raw = new Redis(server.url);
      try {
        const [counter] = await raw.keys(`${LIMIT_KEY_PREFIX}key:*:rpm:*`);
        // 1 before, the late one (counted twice: it also counted in memory), 10 caught up.
        expect(await raw.get(counter!)).to.equal('12');
      } finally {
        raw.disconnect();
      }
      expect((await send(app.url, '/v1/chat/completions', { key })).status).to.equal(200);
      expect((await scriptCalls(server.port)) - before).to.equal(3);
    });
  });

  describe('the gateway', () => {
    let gateway: TestGateway;

    beforeEach(async () => {
      gateway = await startTestGateway({ env: { REDIS_URL: server.url, GATEWAY_ADMIN_TOKEN: ADMIN_TOKEN } });
    });
    afterEach(async () => {
      server.resume();
      await gateway.close();
    });

    const readiness = async (query = '') => {
      const response = await request(`${gateway.url}/readyz${query}`);
      return { status: response.statusCode, body: (await response.body.json()) as Record<string, string> };
    };

    it('answers /readyz 503 during a stall and 200 again once Redis answers, without any model request', async () => {
      expect((await readiness()).status).to.equal(200);
      server.pause();
      await eventually(async () => (await readiness()).status === 503, 'readiness to report the stall');
      expect((await readiness()).body).to.deep.include({ status: 'degraded', redis: 'unavailable' });
      // What an orchestrator probes (deploy/kubernetes): still serving, so still ready, the mode in the body.
      const tolerant = await readiness('?degraded=ready');
      expect(tolerant.status).to.equal(200);
      expect(tolerant.body).to.deep.include({ status: 'degraded', redis: 'unavailable' });
      server.resume();
      await eventually(async () => (await readiness()).status === 200, 'readiness to recover by itself', 10_000);
      expect((await readiness()).body).to.deep.include({ status: 'ok', redis: 'ready', rate_limits: 'shared' });
    });

    it('during a stall, only the first request waits for Redis: key lookups and quota reservations skip it until it answers', async () => {
      const { key } = await gateway.gateway.keys.create({ name: 'with quota', quota: { daily: 1_000_000 } });
      const chat = async () => {
        const response = await request(`${gateway.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${key}` },
          body: JSON.stringify({ model: 'zeta/zeta-k3', messages: [{ role: 'user', content: 'during a stall' }] }),
        });
        await response.body.dump();
        return response.statusCode;
      };
      expect(await chat()).to.equal(200);
      const before = await commandCalls(server.port, /^get$/);
      server.pause();
      const during = [];
      // Spread over more than the key cache's 500 ms, so lookups are due again.
      for (let index = 0; index < 6; index += 1) {
        during.push(await chat());
        await sleep(250);
      }
      expect(during).to.deep.equal(Array(6).fill(200));
      server.resume();
      await eventually(async () => (await readiness()).status === 200, 'readiness to recover', 10_000);
      // Commands sent during the stall run once it ends: without a breaker, a key lookup per request.
      expect((await commandCalls(server.port, /^get$/)) - before).to.be.at.most(2);
      expect(await chat()).to.equal(200);
    });

    it('serves an rpm 20 key at most 20 requests in its window across a 10 s stall (the hits counted meanwhile reach Redis)', async function () {
      this.timeout(60_000);
      const { key } = await gateway.gateway.keys.create({ name: 'rpm 20 across a stall', rpm: 20 });
      const chat = async () => {
        const response = await request(`${gateway.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${key}` },
          body: JSON.stringify({ model: 'zeta/zeta-k3', messages: [{ role: 'user', content: 'across a stall' }] }),
        });
        await response.body.dump();
        return response.statusCode;
      };
      const statuses: number[] = [];
      await withinOneWindow(30_000);
      for (let index = 0; index < 5; index += 1) statuses.push(await chat());
      expect(statuses).to.deep.equal(Array(5).fill(200));
      server.pause();
      const stalledAt = Date.now();
      while (Date.now() - stalledAt < 10_000) {
        statuses.push(await chat());
        await sleep(400);
      }
      server.resume();
      await eventually(
        async () => (await readiness()).body.rate_limits === 'shared',
        'rate limits to count in Redis again',
        10_000,
      );
      for (let index = 0; index < 20; index += 1) statuses.push(await chat());
      expect(statuses.every((status) => status === 200 || status === 429)).to.equal(true);
      expect(statuses.filter((status) => status === 200)).to.have.length(20);
    });

    it('answers key writes with 503 and Retry-After while Redis is stalled or down', async () => {
      const create = () =>
        request(`${gateway.url}/admin/keys`, {
          method: 'POST',
          headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
          body: JSON.stringify({ name: 'while away' }),
        });
      server.pause();
      const stalled = await create();
      expect(stalled.statusCode).to.equal(503);
      expect(stalled.headers['retry-after']).to.equal('1');
      expect(await stalled.body.json()).to.deep.equal({
        detail: 'The key store (Redis) is unavailable; please retry shortly',
      });
      await server.stop();
      const down = await create();
      expect(down.statusCode).to.equal(503);
      expect(down.headers['retry-after']).to.equal('1');
      await down.body.dump();
      const revoke = await request(`${gateway.url}/admin/keys/key_unknown`, {
        method: 'DELETE',
        headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
      });
      expect(revoke.statusCode).to.equal(503);
      await revoke.body.dump();
    });
  });
});
