import { expect } from 'chai';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runCli } from '../../src/cli/main.ts';
import { EmbeddedUsageStore } from '../../src/stores/usage/embedded-usage-store.ts';
import type { UsageRecord } from '../../src/usage/usage-record.ts';

const record = (overrides: Partial<UsageRecord>): UsageRecord => ({
  id: `r-${Math.random()}`,
  time: '2026-11-20T08:00:00.000Z',
  keyId: 'key_a',
  route: 'chat-completions',
  requestedModel: 'm',
  model: 'acme/one',
  upstream: 'acme',
  status: 200,
  stream: false,
  latencyMs: 5,
  inputTokens: 10,
  outputTokens: 5,
  cachedTokens: 2,
  totalTokens: 15,
  chargedTokens: 14,
  costUsd: 0.25,
  estimated: false,
  outcome: 'complete',
  ...overrides,
});

describe('CLI usage', () => {
  let dataDir: string;
  beforeEach(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'gateway-cli-usage-'));
    const store = await EmbeddedUsageStore.open(dataDir);
    store.record(record({}));
    store.record(record({ model: 'acme/two', time: '2026-11-21T08:00:00.000Z' }));
    store.record(record({ keyId: 'key_b' }));
    await store.close();
  });
  afterEach(async () => rm(dataDir, { recursive: true, force: true }));

  async function usage(argv: string[]) {
    let out = '';
    let err = '';
    const code = await runCli(['usage', ...argv], { out: (text) => (out += text), err: (text) => (err += text) }, { GATEWAY_DATA_DIR: dataDir });
    return { code, out, err };
  }

  it('prints the totals per model as a table, for one key or all', async () => {
    const all = await usage([]);
    expect(all.code).to.equal(0);
    expect(all.out.split('\n')).to.deep.equal([
      'model     requests  input_tokens  output_tokens  cached_tokens  total_tokens  charged_tokens  cost_usd  cache_hits  saved_usd',
      'acme/one  2         20            10             4              30            28              0.5       0           0',
      'acme/two  1         10            5              2              15            14              0.25      0           0',
      '',
    ]);
    const one = await usage(['--key', 'key_b', '--group-by', 'day']);
    expect(one.out.split('\n')[1]).to.equal('2026-11-20  1         10            5              2              15            14              0.25      0           0');
  });

  it('filters by days and refuses a bad grouping', async () => {
    expect((await usage(['--from', '2026-11-21'])).out).not.to.contain('acme/one');
    const bad = await usage(['--group-by', 'week']);
    expect(bad.code).to.equal(2);
    expect(bad.err).to.contain("--group-by: must be 'model' or 'day'");
  });
});
