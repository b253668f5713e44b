import { expect } from 'chai';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { EmbeddedUsageStore, type CompactionStep } from '../../../src/stores/usage/embedded-usage-store.ts';
import { buildUsageRecord, type UsageRecord } from '../../../src/usage/usage-accounting.ts';
import { eventually } from '../../helpers/eventually.ts';

const logger = pino({ level: 'silent' });

function record(index: number): UsageRecord {
  return buildUsageRecord({
    keyId: `key_${index % 3}`,
    route: 'chat-completions',
    requestedModel: 'acme/model-1',
    model: index % 2 ? 'acme/model-1' : 'acme/model-2',
    upstream: 'acme',
    status: 200,
    stream: false,
    latencyMs: 5,
    usage: { inputTokens: 10 + index, outputTokens: index, cachedTokens: 0 },
    pricing: { input: 1, cachedInput: 0.1, output: 2 },
    time: new Date(Date.UTC(2026, 10, 1 + (index % 5))),
  });
}

async function totals(store: EmbeddedUsageStore) {
  return { byModel: await store.query({ groupBy: 'model' }), byDay: await store.query({ groupBy: 'day' }) };
}

/** What a store that never compacted reports for the same records. */
async function reference(records: UsageRecord[]) {
  const dir = await mkdtemp(join(tmpdir(), 'usage-reference-'));
  const store = await EmbeddedUsageStore.open(dir, logger, { compactEvery: Number.MAX_SAFE_INTEGER });
  records.forEach((entry) => store.record(entry));
  const result = await totals(store);
  await store.close();
  await rm(dir, { recursive: true, force: true });
  return result;
}

describe('embedded usage journal compaction', () => {
  let dir: string;
  beforeEach(async () => (dir = await mkdtemp(join(tmpdir(), 'usage-compaction-'))));
  afterEach(async () => rm(dir, { recursive: true, force: true }));

  it('reads a snapshot written before the response cache existed (its cells lack cache_hits and saved_nano_usd) as zeros for them', async () => {
    const before = {
      requests: 2,
      input_tokens: 20,
      output_tokens: 4,
      cached_tokens: 0,
      total_tokens: 24,
      charged_tokens: 24,
      cost_nano_usd: 28_000,
    };
    await writeFile(
      join(dir, 'usage.snapshot.json'),
      JSON.stringify({
        version: 1,
        sealedThrough: 0,
        cells: [{ keyId: 'key_0', day: '2026-11-01', model: 'acme/model-1', totals: before }],
      }),
    );
    const store = await EmbeddedUsageStore.open(dir, logger);
    const hit = {
      keyId: 'key_0',
      route: 'chat-completions',
      requestedModel: 'acme/model-1',
      model: 'acme/model-1',
      upstream: 'acme',
      status: 200,
      stream: false,
      latencyMs: 1,
    } as const;
    store.record(
      buildUsageRecord({
        ...hit,
        usage: { inputTokens: 10, outputTokens: 2, cachedTokens: 0 },
        pricing: { input: 1, cachedInput: 0.1, output: 2 },
        cacheHit: true,
        time: new Date(Date.UTC(2026, 10, 1)),
      }),
    );
    const [row] = await store.query({ groupBy: 'model' });
    expect(row).to.deep.include({
      model: 'acme/model-1',
      requests: 3,
      input_tokens: 30,
      cost_usd: 0.000028,
      cache_hits: 1,
      saved_usd: 0.000014,
    });
    await store.close();
  });

  it('folds the journal into a snapshot every compactEvery records, so the journal stays short and totals stay exact', async () => {
    const records = Array.from({ length: 95 }, (_, index) => record(index));
    const store = await EmbeddedUsageStore.open(dir, logger, { compactEvery: 20 });
    records.forEach((entry) => store.record(entry));
    await eventually(async () => (await readdir(dir)).includes('usage.snapshot.json'), 'a snapshot');
    await store.close();
    const live = (await readFile(join(dir, 'usage.jsonl'), 'utf8')).trimEnd().split('\n').filter(Boolean);
    expect(live.length).to.be.below(20);
    expect((await readdir(dir)).filter((name) => name.startsWith('usage.sealed-'))).to.deep.equal([]);
    const reopened = await EmbeddedUsageStore.open(dir, logger, { compactEvery: 20 });
    expect(await totals(reopened)).to.deep.equal(await reference(records));
    await reopened.close();
  });

  it('compacts a long journal left by an older version at start', async () => {
    const records = Array.from({ length: 60 }, (_, index) => record(index));
    await writeFile(join(dir, 'usage.jsonl'), records.map((entry) => `${JSON.stringify(entry)}\n`).join(''));
    const store = await EmbeddedUsageStore.open(dir, logger, { compactEvery: 50 });
    await store.close();
    expect((await readFile(join(dir, 'usage.jsonl'), 'utf8')).trim()).to.equal('');
    const reopened = await EmbeddedUsageStore.open(dir, logger, { compactEvery: 50 });
    expect(await totals(reopened)).to.deep.equal(await reference(records));
    await reopened.close();
  });

  const steps: CompactionStep[] = ['sealed', 'snapshot-written', 'snapshot-renamed', 'segments-removed'];
  for (const crashAt of steps) {
    it(`loses and double-counts nothing when a crash stops the compaction after '${crashAt}'`, async () => {
      // A first compaction completes, so that a snapshot already exists when the second one crashes.
      const before = Array.from({ length: 30 }, (_, index) => record(index));
      const first = await EmbeddedUsageStore.open(dir, logger, { compactEvery: 25 });
      before.forEach((entry) => first.record(entry));
      await first.close();

      let crashed = false;
      const crashing = await EmbeddedUsageStore.open(dir, logger, {
        compactEvery: 25,
        onCompactionStep: (step) => {
          if (step === crashAt && !crashed) {
            crashed = true;
            throw new Error(`crash after ${step}`);
          }
        },
      });
      const during = Array.from({ length: 40 }, (_, index) => record(100 + index));
      during.forEach((entry) => crashing.record(entry));
      await eventually(() => crashed, 'the simulated crash');
      await crashing.close();

      const reopened = await EmbeddedUsageStore.open(dir, logger, { compactEvery: 25 });
      const after = [record(500), record(501)];
      after.forEach((entry) => reopened.record(entry));
      expect(await totals(reopened)).to.deep.equal(await reference([...before, ...during, ...after]));
      await reopened.close();
      const again = await EmbeddedUsageStore.open(dir, logger, { compactEvery: 25 });
      expect(await totals(again)).to.deep.equal(await reference([...before, ...during, ...after]));
      await again.close();
    });
  }
});
