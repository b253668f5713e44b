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
  /**
   * One row per model (rows carry `model`), per UTC day (rows carry `day`), per key id (rows carry
   * `key_id`), or per end user of each key (rows carry `key_id` and `end_user`, null for the requests
   * that named none).
   */
  readonly groupBy: 'model' | 'day' | 'key' | 'end_user';
}

/** The row field a grouping fills: `model`, `day`, `key_id`, `end_user` (and `team`, which the control plane sums). */
export type UsageGroupField = 'model' | 'day' | 'key_id' | 'team' | 'end_user';

/** The row field that names a row's group. */
export function groupField(groupBy: UsageQuery['groupBy'] | 'team'): UsageGroupField {
  return groupBy === 'key' ? 'key_id' : groupBy;
}

/** The row fields that name a row's group, in order (an end user's row: its key id, then the end user). */
export function groupFields(groupBy: UsageQuery['groupBy'] | 'team'): UsageGroupField[] {
  return groupBy === 'end_user' ? ['key_id', 'end_user'] : [groupField(groupBy)];
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
  end_user?: string | null;
  cost_usd: number;
  saved_usd: number;
} & Omit<UsageTotals, 'cost_nano_usd' | 'saved_nano_usd'>;

/** A usage row's counters, in the order the CSV, the CLI's table and the API's schema list them. */
export const USAGE_COUNT_FIELDS = [
  'requests',
  'input_tokens',
  'output_tokens',
  'cached_tokens',
  'total_tokens',
  'charged_tokens',
  'cost_usd',
  'cache_hits',
  'saved_usd',
] as const;

/**
 * Daily totals of one key and model: the unit both stores keep and sum from. The stores keep daily totals
 * per key and end user too, as cells with `endUser` set (null: the requests that named none) and `model`
 * empty, which only the grouping per end user reads.
 */
export interface UsageCell {
  readonly keyId: string;
  readonly day: string;
  readonly model: string;
  readonly endUser?: string | null;
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

/**
 * Groups daily cells into the rows a query asks for, sorted by model, day or key id (per end user: by key
 * id, then end user, the requests that named none last). Per end user, give the end-user cells.
 */
export function groupCells(cells: Iterable<UsageCell>, query: UsageQuery): UsageRow[] {
  const { fromDay, toDay } = dayRange(query);
  const groups = new Map<string, UsageTotals>();
  const names = new Map<string, Partial<UsageRow>>();
  for (const cell of cells) {
    if (query.keyId !== undefined && cell.keyId !== query.keyId) continue;
    if (!inRange(cell.day, fromDay, toDay)) continue;
    let group: string;
    if (query.groupBy === 'end_user') {
      // A tab sorts before every character an end user may hold but the controls; `\u{10FFFF}` puts none last.
      group = `${cell.keyId}\t${cell.endUser ?? '\u{10FFFF}'}`;
      if (!names.has(group)) names.set(group, { key_id: cell.keyId, end_user: cell.endUser ?? null });
    } else {
      group = query.groupBy === 'model' ? cell.model : query.groupBy === 'key' ? cell.keyId : cell.day;
    }
    groups.set(group, addTotals(groups.get(group) ?? emptyTotals(), cell.totals));
  }
  return [...groups.entries()]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([group, totals]) => {
      const { cost_nano_usd: nano, saved_nano_usd: saved, cache_hits: hits, ...counts } = totals;
      const named = names.get(group) ?? { [groupField(query.groupBy)]: group };
      return { ...named, ...counts, cost_usd: nano / 1e9, cache_hits: hits, saved_usd: saved / 1e9 } as UsageRow;
    });
}

/** Parses a stored hash of totals (Redis returns strings). */
export function totalsFromHash(hash: Record<string, string>): UsageTotals {
  const totals = emptyTotals();
  for (const field of TOTAL_FIELDS) totals[field] = Number(hash[field] ?? 0);
  return totals;
}
