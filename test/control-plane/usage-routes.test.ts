import { expect } from 'chai';
import type { SettledFigures, ExchangeRecord } from '../../src/core/exchange.ts';
import express from 'express';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { errorMiddleware } from '../../src/data-plane/answer-error.ts';
import { createLogger } from '../../src/core/logger.ts';
import type { ModelRegistry, ResolvedModel } from '../../src/core/model-registry.ts';
import { EmbeddedUsageStore } from '../../src/stores/usage/embedded-usage-store.ts';
import { GatewayUsageAccounting, buildUsageRecord, type UsageRecord } from '../../src/usage/usage-accounting.ts';
import { printUsageReport } from '../../src/cli/usage-report.ts';
import { adminUsageRoute, ownUsageRoute, parseUsageQuery } from '../../src/control-plane/usage-routes.ts';
import type { ApiKeyRecord } from '../../src/core/api-keys.ts';
import { isGatewayError } from '../../src/core/gateway-errors.ts';

const logger = createLogger('silent');
const pricing = { input: 2, cachedInput: 0.5, output: 8 };

const recordOf = (keyId: string, model: string, time: string, inputTokens: number): UsageRecord =>
  buildUsageRecord({
    keyId,
    route: 'chat-completions',
    requestedModel: model,
    model,
    upstream: 'acme',
    status: 200,
    stream: false,
    latencyMs: 5,
    usage: { inputTokens, outputTokens: 10, cachedTokens: 4 },
    pricing,
    time: new Date(time),
  });

describe('usage read-back', () => {
  let dir: string;
  let store: EmbeddedUsageStore;
  let server: Server;
  let base: string;
  // The key store's records, as group_by=team reads them.
  let keyRecords: Pick<ApiKeyRecord, 'id' | 'team'>[];
  const keys = { list: async () => keyRecords as ApiKeyRecord[] };

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'usage-routes-'));
    store = await EmbeddedUsageStore.open(dir, logger);
    store.record(recordOf('key_a', 'acme/model-1', '2026-11-20T10:00:00Z', 100));
    store.record(recordOf('key_a', 'acme/model-2', '2026-11-21T10:00:00Z', 200));
    store.record(recordOf('key_a', 'acme/model-1', '2026-11-21T23:30:00Z', 300));
    store.record(recordOf('key_b', 'acme/model-1', '2026-11-21T10:00:00Z', 400));
    keyRecords = [{ id: 'key_a', team: 'red' }, { id: 'key_b' }];
    const app = express();
    app.get(
      '/v1/usage',
      (_req, res, next) => {
        res.locals.apiKey = { id: 'key_a' };
        next();
      },
      ownUsageRoute(store),
    );
    app.get('/admin/usage', adminUsageRoute(store, keys));
    app.use(errorMiddleware(() => 'plain', logger));
    server = await new Promise((resolve) => {
      const listening = app.listen(0, '127.0.0.1', () => resolve(listening));
    });
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterEach(async () => {
    await new Promise((resolve) => server.close(resolve));
    await store.close();
    await rm(dir, { recursive: true, force: true });
  });

  const get = async (path: string) => {
    const response = await fetch(`${base}${path}`);
    return { status: response.status, body: (await response.json()) as Record<string, any> };
  };

  it("answers the caller's own usage per model by default, with every counter", async () => {
    // Each record: 10 output, 4 cached; charged = (input − 4) + 10 + ⌈4 × 0.25⌉; cost = ((input − 4) × 2 + 4 × 0.5 + 10
    // × 8) / 1M.
    expect(await get('/v1/usage')).to.deep.equal({
      status: 200,
      body: {
        object: 'list',
        data: [
          {
            model: 'acme/model-1',
            requests: 2,
            input_tokens: 400,
            output_tokens: 20,
            cached_tokens: 8,
            total_tokens: 420,
            charged_tokens: 414,
            cost_usd: 0.000948,
            cache_hits: 0,
            saved_usd: 0,
          },
          {
            model: 'acme/model-2',
            requests: 1,
            input_tokens: 200,
            output_tokens: 10,
            cached_tokens: 4,
            total_tokens: 210,
            charged_tokens: 207,
            cost_usd: 0.000474,
            cache_hits: 0,
            saved_usd: 0,
          },
        ],
      },
    });
  });

  it('groups by UTC day and filters by date or date-time', async () => {
    const { body } = await get('/v1/usage?group_by=day&from=2026-11-21');
    expect(body.data.map((row: Record<string, unknown>) => [row.day, row.model, row.requests])).to.deep.equal([
      ['2026-11-21', undefined, 2],
    ]);
    // 2026-11-21T23:30Z is 2026-11-22 in UTC+01:00: the offset is honoured, the UTC day of the time is used.
    expect(
      (await get('/v1/usage?to=2026-11-21T00:30:00%2B01:00')).body.data.map(
        (row: Record<string, unknown>) => row.requests,
      ),
    ).to.deep.equal([1]);
    expect((await get('/v1/usage?from=2026-11-22')).body.data).to.deep.equal([]);
  });

  it('answers a bad query with a 400 ValidationError listing every field', async () => {
    const bad = await get('/v1/usage?group_by=week&from=yesterday&to=2026-02-30');
    expect(bad.status).to.equal(400);
    expect(bad.body.detail).to.equal('Invalid input parameters');
    expect(bad.body.errors).to.have.members([
      "Field 'query.from': must be an ISO date (YYYY-MM-DD) or date-time",
      "Field 'query.to': is not a real date",
      "Field 'query.group_by': must be 'model' or 'day'",
    ]);
    expect((await get('/v1/usage?key_id=key_b')).body.errors).to.deep.equal([
      "Field 'query.key_id': is not a parameter of this route",
    ]);
    expect((await get('/v1/usage?from=2026-11-21&from=2026-11-22')).body.errors).to.deep.equal([
      "Field 'query.from': must be given once",
    ]);
    expect((await get('/v1/usage?from=2026-11-22&to=2026-11-21')).body.errors).to.deep.equal([
      "Field 'query.from': must not be after 'to'",
    ]);
  });

  it("answers every key's usage on the admin route, or one key's with key_id", async () => {
    expect(
      (await get('/admin/usage')).body.data.map((row: Record<string, unknown>) => [row.model, row.requests]),
    ).to.deep.equal([
      ['acme/model-1', 3],
      ['acme/model-2', 1],
    ]);
    expect(
      (await get('/admin/usage?key_id=key_b&group_by=day')).body.data.map((row: Record<string, unknown>) => [
        row.day,
        row.input_tokens,
      ]),
    ).to.deep.equal([['2026-11-21', 400]]);
  });

  it('answers per key id and per team on the admin route, teams as the keys name them now', async () => {
    expect(await get('/admin/usage?group_by=key')).to.deep.equal({
      status: 200,
      body: {
        object: 'list',
        data: [
          {
            key_id: 'key_a',
            requests: 3,
            input_tokens: 600,
            output_tokens: 30,
            cached_tokens: 12,
            total_tokens: 630,
            charged_tokens: 621,
            cost_usd: 0.001422,
            cache_hits: 0,
            saved_usd: 0,
          },
          {
            key_id: 'key_b',
            requests: 1,
            input_tokens: 400,
            output_tokens: 10,
            cached_tokens: 4,
            total_tokens: 410,
            charged_tokens: 407,
            cost_usd: 0.000874,
            cache_hits: 0,
            saved_usd: 0,
          },
        ],
      },
    });
    expect(
      (await get('/admin/usage?group_by=key&key_id=key_b')).body.data.map((row: Record<string, unknown>) => [
        row.key_id,
        row.requests,
      ]),
    ).to.deep.equal([['key_b', 1]]);
    store.record(recordOf('key_c', 'acme/model-2', '2026-11-22T10:00:00Z', 50));
    keyRecords.push({ id: 'key_c', team: 'blue' });
    const teams = await get('/admin/usage?group_by=team');
    expect(teams.status).to.equal(200);
    expect(
      teams.body.data.map((row: Record<string, unknown>) => [row.team, row.requests, row.input_tokens]),
    ).to.deep.equal([
      ['blue', 1, 50],
      ['red', 3, 600],
      [null, 1, 400],
    ]);
    expect(teams.body.data[2]).not.to.have.property('key_id');
    // key_b joins red: its usage so far counts there.
    keyRecords[1] = { id: 'key_b', team: 'red' };
    expect(
      (await get('/admin/usage?group_by=team&from=2026-11-21&to=2026-11-21')).body.data.map(
        (row: Record<string, unknown>) => [row.team, row.requests],
      ),
    ).to.deep.equal([['red', 3]]);
  });

  it("refuses group_by=key and group_by=team on a key's own route with a clear 400, and a bad grouping on the admin route", async () => {
    for (const grouping of ['key', 'team']) {
      const refused = await get(`/v1/usage?group_by=${grouping}`);
      expect(refused.status).to.equal(400);
      expect(refused.body.errors).to.deep.equal([
        `Field 'query.group_by': cannot be '${grouping}' here: a key's own usage is grouped by 'model' or 'day' (per key, per team and per end user only on the admin API)`,
      ]);
    }
    const bad = await get('/admin/usage?group_by=week');
    expect(bad.status).to.equal(400);
    expect(bad.body.errors).to.deep.equal([
      "Field 'query.group_by': must be 'model', 'day', 'key', 'team' or 'end_user'",
    ]);
  });

  it('parses the groupings each kind of route allows', () => {
    for (const grouping of ['model', 'day', 'key', 'team'] as const)
      expect(parseUsageQuery({ group_by: grouping }, true)).to.include({ groupBy: grouping });
    for (const grouping of ['model', 'day'] as const)
      expect(parseUsageQuery({ group_by: grouping }, false)).to.include({ groupBy: grouping });
    expect(parseUsageQuery({}, true)).to.include({ groupBy: 'model' });
    const errorsOf = (query: Record<string, string>, everyKey: boolean): string[] => {
      try {
        parseUsageQuery(query, everyKey);
      } catch (error) {
        if (isGatewayError(error)) return [...(error.errors ?? [])];
        throw error;
      }
      return [];
    };
    expect(errorsOf({ group_by: 'key' }, false)).to.have.length(1);
    expect(errorsOf({ group_by: 'team', key_id: 'key_a' }, false)).to.deep.equal([
      "Field 'query.key_id': is not a parameter of this route",
    ]);
    expect(errorsOf({ group_by: 'team', key_id: 'key_a' }, true)).to.deep.equal([]);
    expect(errorsOf({ group_by: 'Key' }, true)).to.deep.equal([
      "Field 'query.group_by': must be 'model', 'day', 'key', 'team' or 'end_user'",
    ]);
  });

  it('prints the same totals as a table from the usage command', async () => {
    let out = '';
    let err = '';
    const io = { out: (text: string) => (out += text), err: (text: string) => (err += text) };
    expect(await printUsageReport(['--key', 'key_a'], io, store)).to.equal(0);
    expect(out.split('\n')).to.deep.equal([
      'model         requests  input_tokens  output_tokens  cached_tokens  total_tokens  charged_tokens  cost_usd  cache_hits  saved_usd',
      'acme/model-1  2         400           20             8              420           414             0.000948  0           0',
      'acme/model-2  1         200           10             4              210           207             0.000474  0           0',
      '',
    ]);
    out = '';
    expect(
      await printUsageReport(['--group-by', 'day', '--from', '2026-11-21', '--to', '2026-11-21'], io, store),
    ).to.equal(0);
    expect(out.split('\n').slice(1)).to.deep.equal([
      '2026-11-21  3         900           30             12             930           921             0.002022  0           0',
      '',
    ]);
    expect(await printUsageReport(['--group-by', 'week', '--from', 'soon'], io, store)).to.equal(2);
    expect(err)
      .to.contain("--group-by: must be 'model', 'day', 'key', 'team' or 'end-user'")
      .and.to.contain('--from: must be an ISO date');
    err = '';
    expect(await printUsageReport(['--bogus'], io, store)).to.equal(2);
    expect(err).to.contain('--bogus').and.to.contain('usage: usage [--key KEY_ID]');
  });

  it('prints per key id and per team from the usage command, keys in no team last', async () => {
    let out = '';
    const io = { out: (text: string) => (out += text), err: () => {} };
    expect(await printUsageReport(['--group-by', 'key'], io, store, keys)).to.equal(0);
    expect(out.split('\n').map((line) => line.split(/ +/).slice(0, 2).join(' '))).to.deep.equal([
      'key_id requests',
      'key_a 3',
      'key_b 1',
      '',
    ]);
    out = '';
    expect(await printUsageReport(['--group-by', 'team'], io, store, keys)).to.equal(0);
    expect(out.split('\n').map((line) => line.split(/  +/).slice(0, 2).join('|'))).to.deep.equal([
      'team|requests',
      'red|3',
      '(no team)|1',
      '',
    ]);
  });
});

describe('usage accounting of exchanges', () => {
  let dir: string;
  let store: EmbeddedUsageStore;
  let accounting: GatewayUsageAccounting;
  const resolved = {
    requestedId: 'acme-latest',
    canonicalId: 'acme/model-1',
    alias: 'acme-latest',
    plugin: { vendor: 'acme', routes: {}, models: [] },
    model: { id: 'model-1', listed: true, routes: ['chat-completions'], pricing },
  } as unknown as ResolvedModel;
  const exchange = (overrides: Partial<ExchangeRecord>): ExchangeRecord => ({
    keyId: 'key_a',
    route: 'chat-completions',
    resolved,
    status: 200,
    stream: true,
    latencyMs: 3,
    usage: undefined,
    consumed: true,
    outcome: 'complete',
    requestBody: () => ({
      model: 'model-1',
      messages: [{ role: 'user', content: 'Tell me a story about a lighthouse keeper.' }],
    }),
    responseText: () => 'Once upon a time, a keeper lived alone on a rock.',
    ...overrides,
  });

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'usage-accounting-'));
    store = await EmbeddedUsageStore.open(dir, logger);
    accounting = new GatewayUsageAccounting(
      store,
      { current: { registry: { usageExtractor: () => undefined } as unknown as ModelRegistry } },
      logger,
      () => new Date('2026-11-20T12:00:00Z'),
    );
  });
  afterEach(async () => {
    await store.close();
    await rm(dir, { recursive: true, force: true });
  });

  const records = async (): Promise<UsageRecord[]> => {
    await accounting.flush();
    return (await readFile(join(dir, 'usage.jsonl'), 'utf8'))
      .trimEnd()
      .split('\n')
      .map((line) => JSON.parse(line) as UsageRecord);
  };

  it('records reported usage exactly, upstream errors with zero tokens, and estimates missing usage', async () => {
    accounting.record(exchange({ usage: { inputTokens: 50, outputTokens: 7, cachedTokens: 20 } }));
    accounting.record(exchange({ status: 500, stream: false, consumed: false }));
    accounting.record(exchange({}));
    const [reported, failed, estimated] = await records();
    expect(reported).to.deep.include({
      keyId: 'key_a',
      model: 'acme/model-1',
      requestedModel: 'acme-latest',
      upstream: 'acme',
      inputTokens: 50,
      outputTokens: 7,
      cachedTokens: 20,
      chargedTokens: 42,
      estimated: false,
      time: '2026-11-20T12:00:00.000Z',
    });
    expect(failed).to.deep.include({
      status: 500,
      inputTokens: 0,
      outputTokens: 0,
      chargedTokens: 0,
      costUsd: 0,
      estimated: false,
    });
    expect(estimated).to.deep.include({ estimated: true, cachedTokens: 0 });
    expect(estimated!.inputTokens).to.be.within(8, 14);
    expect(estimated!.outputTokens).to.be.within(10, 16);
  });

  it('keeps reported input and counts the streamed output when the client went away mid-stream', async () => {
    accounting.record(
      exchange({
        status: 499,
        outcome: 'client_closed',
        usage: { inputTokens: 1200, outputTokens: 1, cachedTokens: 1000 },
      }),
    );
    accounting.record(
      exchange({
        status: 499,
        outcome: 'client_closed',
        usage: { inputTokens: 1200, outputTokens: 500, cachedTokens: 1000 },
      }),
    );
    const [cut, complete] = await records();
    expect(cut).to.deep.include({
      status: 499,
      inputTokens: 1200,
      cachedTokens: 1000,
      estimated: true,
      outcome: 'client_closed',
    });
    expect(cut!.outputTokens).to.be.within(10, 16);
    expect(complete).to.deep.include({ inputTokens: 1200, outputTokens: 500, estimated: false });
  });

  it('records a stream the upstream cut as upstream_cut, never as a plain complete 200, and estimates what it lacks', async () => {
    accounting.record(
      exchange({
        status: 200,
        outcome: 'upstream_cut',
        usage: { inputTokens: 1200, outputTokens: 1, cachedTokens: 1000 },
      }),
    );
    accounting.record(exchange({ status: 200, outcome: 'upstream_cut', usage: undefined }));
    accounting.record(
      exchange({ status: 200, outcome: 'complete', usage: { inputTokens: 1200, outputTokens: 1, cachedTokens: 1000 } }),
    );
    // Estimates finish after the record that needs none.
    const stored = await records();
    const partial = stored.find((record) => record.outcome === 'upstream_cut' && record.inputTokens === 1200);
    const none = stored.find((record) => record.outcome === 'upstream_cut' && record.inputTokens !== 1200);
    const complete = stored.find((record) => record.outcome === 'complete');
    expect(partial).to.deep.include({
      status: 200,
      outcome: 'upstream_cut',
      inputTokens: 1200,
      cachedTokens: 1000,
      estimated: true,
    });
    expect(partial!.outputTokens).to.be.within(10, 16);
    expect(none).to.deep.include({ outcome: 'upstream_cut', estimated: true });
    expect(none!.inputTokens).to.be.within(8, 14);
    expect(complete).to.deep.include({ outcome: 'complete', outputTokens: 1, estimated: false });
  });

  it('estimates from a bounded sample of a long stream, scaled to its full length', async () => {
    const sentence = 'Once upon a time, a keeper lived alone on a rock. ';
    accounting.record(
      exchange({ responseText: () => ({ text: sentence.repeat(100), chars: sentence.length * 10_000 }) }),
    );
    const [estimated] = await records();
    expect(estimated).to.deep.include({ estimated: true, outcome: 'complete' });
    expect(estimated!.outputTokens).to.be.within(110_000, 150_000);
  });

  it("settles an exchange's reservation to the figures its record stores, estimated ones included", async () => {
    const settled: SettledFigures[] = [];
    const settlement = { settle: (figures: SettledFigures | undefined) => void settled.push(figures!) };
    accounting.record(exchange({ usage: { inputTokens: 50, outputTokens: 7, cachedTokens: 20 }, settlement }));
    accounting.record(exchange({ status: 200, outcome: 'upstream_cut', usage: undefined, settlement }));
    await accounting.flush();
    const stored = await records();
    expect(settled).to.have.length(2);
    // 50 input (20 cached) and 7 output at 2 / 0.5 / 8 USD per 1M: charged 30 + 7 + ⌈20 × 0.25⌉ = 42.
    expect(settled[0]).to.deep.include({ totalTokens: 57, chargedTokens: 42 });
    expect(settled[0]!.costUsd).to.be.closeTo((30 * 2 + 20 * 0.5 + 7 * 8) / 1e6, 1e-12);
    const estimated = stored.find((record) => record.estimated)!;
    expect(settled[1]).to.deep.include({ totalTokens: estimated.totalTokens, chargedTokens: estimated.chargedTokens });
    expect(settled[1]!.totalTokens).to.be.greaterThan(0);
  });
});
