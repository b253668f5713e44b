import { addTotals, emptyTotals, TOTAL_FIELDS, type UsageRecord, type UsageTotals } from './usage-record.ts';

export interface UsageQuery {
  /** One key's usage; all keys when absent (admin). */
  readonly keyId?: string;
  /** First and last UTC day (`YYYY-MM-DD`, inclusive) to include. */
  readonly fromDay?: string;
  readonly toDay?: string;
  readonly groupBy: 'model' | 'day';
}

/** One row of `GET /v1/usage`: totals per model, or per day. */
export type UsageRow = { model?: string; day?: string; cost_usd: number } & Omit<UsageTotals, 'cost_nano_usd'>;

/** Daily totals of one key and model: the unit both stores keep and sum from. */
export interface UsageCell {
  readonly keyId: string;
  readonly day: string;
  readonly model: string;
  readonly totals: UsageTotals;
}

export interface UsageStore {
  /** Takes a record. Synchronous: never awaits, never throws, never delays a response. */
  record(record: UsageRecord): void;
  query(query: UsageQuery): Promise<UsageRow[]>;
  /** Charged tokens of one key over a day range, for quotas. */
  chargedTokens(keyId: string, fromDay: string, toDay: string): Promise<number>;
  /** Resolves once every record taken so far is stored (or safely spilled). */
  flush(): Promise<void>;
  close(): Promise<void>;
  /** False while records wait for an unreachable backend. */
  readonly healthy: boolean;
}

export function inRange(day: string, fromDay?: string, toDay?: string): boolean {
  return (!fromDay || day >= fromDay) && (!toDay || day <= toDay);
}

/** Groups daily cells into the rows a query asks for, sorted by model or day. */
export function groupCells(cells: Iterable<UsageCell>, query: UsageQuery): UsageRow[] {
  const groups = new Map<string, UsageTotals>();
  for (const cell of cells) {
    if (query.keyId !== undefined && cell.keyId !== query.keyId) continue;
    if (!inRange(cell.day, query.fromDay, query.toDay)) continue;
    const group = query.groupBy === 'model' ? cell.model : cell.day;
    groups.set(group, addTotals(groups.get(group) ?? emptyTotals(), cell.totals));
  }
  return [...groups.entries()]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([group, totals]) => {
      const { cost_nano_usd: nano, ...counts } = totals;
      return { [query.groupBy]: group, ...counts, cost_usd: nano / 1e9 } as UsageRow;
    });
}

/** Parses a stored hash of totals (Redis returns strings). */
export function totalsFromHash(hash: Record<string, string>): UsageTotals {
  const totals = emptyTotals();
  for (const field of TOTAL_FIELDS) totals[field] = Number(hash[field] ?? 0);
  return totals;
}
