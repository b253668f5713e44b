import { expect } from 'chai';
import {
  KeyIdAliases,
  sumRows,
  emptyTotals,
  type UsageTotals,
  groupCells,
  type UsageCell,
  type UsageQuery,
  type UsageRow,
  type UsageStore,
} from '../../src/usage/usage-accounting.ts';

const totals = (requests: number, costNano: number, savedNano = 0): UsageTotals => ({
  ...emptyTotals(),
  requests,
  input_tokens: requests * 10,
  total_tokens: requests * 12,
  cost_nano_usd: costNano,
  saved_nano_usd: savedNano,
});
const cell = (keyId: string, day: string, model: string, requests: number, costNano = requests * 1000): UsageCell => ({
  keyId,
  day,
  model,
  totals: totals(requests, costNano),
});

const CELLS = [
  cell('key_b', '2026-11-20', 'acme/one', 1),
  cell('key_a', '2026-11-20', 'acme/one', 2),
  cell('key_a', '2026-11-21', 'acme/two', 3),
  cell('key_b', '2026-11-22', 'acme/two', 4),
  cell('key_old', '2026-11-21', 'acme/one', 5),
];

/** A store answering from fixed cells, as both stores do (through groupCells), that remembers its queries. */
class CellStore implements UsageStore {
  readonly queries: UsageQuery[] = [];
  readonly healthy = true;
  constructor(private readonly cells: readonly UsageCell[]) {}
  record(): void {}
  async query(query: UsageQuery): Promise<UsageRow[]> {
    this.queries.push(query);
    return groupCells(this.cells, query);
  }
  async flush(): Promise<void> {}
  async close(): Promise<void> {}
}

describe('usage grouping', () => {
  describe('groupCells', () => {
    it('groups per key id: rows carry key_id (no model, no day), sorted by it, within the day range', () => {
      const rows = groupCells(CELLS, { groupBy: 'key' });
      expect(rows.map((row) => [row.key_id, row.requests, row.input_tokens, row.cost_usd])).to.deep.equal([
        ['key_a', 5, 50, 0.000005],
        ['key_b', 5, 50, 0.000005],
        ['key_old', 5, 50, 0.000005],
      ]);
      expect(rows[0]).not.to.have.any.keys('model', 'day', 'team');
      expect(
        groupCells(CELLS, {
          groupBy: 'key',
          from: new Date('2026-11-21T00:00:00Z'),
          to: new Date('2026-11-21T23:00:00Z'),
        }).map((row) => [row.key_id, row.requests]),
      ).to.deep.equal([
        ['key_a', 3],
        ['key_old', 5],
      ]);
      expect(
        groupCells(CELLS, { groupBy: 'key', keyId: 'key_b' }).map((row) => [row.key_id, row.requests]),
      ).to.deep.equal([['key_b', 5]]);
    });

    it('still groups per model and per day as before', () => {
      expect(groupCells(CELLS, { groupBy: 'model' }).map((row) => [row.model, row.requests])).to.deep.equal([
        ['acme/one', 8],
        ['acme/two', 7],
      ]);
      expect(groupCells(CELLS, { groupBy: 'day' }).map((row) => [row.day, row.requests])).to.deep.equal([
        ['2026-11-20', 3],
        ['2026-11-21', 8],
        ['2026-11-22', 4],
      ]);
    });
  });

  describe('sumRows', () => {
    it('sums per team with null (no team) last, and money in whole nano-USD', () => {
      const row = (team: string | null, requests: number, cost: number, saved: number): UsageRow => ({
        team,
        requests,
        input_tokens: 0,
        output_tokens: 0,
        cached_tokens: 0,
        total_tokens: 0,
        charged_tokens: 0,
        cost_usd: cost,
        cache_hits: 0,
        saved_usd: saved,
      });
      const rows = sumRows(
        [
          row(null, 1, 0.1, 0.1),
          row('red', 2, 0.2, 0.2),
          row('blue', 1, 0.1, 0),
          row('red', 1, 0.1, 0.1),
          row(null, 1, 0.2, 0.2),
        ],
        'team',
      );
      expect(rows.map((sum) => [sum.team, sum.requests, sum.cost_usd, sum.saved_usd])).to.deep.equal([
        ['blue', 1, 0.1, 0],
        ['red', 3, 0.3, 0.3],
        [null, 2, 0.3, 0.3],
      ]);
    });
  });

  describe('KeyIdAliases per key', () => {
    const aliases = new Map([['key_a', ['key_old']]]);

    it("sums the rows recorded under a key's older id into the current id's row", async () => {
      const store = new KeyIdAliases(new CellStore(CELLS), async () => aliases);
      const rows = await store.query({ groupBy: 'key' });
      expect(rows.map((row) => [row.key_id, row.requests, row.input_tokens, row.cost_usd])).to.deep.equal([
        ['key_a', 10, 100, 0.00001],
        ['key_b', 5, 50, 0.000005],
      ]);
    });

    it("answers one key's row with key_id, its older ids' usage included, under its current id", async () => {
      const inner = new CellStore(CELLS);
      const store = new KeyIdAliases(inner, async () => aliases);
      expect(
        (await store.query({ groupBy: 'key', keyId: 'key_a' })).map((row) => [row.key_id, row.requests]),
      ).to.deep.equal([['key_a', 10]]);
      expect(inner.queries.map((query) => query.keyId)).to.deep.equal(['key_a', 'key_old']);
      expect(
        (await store.query({ groupBy: 'key', keyId: 'key_b' })).map((row) => [row.key_id, row.requests]),
      ).to.deep.equal([['key_b', 5]]);
    });

    it('leaves the rows as they are when the aliases cannot be found', async () => {
      const store = new KeyIdAliases(new CellStore(CELLS), async () => {
        throw new Error('legacy secret unreadable');
      });
      expect((await store.query({ groupBy: 'key' })).map((row) => row.key_id)).to.deep.equal([
        'key_a',
        'key_b',
        'key_old',
      ]);
    });
  });
});
