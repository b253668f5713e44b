import { expect } from 'chai';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runCli } from '../../src/cli/main.ts';
import { EmbeddedUsageStore } from '../../src/stores/usage/embedded-usage-store.ts';
import { FileKeyStore } from '../../src/stores/keys/file-key-store.ts';
import type { UsageRecord } from '../../src/usage/usage-accounting.ts';

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
    const code = await runCli(
      ['usage', ...argv],
      { out: (text) => (out += text), err: (text) => (err += text) },
      { GATEWAY_DATA_DIR: dataDir },
    );
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
    expect(one.out.split('\n')[1]).to.equal(
      '2026-11-20  1         10            5              2              15            14              0.25      0           0',
    );
  });

  it('filters by days and refuses a bad grouping', async () => {
    expect((await usage(['--from', '2026-11-21'])).out).not.to.contain('acme/one');
    const bad = await usage(['--group-by', 'week']);
    expect(bad.code).to.equal(2);
    expect(bad.err).to.contain("--group-by: must be 'model', 'day', 'key', 'team' or 'end-user'");
  });

  it('prints the totals per key id, and per team as the key store names them', async () => {
    const keys = new FileKeyStore(dataDir);
    const { record: member } = await keys.create({ name: 'member', team: 'red' });
    await keys.close();
    const store = await EmbeddedUsageStore.open(dataDir);
    store.record(record({ keyId: member.id }));
    store.record(record({ keyId: member.id }));
    await store.close();
    const firstColumns = (out: string) =>
      out
        .trimEnd()
        .split('\n')
        .map((line) => line.split(/  +/).slice(0, 2).join('|'));
    const perKey = await usage(['--group-by', 'key']);
    expect(perKey.code).to.equal(0);
    expect(firstColumns(perKey.out)).to.deep.equal([
      'key_id|requests',
      ...[
        ['key_a', 2],
        ['key_b', 1],
        [member.id, 2],
      ]
        .sort(([a], [b]) => (String(a) < String(b) ? -1 : 1))
        .map(([id, count]) => `${id}|${count}`),
    ]);
    const perTeam = await usage(['--group-by', 'team']);
    expect(perTeam.code).to.equal(0);
    expect(firstColumns(perTeam.out)).to.deep.equal(['team|requests', 'red|2', '(no team)|3']);
  });
});
