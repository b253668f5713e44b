import { expect } from 'chai';
import { describeWindow, rateLimitText } from '../../../src/usage/limit-meters.ts';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { pino, type Logger } from 'pino';
import { createAuthenticator } from '../../../src/data-plane/pipeline/authenticate.ts';
import { staticKeyId } from '../../../src/core/static-key-id.ts';
import { FileKeyStore } from '../../../src/stores/keys/file-key-store.ts';
import { FallbackLedger } from '../../../src/stores/limits/fallback-ledger.ts';
import { LIMIT_KEY_PREFIX } from '../../../src/stores/limits/redis-ledger.ts';
import { createRateLimiters, type RateLimiters } from '../../../src/data-plane/pipeline/admit.ts';
import { createRedisClient, waitUntilReady, type RedisConnection } from '../../../src/stores/redis/redis-client.ts';
import { captureLogs, eventually, send, startGuardedApp, type Answer, type GuardedApp } from './guarded-app.ts';
import { TestRedisCluster, TestRedisServer } from '../../helpers/redis-server.ts';
import { nextWindow, withinOneWindow } from '../../helpers/limit-window.ts';

const KEY = 'sk-rate-limit-test-key-0001-0123456789abcdef';
const KEY_ID = staticKeyId(KEY);

interface LimitedApp extends GuardedApp {
  readonly limiters: RateLimiters;
}

interface LimitedAppOptions {
  readonly max?: number;
  readonly windowMs?: number;
  /** Counted in Redis (with the ledger's in-process fallback) through this connection; in process memory otherwise. */
  readonly redis?: RedisConnection;
  readonly logger?: Logger;
  /** The ledger's longest wait for Redis before deciding in memory (250 ms). */
  readonly redisTimeoutMs?: number;
}

/** One gateway process as far as limits go: its own limiters on its own ledger (and Redis connection, when given). */
async function startLimitedApp(keys: FileKeyStore, options: LimitedAppOptions): Promise<LimitedApp> {
  const ledger = options.redis
    ? new FallbackLedger(options.redis, {
        logger: options.logger ?? pino({ level: 'silent' }),
        timeoutMs: options.redisTimeoutMs,
      })
    : undefined;
  const limiters = createRateLimiters({ ledger, max: options.max, windowMs: options.windowMs });
  const app = await startGuardedApp({
    model: [createAuthenticator({ store: keys, staticKeys: [KEY] }), limiters.perKey],
    catalog: [limiters.perAddress],
  });
  return {
    url: app.url,
    limiters,
    async close() {
      await app.close();
      await ledger?.close();
    },
  };
}

/** The requests Redis counted for a key id in its current window (every window's counter summed). */
async function countedInRedis(url: string, keyId: string): Promise<number> {
  const client = new Redis(url);
  try {
    const names = await client.keys(`${LIMIT_KEY_PREFIX}key:${keyId}:rpm:*`);
    const values = names.length ? await client.mget(...names) : [];
    return values.reduce((sum, value) => sum + Number(value ?? 0), 0);
  } finally {
    client.disconnect();
  }
}

async function connect(target: Parameters<typeof createRedisClient>[0], logger?: Logger): Promise<RedisConnection> {
  const client = createRedisClient(target, logger);
  expect(await waitUntilReady(client, 10_000)).to.equal(true);
  return client;
}

const statuses = (answers: Answer[]) => answers.map((answer) => answer.status);
const lines = (text: string, message: string) => text.split('\n').filter((line) => line.includes(message)).length;

describe('rate limit text', () => {
  it('names the limit and window in force', () => {
    expect([60_000, 1000, 3_600_000, 90_000, 7_200_000, 86_400_000, 120_000, 1500].map(describeWindow)).to.deep.equal([
      '1 minute',
      '1 second',
      '1 hour',
      '90 seconds',
      '2 hours',
      '1 day',
      '2 minutes',
      '1500 milliseconds',
    ]);
    expect(rateLimitText(100, 60_000)).to.equal('Rate limit exceeded: 100 per 1 minute');
  });
});

describe('rate limiter', function () {
  this.timeout(60_000);
  let dataDir: string;
  let keys: FileKeyStore;

  before(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'gateway-limits-'));
    keys = new FileKeyStore(dataDir);
  });
  after(async () => rm(dataDir, { recursive: true, force: true }));

  async function expectHundredAndFirstRefused(app: GuardedApp): Promise<void> {
    await withinOneWindow(15_000);
    const first = await send(app.url, '/v1/chat/completions', { key: KEY });
    expect(first.status).to.equal(200);
    // Windows are UTC minutes: the reset is wherever the clock is in the current one.
    expect(first.headers.get('ratelimit')).to.match(/^"100-in-1min"; r=99; t=([1-9]|[1-5]\d|60)$/);
    expect(first.headers.get('ratelimit-policy')).to.match(/^"100-in-1min"; q=100; w=60; pk=:[A-Za-z0-9+/=]+:$/);
    for (let index = 2; index <= 100; index += 1)
      expect((await send(app.url, '/v1/chat/completions', { key: KEY })).status).to.equal(200);
    const refused = await send(app.url, '/v1/chat/completions', { key: KEY });
    expect(refused.status).to.equal(429);
    expect(refused.body).to.deep.equal({ detail: 'Rate limit exceeded: 100 per 1 minute' });
    expect(refused.headers.get('ratelimit')).to.match(/; r=0; t=\d+$/);
    expect(refused.headers.get('ratelimit-policy')).to.match(/; q=100; w=60;/);
    expect(Number(refused.headers.get('retry-after'))).to.be.within(1, 60);
  }

  it('refuses the 101st request of a minute with 429, RateLimit headers and Retry-After (process memory)', async () => {
    const app = await startLimitedApp(keys, {});
    try {
      await expectHundredAndFirstRefused(app);
      expect(app.limiters.degraded()).to.equal(false);
    } finally {
      await app.close();
    }
  });

  it("applies a key's own rpm to that key only, and counts the catalog per client address", async () => {
    const { key: small } = await keys.create({ name: 'small', rpm: 3 });
    const app = await startLimitedApp(keys, { max: 5, windowMs: 2000 });
    try {
      await withinOneWindow(1500, 2000);
      const answers = [];
      for (let index = 0; index < 4; index += 1)
        answers.push(await send(app.url, '/v1/chat/completions', { key: small }));
      expect(statuses(answers)).to.deep.equal([200, 200, 200, 429]);
      expect(answers[3]!.body).to.deep.equal({ detail: 'Rate limit exceeded: 3 per 2 seconds' });
      expect((await send(app.url, '/v1/chat/completions', { key: KEY })).status).to.equal(200);
      const catalog = [];
      for (let index = 0; index < 6; index += 1) catalog.push(await send(app.url, '/v1/models'));
      expect(statuses(catalog)).to.deep.equal([200, 200, 200, 200, 200, 429]);
      expect(catalog[5]!.body).to.deep.equal({ detail: 'Rate limit exceeded: 5 per 2 seconds' });
      await nextWindow(2000);
      expect((await send(app.url, '/v1/chat/completions', { key: small })).status).to.equal(200);
    } finally {
      await app.close();
    }
  });

  describe('on one Redis', () => {
    let server: TestRedisServer;
    const clients: RedisConnection[] = [];
    const apps: LimitedApp[] = [];

    before(async () => {
      server = await TestRedisServer.start();
    });
    afterEach(async () => {
      await Promise.all(apps.splice(0).map((app) => app.close()));
      clients.splice(0).forEach((client) => client.disconnect());
      if (!server.running) await server.restart();
      const cleaner = new Redis(server.url);
      await cleaner.flushall();
      cleaner.disconnect();
    });
    after(async () => server.close());

    async function limitedApps(
      count: number,
      options: Omit<LimitedAppOptions, 'redis'>,
      patience?: { commandTimeoutMs: number },
    ): Promise<LimitedApp[]> {
      for (let index = 0; index < count; index += 1) {
        const client = await connect(server.url, options.logger);
        // ioredis reads it for every command sent.
        if (patience) (client as Redis).options.commandTimeout = patience.commandTimeoutMs;
        clients.push(client);
        apps.push(await startLimitedApp(keys, { ...options, redis: client }));
      }
      return apps.slice(-count);
    }

    it('refuses the 101st request with the same 429, counting only the requests it let through', async () => {
      const [app] = await limitedApps(1, {});
      await expectHundredAndFirstRefused(app!);
      // A minute boundary may fall inside the test: its windows are summed.
      expect(await countedInRedis(server.url, KEY_ID)).to.equal(100);
    });

    it('lets exactly the limit through across 3 apps, each with its own connection, round-robin', async () => {
      const { key: own } = await keys.create({ name: 'own limit', rpm: 7 });
      // Exact sharing is checked here, not the deadlines (the hanging-Redis check below covers them): on a
      // loaded machine a reply that has arrived can be read after a 250 ms deadline fired, and that
      // request would rightly be counted in memory. Deadlines far beyond any stall keep every count in Redis.
      const trio = await limitedApps(3, { max: 30, redisTimeoutMs: 60_000 }, { commandTimeoutMs: 60_000 });
      await withinOneWindow(20_000);
      const answers = await Promise.all(
        Array.from({ length: 90 }, (_, index) => send(trio[index % 3]!.url, '/v1/chat/completions', { key: KEY })),
      );
      expect(statuses(answers).filter((status) => status === 200)).to.have.length(30);
      expect(statuses(answers).filter((status) => status === 429)).to.have.length(60);
      const ownAnswers = await Promise.all(
        Array.from({ length: 21 }, (_, index) => send(trio[index % 3]!.url, '/v1/chat/completions', { key: own })),
      );
      expect(statuses(ownAnswers).filter((status) => status === 200)).to.have.length(7);
      expect(ownAnswers.find((answer) => answer.status === 429)!.body).to.deep.equal({
        detail: 'Rate limit exceeded: 7 per 1 minute',
      });
      expect(trio.map((app) => app.limiters.degraded())).to.deep.equal([false, false, false]);
    });

    it('keeps serving through a Redis stop and restart, flagging the fallback and clearing it', async () => {
      const logs = captureLogs();
      const [app] = await limitedApps(1, { max: 1000, logger: logs.logger });
      expect((await send(app!.url, '/v1/chat/completions', { key: KEY })).status).to.equal(200);
      await server.stop();
      const during = [];
      for (let index = 0; index < 10; index += 1)
        during.push(await send(app!.url, '/v1/chat/completions', { key: KEY }));
      expect(statuses(during)).to.deep.equal(Array(10).fill(200));
      // The memory count continues from the 1 request Redis counted before it went away.
      expect(during[9]!.headers.get('ratelimit')).to.match(/r=989;/);
      expect(app!.limiters.degraded()).to.equal(true);
      await server.restart();
      await eventually(
        async () =>
          (await send(app!.url, '/v1/chat/completions', { key: KEY })).status === 200 && !app!.limiters.degraded(),
        'the fallback to clear',
        10_000,
      );
      // The fallback may clear by its background probe before any request: this one is counted in Redis.
      expect((await send(app!.url, '/v1/chat/completions', { key: KEY })).status).to.equal(200);
      expect(await countedInRedis(server.url, KEY_ID)).to.be.at.least(1);
      expect(lines(logs.text(), 'counting in process memory')).to.equal(1);
      expect(lines(logs.text(), 'counting in Redis again')).to.equal(1);
    });

    it('decides in memory while Redis hangs (answered before Redis is let go on), and goes back when it answers', async () => {
      const [app] = await limitedApps(1, { max: 1000 });
      expect((await send(app!.url, '/v1/chat/completions', { key: KEY })).status).to.equal(200);
      server.pause();
      try {
        // Redis stays stopped until this answer is in: a request waiting for Redis would never get one.
        const answer = await send(app!.url, '/v1/chat/completions', { key: KEY });
        expect(answer.status).to.equal(200);
        expect(app!.limiters.degraded()).to.equal(true);
      } finally {
        server.resume();
      }
      await eventually(
        async () =>
          (await send(app!.url, '/v1/chat/completions', { key: KEY })).status === 200 && !app!.limiters.degraded(),
        'Redis to count again',
      );
    });

    it('starts while Redis is down, and counts in Redis once it is up', async () => {
      await server.stop();
      const client = createRedisClient(server.url);
      // Far beyond any stall of a loaded machine: this checks the recovery, not the deadlines.
      (client as Redis).options.commandTimeout = 60_000;
      clients.push(client);
      // A limit the polling below cannot reach, however long a loaded machine takes to recover (every
      // request until then is counted, in memory; at the limit the 429s would hide the recovery).
      const app = await startLimitedApp(keys, { max: 1_000_000, redis: client, redisTimeoutMs: 60_000 });
      apps.push(app);
      expect((await send(app.url, '/v1/chat/completions', { key: KEY })).status).to.equal(200);
      expect(app.limiters.degraded()).to.equal(true);
      await server.restart();
      const reader = new Redis(server.url);
      try {
        const served: number[] = [];
        // Redis itself must hold a count: a request sent while the fallback was still on is counted in
        // memory, even if the fallback clears before its answer arrives.
        await eventually(
          async () => {
            served.push((await send(app.url, '/v1/chat/completions', { key: KEY })).status);
            return !app.limiters.degraded() && (await countedInRedis(server.url, KEY_ID)) >= 1;
          },
          'a request counted in Redis',
          30_000,
        );
        expect(
          served.filter((status) => status !== 200),
          'served throughout',
        ).to.deep.equal([]);
      } finally {
        reader.disconnect();
      }
    });
  });

  describe('on a 3-master Redis Cluster', () => {
    let cluster: TestRedisCluster;
    before(async () => {
      cluster = await TestRedisCluster.start();
    });
    after(async () => cluster.close());

    it('lets exactly the limit through across apps', async () => {
      const clients = [
        await connect({ cluster: cluster.startupNodes }),
        await connect({ cluster: cluster.startupNodes }),
      ];
      // What is measured is the count across a cluster's masters: a deadline that a loaded machine can
      // miss would measure the fallback to process memory instead (tested on its own above).
      const pair = await Promise.all(
        clients.map((client) => startLimitedApp(keys, { max: 5, redis: client, redisTimeoutMs: 5000 })),
      );
      try {
        const others = await Promise.all(
          Array.from({ length: 6 }, async (_, index) => (await keys.create({ name: `spread ${index}`, rpm: 2 })).key),
        );
        await withinOneWindow(15_000);
        const answers = await Promise.all(
          Array.from({ length: 12 }, (_, index) => send(pair[index % 2]!.url, '/v1/chat/completions', { key: KEY })),
        );
        expect(statuses(answers).filter((status) => status === 200)).to.have.length(5);
        // Keys of several ids spread over the slots of all three masters.
        for (const other of others) {
          const own = await Promise.all(
            Array.from({ length: 4 }, (_, index) => send(pair[index % 2]!.url, '/v1/chat/completions', { key: other })),
          );
          expect(statuses(own).filter((status) => status === 200)).to.have.length(2);
        }
        expect(pair.map((app) => app.limiters.degraded())).to.deep.equal([false, false]);
      } finally {
        await Promise.all(pair.map((app) => app.close()));
        clients.forEach((client) => client.disconnect());
      }
    });
  });
});
