import { expect } from 'chai';
import { appendFile, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Cluster } from 'ioredis';
import { createLogger } from '../../../src/core/logger.ts';
import { createRedisClient, type RedisConnection } from '../../../src/stores/redis/redis-client.ts';
import { EmbeddedUsageStore } from '../../../src/stores/usage/embedded-usage-store.ts';
import { RedisUsageStore, usageKeyTag } from '../../../src/stores/usage/redis-usage-store.ts';
import { costNanoUsd, type UsageRecord, type UsageRow, type UsageStore } from '../../../src/usage/usage-accounting.ts';
import { TestRedisCluster, TestRedisServer } from '../../helpers/redis-server.ts';
import { eventually } from '../../helpers/eventually.ts';

const logger = createLogger('silent');

let sequence = 0;
function record(overrides: Partial<UsageRecord> = {}): UsageRecord {
  sequence += 1;
  const inputTokens = overrides.inputTokens ?? 100;
  const outputTokens = overrides.outputTokens ?? 20;
  return {
    id: `rec-${process.pid}-${sequence}`,
    time: '2026-11-20T10:00:00.000Z',
    keyId: 'key_a',
    route: 'chat-completions',
    requestedModel: 'acme-latest',
    model: 'acme/model-1',
    upstream: 'acme',
    status: 200,
    stream: false,
    latencyMs: 12,
    inputTokens,
    outputTokens,
    cachedTokens: 10,
    totalTokens: inputTokens + outputTokens,
    chargedTokens: inputTokens - 10 + outputTokens + 1,
    costUsd: 0.000123,
    estimated: false,
    outcome: 'complete',
    ...overrides,
  };
}

/** The row a store should answer for these records (all in one group). */
type RowGroup = { model?: string; day?: string; key_id?: string; end_user?: string | null };
function expectedRow(group: RowGroup, records: readonly UsageRecord[]): UsageRow {
  const sum = (pick: (entry: UsageRecord) => number) => records.reduce((total, entry) => total + pick(entry), 0);
  return {
    ...group,
    requests: records.length,
    input_tokens: sum((entry) => entry.inputTokens),
    output_tokens: sum((entry) => entry.outputTokens),
    cached_tokens: sum((entry) => entry.cachedTokens),
    total_tokens: sum((entry) => entry.totalTokens),
    charged_tokens: sum((entry) => entry.chargedTokens),
    cost_usd: sum((entry) => costNanoUsd(entry.costUsd)) / 1e9,
    cache_hits: sum((entry) => (entry.cache === 'hit' ? 1 : 0)),
    saved_usd: sum((entry) => costNanoUsd(entry.savedUsd ?? 0)) / 1e9,
  };
}

const waitFor = (check: () => Promise<boolean> | boolean, what: string, timeoutMs = 30_000) =>
  eventually(check, what, timeoutMs);

/** The value of a read, tried again while it fails (at most 30 s). */
async function retried<T>(read: () => Promise<T>): Promise<T> {
  let value: T | undefined;
  await waitFor(async () => ((value = await read()), true), 'a read to answer');
  return value as T;
}

const pendingJournals = async (dir: string) => (await readdir(dir)).filter((name) => name.startsWith('usage-pending'));

/** Behaviour both stores share: what is recorded is what is read back, grouped and filtered. */
function storeContract(open: () => Promise<UsageStore>) {
  let store: UsageStore;
  beforeEach(async () => (store = await open()));
  afterEach(async () => store.close());

  const monday = record({ time: '2026-11-16T08:00:00.000Z', inputTokens: 7, outputTokens: 3 });
  const tuesday = record({ time: '2026-11-17T23:59:59.999Z', model: 'acme/model-2', costUsd: 0.5 });
  const tuesdayAgain = record({ time: '2026-11-17T00:00:00.000Z', inputTokens: 1000, outputTokens: 1 });
  const lastMonth = record({ time: '2026-10-31T12:00:00.000Z', outputTokens: 999 });
  const otherKey = record({ keyId: 'key_b', time: '2026-11-17T10:00:00.000Z' });
  const all = [monday, tuesday, tuesdayAgain, lastMonth, otherKey];

  beforeEach(async () => {
    for (const entry of all) store.record(entry);
    await store.flush();
  });

  it('sums per model for one key', async () => {
    expect(await store.query({ keyId: 'key_a', groupBy: 'model' })).to.deep.equal([
      expectedRow({ model: 'acme/model-1' }, [monday, tuesdayAgain, lastMonth]),
      expectedRow({ model: 'acme/model-2' }, [tuesday]),
    ]);
  });

  it('sums per UTC day over all models, and over every key when none is given', async () => {
    expect(await store.query({ keyId: 'key_a', groupBy: 'day' })).to.deep.equal([
      expectedRow({ day: '2026-10-31' }, [lastMonth]),
      expectedRow({ day: '2026-11-16' }, [monday]),
      expectedRow({ day: '2026-11-17' }, [tuesday, tuesdayAgain]),
    ]);
    expect(await store.query({ groupBy: 'model' })).to.deep.equal([
      expectedRow({ model: 'acme/model-1' }, [monday, tuesdayAgain, lastMonth, otherKey]),
      expectedRow({ model: 'acme/model-2' }, [tuesday]),
    ]);
  });

  it('filters by the UTC days of from and to, both included', async () => {
    const from = new Date('2026-11-17T15:00:00.000Z');
    expect(await store.query({ keyId: 'key_a', from, groupBy: 'day' })).to.deep.equal([
      expectedRow({ day: '2026-11-17' }, [tuesday, tuesdayAgain]),
    ]);
    expect(
      await store.query({ keyId: 'key_a', to: new Date('2026-11-16T00:00:00.000Z'), groupBy: 'model' }),
    ).to.deep.equal([expectedRow({ model: 'acme/model-1' }, [monday, lastMonth])]);
    expect(
      await store.query({ from: new Date('2026-11-01'), to: new Date('2026-11-16T23:00:00Z'), groupBy: 'model' }),
    ).to.deep.equal([expectedRow({ model: 'acme/model-1' }, [monday])]);
    expect(
      await store.query({
        from: new Date('2026-11-17T00:00:00Z'),
        to: new Date('2026-11-17T23:59:59Z'),
        keyId: 'key_b',
        groupBy: 'model',
      }),
    ).to.deep.equal([expectedRow({ model: 'acme/model-1' }, [otherKey])]);
    expect(await store.query({ keyId: 'nobody', groupBy: 'model' })).to.deep.equal([]);
  });

  it('sums per key id over all models and days, sorted by id, within the range', async () => {
    expect(await store.query({ groupBy: 'key' })).to.deep.equal([
      expectedRow({ key_id: 'key_a' }, [monday, tuesday, tuesdayAgain, lastMonth]),
      expectedRow({ key_id: 'key_b' }, [otherKey]),
    ]);
    expect(await store.query({ groupBy: 'key', from: new Date('2026-11-17'), keyId: 'key_a' })).to.deep.equal([
      expectedRow({ key_id: 'key_a' }, [tuesday, tuesdayAgain]),
    ]);
  });

  it('sums per end user of each key (those naming none last, as null), within the range, and leaves the other groupings as they were', async () => {
    const alice = record({ time: '2026-11-17T09:00:00.000Z', endUser: 'alice' });
    const aliceAgain = record({ time: '2026-11-16T09:00:00.000Z', endUser: 'alice', model: 'acme/model-2' });
    const bob = record({ time: '2026-11-17T09:00:00.000Z', endUser: 'bob|=:{x}' });
    const bobOfOtherKey = record({ keyId: 'key_b', time: '2026-11-17T11:00:00.000Z', endUser: 'bob|=:{x}' });
    for (const entry of [alice, aliceAgain, bob, bobOfOtherKey]) store.record(entry);
    await store.flush();
    const row = (keyId: string, endUser: string | null, records: UsageRecord[]) =>
      expectedRow({ key_id: keyId, end_user: endUser }, records);
    expect(await store.query({ groupBy: 'end_user' })).to.deep.equal([
      row('key_a', 'alice', [alice, aliceAgain]),
      row('key_a', 'bob|=:{x}', [bob]),
      row('key_a', null, [monday, tuesday, tuesdayAgain, lastMonth]),
      row('key_b', 'bob|=:{x}', [bobOfOtherKey]),
      row('key_b', null, [otherKey]),
    ]);
    expect(await store.query({ groupBy: 'end_user', keyId: 'key_a', from: new Date('2026-11-17') })).to.deep.equal([
      row('key_a', 'alice', [alice]),
      row('key_a', 'bob|=:{x}', [bob]),
      row('key_a', null, [tuesday, tuesdayAgain]),
    ]);
    expect(await store.query({ groupBy: 'key', keyId: 'key_b' })).to.deep.equal([
      expectedRow({ key_id: 'key_b' }, [otherKey, bobOfOtherKey]),
    ]);
  });
}

describe('EmbeddedUsageStore', () => {
  let dir: string;
  beforeEach(async () => (dir = await mkdtemp(join(tmpdir(), 'usage-embedded-'))));
  afterEach(async () => rm(dir, { recursive: true, force: true }));

  describe('store contract', () => storeContract(() => EmbeddedUsageStore.open(dir, logger)));

  it('keeps the sums per end user across a compaction and a restart', async () => {
    const first = await EmbeddedUsageStore.open(dir, logger, { compactEvery: 2 });
    const records = [
      record({ endUser: 'alice' }),
      record({ endUser: 'alice' }),
      record({}),
      record({ endUser: 'bob' }),
    ];
    for (const entry of records) first.record(entry);
    await eventually(async () => (await readdir(dir)).includes('usage.snapshot.json'), 'a snapshot is written');
    await first.close();
    const reopened = await EmbeddedUsageStore.open(dir, logger);
    expect(await reopened.query({ groupBy: 'end_user' })).to.deep.equal([
      expectedRow({ key_id: 'key_a', end_user: 'alice' }, records.slice(0, 2)),
      expectedRow({ key_id: 'key_a', end_user: 'bob' }, records.slice(3)),
      expectedRow({ key_id: 'key_a', end_user: null }, records.slice(2, 3)),
    ]);
    await reopened.close();
  });

  it('writes one JSONL line per record and keeps every total across a restart, skipping a torn last line', async () => {
    const first = await EmbeddedUsageStore.open(dir, logger);
    const records = Array.from({ length: 50 }, (_, index) =>
      record({ inputTokens: index, model: index % 2 ? 'acme/model-1' : 'acme/model-2' }),
    );
    records.forEach((entry) => first.record(entry));
    await first.close();
    const lines = (await readFile(join(dir, 'usage.jsonl'), 'utf8')).trimEnd().split('\n');
    expect(lines.map((line) => JSON.parse(line))).to.deep.equal(records);
    // A crash mid-write leaves a torn line: it is skipped, nothing else is lost.
    await appendFile(join(dir, 'usage.jsonl'), '{"id":"torn","time":"2026');

    const second = await EmbeddedUsageStore.open(dir, logger);
    const more = record({ time: '2026-11-21T00:00:00.000Z' });
    second.record(more);
    await second.close();
    const third = await EmbeddedUsageStore.open(dir, logger);
    expect(await third.query({ groupBy: 'model' })).to.deep.equal([
      expectedRow({ model: 'acme/model-1' }, [...records.filter((_, index) => index % 2), more]),
      expectedRow(
        { model: 'acme/model-2' },
        records.filter((_, index) => !(index % 2)),
      ),
    ]);
    await third.close();
  });
});

describe('RedisUsageStore', function () {
  this.timeout(120_000);
  let redis: TestRedisServer;
  let dir: string;
  let client: RedisConnection;

  beforeEach(async () => {
    // Persisted like a production Redis, so a restart keeps what was acknowledged before the kill.
    redis = await TestRedisServer.start({ args: ['--appendonly', 'yes', '--appendfsync', 'always'] });
    dir = await mkdtemp(join(tmpdir(), 'usage-redis-'));
    client = createRedisClient(redis.url, logger);
    await waitFor(() => client.status === 'ready', 'the client to connect');
  });
  afterEach(async () => {
    client.disconnect();
    await redis.close();
    await rm(dir, { recursive: true, force: true });
  });

  describe('store contract', () => storeContract(() => RedisUsageStore.open(client, { dataDir: dir, logger })));

  it("keeps each record in its key's capped stream and daily totals, applied once however often it comes", async () => {
    const store = await RedisUsageStore.open(client, { dataDir: dir, logger, streamMaxLength: 1000 });
    const once = record({ stream: true, outcome: 'upstream_cut', estimated: true });
    const other = record({ keyId: 'key_b', model: 'acme/model-2' });
    store.record(once);
    store.record(once);
    store.record(other);
    await store.flush();
    store.record(once);
    await store.flush();
    expect(await store.query({ keyId: 'key_a', groupBy: 'model' })).to.deep.equal([
      expectedRow({ model: 'acme/model-1' }, [once]),
    ]);
    expect(await store.query({ groupBy: 'model' })).to.deep.equal([
      expectedRow({ model: 'acme/model-1' }, [once]),
      expectedRow({ model: 'acme/model-2' }, [other]),
    ]);
    const entries = await client.xrange(`${usageKeyTag('key_a')}:records`, '-', '+');
    expect(entries.map(([, fields]) => JSON.parse(fields[1]!))).to.deep.equal([once]);
    expect(await client.hgetall(`${usageKeyTag('key_a')}:totals:2026-11-20:acme/model-1`)).to.deep.equal({
      requests: '1',
      input_tokens: '100',
      output_tokens: '20',
      cached_tokens: '10',
      total_tokens: '120',
      charged_tokens: '111',
      cost_nano_usd: '123000',
    });
    await store.close();
  });

  it('loses nothing when records overflow the memory queue while a batch is being written', async () => {
    const store = await RedisUsageStore.open(client, { dataDir: dir, logger, maxQueued: 7 });
    const records = Array.from({ length: 1000 }, (_, index) => record({ inputTokens: index }));
    for (const [index, entry] of records.entries()) {
      store.record(entry);
      if (index % 50 === 0) await new Promise((resolve) => setImmediate(resolve));
    }
    await store.flush();
    expect(await store.query({ keyId: 'key_a', groupBy: 'model' })).to.deep.equal([
      expectedRow({ model: 'acme/model-1' }, records),
    ]);
    expect(await pendingJournals(dir)).to.deep.equal([]);
    await store.close();
  });

  it('loses nothing and counts nothing twice when redis-server is killed mid-run and restarted', async () => {
    const store = await RedisUsageStore.open(client, { dataDir: dir, logger, maxQueued: 25, retryDelayMs: 50 });
    const recorded: UsageRecord[] = [];
    let index = 0;
    const recordSome = async (count: number) => {
      for (let done = 0; done < count; done += 1, index += 1) {
        const entry = record({
          inputTokens: 1 + (index % 97),
          outputTokens: index % 13,
          costUsd: (index % 7) / 1000,
          model: index % 3 ? 'acme/model-1' : 'acme/model-2',
        });
        recorded.push(entry);
        store.record(entry);
        if (index % 10 === 0) await new Promise((resolve) => setImmediate(resolve));
      }
    };

    // A producer keeps recording all along, as requests keep finishing: before, during and after the kill.
    let producing = true;
    const producer = (async () => {
      while (producing) {
        await recordSome(5);
        await new Promise((resolve) => setTimeout(resolve, 1));
      }
    })();
    await waitFor(
      async () => ((await store.query({ keyId: 'key_a', groupBy: 'day' }))[0]?.requests ?? 0) > 0,
      'the first records to land',
    );
    await redis.stop();
    const recordedBeforeKill = recorded.length;
    await waitFor(() => !store.healthy, 'the store to notice the outage');
    // More than the memory queue holds arrive while Redis is away, so they spill to disk.
    await waitFor(async () => (await pendingJournals(dir)).length > 0, 'records to spill to disk');
    await redis.restart();
    const recordedBeforeRestart = recorded.length;
    await waitFor(() => store.healthy && recorded.length > recordedBeforeRestart + 100, 'records after the restart');
    producing = false;
    await producer;
    expect(recordedBeforeRestart).to.be.greaterThan(recordedBeforeKill);

    const expected = [
      expectedRow(
        { model: 'acme/model-1' },
        recorded.filter((entry) => entry.model === 'acme/model-1'),
      ),
      expectedRow(
        { model: 'acme/model-2' },
        recorded.filter((entry) => entry.model === 'acme/model-2'),
      ),
    ];
    await waitFor(
      async () => JSON.stringify(await store.query({ keyId: 'key_a', groupBy: 'model' })) === JSON.stringify(expected),
      'every record to be written after the restart',
    );
    await store.flush();
    // Read again once flushed (a read that meets the client's 500 ms command timeout on a loaded machine is retried).
    const rows = await retried(() => store.query({ keyId: 'key_a', groupBy: 'model' }));
    expect(rows).to.deep.equal(expected);
    expect(await retried(() => client.xlen(`${usageKeyTag('key_a')}:records`))).to.equal(recorded.length);
    expect(store.healthy).to.equal(true);
    expect(await pendingJournals(dir)).to.deep.equal([]);
    await store.close();
  });

  it('replays at start what an earlier process spilled, exactly once, also records it had already written', async () => {
    const first = await RedisUsageStore.open(client, { dataDir: dir, logger });
    const written = record({ inputTokens: 5 });
    first.record(written);
    await first.flush();
    await redis.stop();
    const spilled = [record({ inputTokens: 1 }), record({ inputTokens: 2 }), record({ inputTokens: 3 })];
    spilled.forEach((entry) => first.record(entry));
    await first.close();
    // A crash in the middle of an earlier replay leaves a journal whose first record was already written.
    await writeFile(
      join(dir, 'usage-pending.1-1.jsonl'),
      `${JSON.stringify(written)}\n${JSON.stringify(record({ inputTokens: 4 }))}\n{"torn`,
    );
    expect(await pendingJournals(dir)).to.have.length(2);

    await redis.restart();
    await waitFor(() => client.status === 'ready', 'the client to reconnect');
    const second = await RedisUsageStore.open(client, { dataDir: dir, logger });
    await waitFor(async () => (await pendingJournals(dir)).length === 0, 'the spilled journals to be replayed');
    await second.flush();
    const [row] = await second.query({ keyId: 'key_a', groupBy: 'model' });
    expect(row).to.deep.include({ requests: 5, input_tokens: 5 + 1 + 2 + 3 + 4 });
    await second.close();
  });
});

describe('RedisUsageStore on a Redis Cluster', function () {
  this.timeout(120_000);
  let cluster: TestRedisCluster;
  let client: Cluster;
  let dir: string;

  before(async () => {
    cluster = await TestRedisCluster.start();
    client = new Cluster(cluster.startupNodes, { enableOfflineQueue: true });
    dir = await mkdtemp(join(tmpdir(), 'usage-cluster-'));
  });
  after(async () => {
    client.disconnect();
    await cluster.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('writes each record in one slot and reads every key back', async () => {
    const store = await RedisUsageStore.open(client, { dataDir: dir, logger });
    const records = Array.from({ length: 30 }, (_, index) =>
      record({ keyId: `key_${index % 6}`, model: index % 2 ? 'acme/model-1' : 'acme/model-2', inputTokens: index }),
    );
    records.forEach((entry) => store.record(entry));
    records.slice(0, 10).forEach((entry) => store.record(entry));
    await store.flush();
    expect(store.healthy).to.equal(true);
    expect(await store.query({ groupBy: 'model' })).to.deep.equal([
      expectedRow(
        { model: 'acme/model-1' },
        records.filter((entry) => entry.model === 'acme/model-1'),
      ),
      expectedRow(
        { model: 'acme/model-2' },
        records.filter((entry) => entry.model === 'acme/model-2'),
      ),
    ]);
    expect(await store.query({ keyId: 'key_3', groupBy: 'day' })).to.deep.equal([
      expectedRow(
        { day: '2026-11-20' },
        records.filter((entry) => entry.keyId === 'key_3'),
      ),
    ]);
    await store.close();
  });
});
