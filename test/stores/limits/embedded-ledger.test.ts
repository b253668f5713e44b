import { expect } from 'chai';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EmbeddedLedger, LIMIT_COUNTERS_FILE } from '../../../src/stores/limits/embedded-ledger.ts';
import { captureLogs, eventually } from '../../data-plane/pipeline/guarded-app.ts';

const HOUR = 3_600_000;

describe('EmbeddedLedger', () => {
  let dataDir: string;
  let now: number;
  const clock = () => now;

  beforeEach(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'gateway-ledger-'));
    now = Date.UTC(2026, 10, 25, 12, 0, 30);
  });
  afterEach(() => rm(dataDir, { recursive: true, force: true }));

  it('keeps day and month counters across a reopen, and not minute ones', async () => {
    const logs = captureLogs();
    const first = await EmbeddedLedger.open(dataDir, logs.logger, clock);
    const dayEnds = Date.UTC(2026, 10, 26);
    const monthEnds = Date.UTC(2026, 11, 1);
    first.reserve([
      { counter: 'key:k1:tpm:m:29410560', limit: 1000, want: 300, need: 10, resetAt: now + 30_000 },
      { counter: 'key:k1:quota:d:2026-11-25', limit: 5000, want: 300, need: 10, resetAt: dayEnds },
      { counter: 'team:eng:budget:mo:2026-11', limit: 9_000_000_000, want: 2_000_000_000, need: 1, resetAt: monthEnds },
    ]);
    first.adjust([{ counter: 'key:k1:quota:d:2026-11-25', delta: -100, resetAt: dayEnds }]);
    await first.close();
    const file = JSON.parse(await readFile(join(dataDir, LIMIT_COUNTERS_FILE), 'utf8')) as {
      counters: Record<string, unknown>;
    };
    expect(Object.keys(file.counters).sort()).to.deep.equal([
      'key:k1:quota:d:2026-11-25',
      'team:eng:budget:mo:2026-11',
    ]);

    const second = await EmbeddedLedger.open(dataDir, logs.logger, clock);
    expect(
      await second.peek(['key:k1:tpm:m:29410560', 'key:k1:quota:d:2026-11-25', 'team:eng:budget:mo:2026-11']),
    ).to.deep.equal([0, 200, 2_000_000_000]);
    // Loaded counters are live: a settlement on them applies.
    second.adjust([{ counter: 'key:k1:quota:d:2026-11-25', delta: 50, resetAt: dayEnds }]);
    expect(await second.peek(['key:k1:quota:d:2026-11-25'])).to.deep.equal([250]);
    await second.close();

    // Once the day is over, its counter is dropped on load; the month's stays.
    now = dayEnds + 1;
    const third = await EmbeddedLedger.open(dataDir, logs.logger, clock);
    expect(await third.peek(['key:k1:quota:d:2026-11-25', 'team:eng:budget:mo:2026-11'])).to.deep.equal([
      0, 2_000_000_000,
    ]);
    await third.close();
  });

  it('writes changes by itself shortly after them, without a flush', async () => {
    const logs = captureLogs();
    const ledger = await EmbeddedLedger.open(dataDir, logs.logger, clock);
    ledger.reserve([{ counter: 'key:k2:quota:d:2026-11-25', limit: 100, want: 7, need: 1, resetAt: now + HOUR }]);
    const read = async () =>
      JSON.parse(await readFile(join(dataDir, LIMIT_COUNTERS_FILE), 'utf8')) as {
        counters: Record<string, [number, number]>;
      };
    await eventually(
      async () => (await read()).counters['key:k2:quota:d:2026-11-25']?.[0] === 7,
      'the debounced write',
      3000,
    );
    await ledger.close();
    expect((await readdir(dataDir)).filter((name) => name.endsWith('.tmp'))).to.deep.equal([]);
  });

  it('moves a corrupt file aside, logs it and starts from zero', async () => {
    await writeFile(join(dataDir, LIMIT_COUNTERS_FILE), '{"version":1,"counters":{"key:k3:quota:d:2026-11-25":[5,');
    const logs = captureLogs();
    const ledger = await EmbeddedLedger.open(dataDir, logs.logger, clock);
    expect(await ledger.peek(['key:k3:quota:d:2026-11-25'])).to.deep.equal([0]);
    expect(logs.text()).to.include('limit counters file is unreadable');
    const names = await readdir(dataDir);
    expect(names.some((name) => name.startsWith(`${LIMIT_COUNTERS_FILE}.corrupt-`))).to.equal(true);
    expect(names).not.to.include(LIMIT_COUNTERS_FILE);
    ledger.reserve([{ counter: 'key:k3:quota:d:2026-11-25', limit: 100, want: 9, need: 1, resetAt: now + HOUR }]);
    await ledger.close();
    const reopened = await EmbeddedLedger.open(dataDir, logs.logger, clock);
    expect(await reopened.peek(['key:k3:quota:d:2026-11-25'])).to.deep.equal([9]);
    await reopened.close();
  });
});
