import { expect } from 'chai';
import { appendFile, mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { createLogger } from '../../src/logger.ts';
import { EmbeddedUsageStore } from '../../src/usage/embedded-usage-store.ts';
import { RedisUsageStore } from '../../src/usage/redis-usage-store.ts';
import type { UsageRecord } from '../../src/usage/usage-record.ts';
import { TestRedisServer } from '../helpers/redis-server.ts';

let sequence = 0;
function record(overrides: Partial<UsageRecord> = {}): UsageRecord {
  sequence += 1;
  return {
    id: `rec-${process.pid}-${sequence}`,
    time: '2026-11-20T10:00:00.000Z',
    keyId: 'key_a',
    route: 'chat-completions',
    requestedModel: 'acme-latest',
    model: 'acme/one',
    upstream: 'acme',
    status: 200,
    stream: false,
    latencyMs: 12,
    inputTokens: 100,
    outputTokens: 20,
    cachedTokens: 10,
    totalTokens: 120,
    chargedTokens: 111,
    costUsd: 0.000123,
    estimated: false,
    ...overrides,
  };
}

const logger = createLogger('silent');

async function waitFor(check: () => Promise<boolean>, what: string): Promise<void> {
  const deadline = Date.now() + 15_000;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe('EmbeddedUsageStore', () => {
  let dir: string;
  beforeEach(async () => (dir = await mkdtemp(join(tmpdir(), 'usage-embedded-'))));
  afterEach(async () => rm(dir, { recursive: true, force: true }));

  it('groups by model and by day, filters by key and days, and keeps totals across a restart', async () => {
    const store = await EmbeddedUsageStore.open(dir, logger);
    store.record(record());
    store.record(record({ model: 'acme/two', time: '2026-11-21T23:59:59.000Z', costUsd: 0.5 }));
    store.record(record({ keyId: 'key_b' }));
    await store.close();
    // A crash mid-write leaves a torn line: it is skipped, nothing else is lost.
    await appendFile(join(dir, 'usage.jsonl'), '{"id":"torn","time":"2026');
    const reopened = await EmbeddedUsageStore.open(dir, logger);
    expect(await reopened.query({ keyId: 'key_a', groupBy: 'model' })).to.deep.equal([
      { model: 'acme/one', requests: 1, input_tokens: 100, output_tokens: 20, cached_tokens: 10, total_tokens: 120, charged_tokens: 111, cost_usd: 0.000123 },
      { model: 'acme/two', requests: 1, input_tokens: 100, output_tokens: 20, cached_tokens: 10, total_tokens: 120, charged_tokens: 111, cost_usd: 0.5 },
    ]);
    expect((await reopened.query({ groupBy: 'day' })).map((row) => [row.day, row.requests])).to.deep.equal([['2026-11-20', 2], ['2026-11-21', 1]]);
    expect(await reopened.query({ keyId: 'key_a', fromDay: '2026-11-21', toDay: '2026-11-21', groupBy: 'model' })).to.have.length(1);
    expect(await reopened.chargedTokens('key_a', '2026-11-20', '2026-11-21')).to.equal(222);
    await reopened.close();
  });
});

describe('RedisUsageStore', function () {
  this.timeout(60_000);
  let redis: TestRedisServer;
  let dir: string;
  let client: Redis;

  beforeEach(async () => {
    // Persisted like a production Redis, so a restart keeps what was written before the kill.
    redis = await TestRedisServer.start({ args: ['--appendonly', 'yes', '--appendfsync', 'always'] });
    dir = await mkdtemp(join(tmpdir(), 'usage-redis-'));
    client = new Redis(redis.url, { enableOfflineQueue: false, maxRetriesPerRequest: 1, commandTimeout: 500, retryStrategy: () => 50 });
    client.on('error', () => {});
    await new Promise((resolve) => client.once('ready', resolve));
  });
  afterEach(async () => {
    client.disconnect();
    await redis.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('stores each record once in its key\'s stream and daily totals, however often it is replayed', async () => {
    const store = await RedisUsageStore.open(client, { dataDir: dir, logger });
    const once = record();
    store.record(once);
    store.record(once);
    store.record(record({ keyId: 'key_b', model: 'acme/two' }));
    await store.flush();
    expect(await store.query({ keyId: 'key_a', groupBy: 'model' })).to.deep.equal([
      { model: 'acme/one', requests: 1, input_tokens: 100, output_tokens: 20, cached_tokens: 10, total_tokens: 120, charged_tokens: 111, cost_usd: 0.000123 },
    ]);
    expect((await store.query({ groupBy: 'model' })).map((row) => row.model)).to.deep.equal(['acme/one', 'acme/two']);
    expect(await client.xlen('{gw-usage:key_a}:records')).to.equal(1);
    await store.close();
  });

  it('loses nothing and counts nothing twice when Redis is killed mid-run and comes back', async () => {
    const store = await RedisUsageStore.open(client, { dataDir: dir, logger, maxQueued: 50, retryDelayMs: 50 });
    for (let index = 0; index < 100; index += 1) store.record(record({ inputTokens: index, totalTokens: index + 20 }));
    await waitFor(async () => ((await store.query({ keyId: 'key_a', groupBy: 'model' }))[0]?.requests ?? 0) > 0, 'the first records to land');
    await redis.stop();
    // While Redis is away: 300 more, more than the memory queue holds, so most spill to disk.
    for (let index = 0; index < 300; index += 1) store.record(record({ inputTokens: 1, totalTokens: 21 }));
    await waitFor(async () => !store.healthy, 'the store to notice the outage');
    expect((await readdir(dir)).some((name) => name.startsWith('usage-pending'))).to.equal(true);
    await redis.restart();
    await waitFor(async () => {
      try {
        const [row] = await store.query({ keyId: 'key_a', groupBy: 'model' });
        return row?.requests === 400;
      } catch {
        return false;
      }
    }, 'every record after the restart');
    await store.flush();
    const [row] = await store.query({ keyId: 'key_a', groupBy: 'model' });
    expect(row!.requests).to.equal(400);
    expect(row!.input_tokens).to.equal((99 * 100) / 2 + 300);
    await store.close();
  });

  it('replays what an earlier process spilled, exactly once', async () => {
    const first = await RedisUsageStore.open(client, { dataDir: dir, logger, maxQueued: 1 });
    await redis.stop();
    const records = [record(), record(), record()];
    records.forEach((entry) => first.record(entry));
    await first.close();
    await redis.restart();
    await waitFor(async () => client.status === 'ready', 'the client to reconnect');
    // The first records may have reached Redis before the stop was noticed: replaying them is harmless.
    const second = await RedisUsageStore.open(client, { dataDir: dir, logger });
    await second.flush();
    await waitFor(async () => (await readdir(dir)).every((name) => !name.startsWith('usage-pending')), 'the spill journal to be replayed');
    const [row] = await second.query({ keyId: 'key_a', groupBy: 'model' });
    expect(row!.requests).to.equal(3);
    await second.close();
  });
});
