import { addTotals, dayOf, emptyTotals, TOTAL_FIELDS, type UsageRecord, type UsageTotals } from './usage-record.ts';

/**
 * Which usage to read back. Usage is summed per UTC day, so `from` and `to` select whole UTC days:
 * the day of `from` through the day of `to`, both included.
 */
export interface UsageQuery {
  /** One key's usage; every key's when absent (admin). */
  readonly keyId?: string;
  /** From the UTC day of this time on. */
  readonly from?: Date;
  /** Up to and including the UTC day of this time. */
  readonly to?: Date;
  /** One row per model (rows carry `model`), per UTC day (rows carry `day`), or per key id (rows carry `key_id`). */
  readonly groupBy: 'model' | 'day' | 'key';
}

/** The row field a grouping fills: `model`, `day` or `key_id` (and `team`, which the control plane groups). */
export type UsageGroupField = 'model' | 'day' | 'key_id' | 'team';

/** The row field that names a row's group. */
export function groupField(groupBy: UsageQuery['groupBy'] | 'team'): UsageGroupField {
  return groupBy === 'key' ? 'key_id' : groupBy;
}

/**
 * One row of the read-back: the sums over a model (`model` set), over a UTC day (`day` set, all
 * models together), over a key (`key_id` set) or over a team (`team` set, null for keys in none), in the query's range.
 */
export type UsageRow = {
  model?: string;
  day?: string;
  key_id?: string;
  team?: string | null;
  cost_usd: number;
  saved_usd: number;
} & Omit<UsageTotals, 'cost_nano_usd' | 'saved_nano_usd'>;

/** Daily totals of one key and model: the unit both stores keep and sum from. */
export interface UsageCell {
  readonly keyId: string;
  readonly day: string;
  readonly model: string;
  readonly totals: UsageTotals;
}

/** Where usage records go and are summed back from. */
export interface UsageStore {
  /**
   * Takes a record. Synchronous: never awaits, never throws, never delays a response. The record is
   * stored exactly once, even when its backend is away for a while or the process restarts.
   */
  record(record: UsageRecord): void;
  /** Totals in a day range, per model, per day or per key id, sorted by that field. */
  query(query: UsageQuery): Promise<UsageRow[]>;
  /** Resolves once every record taken so far is stored (or safely spilled to disk). */
  flush(): Promise<void>;
  close(): Promise<void>;
  /** False while records wait for an unreachable backend. */
  readonly healthy: boolean;
}

/** The inclusive UTC day range a query selects (either end may be open). */
export function dayRange(query: Pick<UsageQuery, 'from' | 'to'>): { fromDay?: string; toDay?: string } {
  return { fromDay: query.from && dayOf(query.from), toDay: query.to && dayOf(query.to) };
}

export function inRange(day: string, fromDay?: string, toDay?: string): boolean {
  return (!fromDay || day >= fromDay) && (!toDay || day <= toDay);
}

/** Groups daily cells into the rows a query asks for, sorted by model, day or key id. */
export function groupCells(cells: Iterable<UsageCell>, query: UsageQuery): UsageRow[] {
  const { fromDay, toDay } = dayRange(query);
  const groups = new Map<string, UsageTotals>();
  for (const cell of cells) {
    if (query.keyId !== undefined && cell.keyId !== query.keyId) continue;
    if (!inRange(cell.day, fromDay, toDay)) continue;
    const group = query.groupBy === 'model' ? cell.model : query.groupBy === 'key' ? cell.keyId : cell.day;
    groups.set(group, addTotals(groups.get(group) ?? emptyTotals(), cell.totals));
  }
  return [...groups.entries()]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([group, totals]) => {
      const { cost_nano_usd: nano, saved_nano_usd: saved, cache_hits: hits, ...counts } = totals;
      return {
        [groupField(query.groupBy)]: group,
        ...counts,
        cost_usd: nano / 1e9,
        cache_hits: hits,
        saved_usd: saved / 1e9,
      } as UsageRow;
    });
}

/** Parses a stored hash of totals (Redis returns strings). */
export function totalsFromHash(hash: Record<string, string>): UsageTotals {
  const totals = emptyTotals();
  for (const field of TOTAL_FIELDS) totals[field] = Number(hash[field] ?? 0);
  return totals;
}
