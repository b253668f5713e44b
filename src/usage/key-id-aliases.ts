import type { UsageQuery, UsageRow, UsageStore } from './usage-store.ts';

/** Key id → the older ids its usage was also recorded under. */
export type KeyIdAliasMap = ReadonlyMap<string, readonly string[]>;

/**
 * A usage store whose read-back of one key also sums what was recorded under that key's older ids
 * (static keys' ids of the previous scheme: see `stores/keys/legacy-key-ids.ts`). Records are written
 * as they come, under the current id. The aliases are worked out on first read and kept once found;
 * a failed lookup is tried again on the next read.
 */
export class KeyIdAliases implements UsageStore {
  private aliases: Promise<KeyIdAliasMap> | undefined;

  constructor(
    private readonly inner: UsageStore,
    private readonly find: () => Promise<KeyIdAliasMap>,
  ) {}

  get healthy(): boolean {
    return this.inner.healthy;
  }

  /** The inner store's queue depth (for the metrics gauge), 0 when it has none. */
  get queueDepth(): number {
    return (this.inner as Partial<{ queueDepth: number }>).queueDepth ?? 0;
  }

  record(record: Parameters<UsageStore['record']>[0]): void {
    this.inner.record(record);
  }

  async query(query: UsageQuery): Promise<UsageRow[]> {
    if (query.keyId === undefined) return this.inner.query(query);
    const older = (await this.aliasMap()).get(query.keyId);
    if (!older?.length) return this.inner.query(query);
    const parts = await Promise.all([query.keyId, ...older].map((keyId) => this.inner.query({ ...query, keyId })));
    return sumRows(parts.flat(), query.groupBy);
  }

  flush(): Promise<void> {
    return this.inner.flush();
  }

  close(): Promise<void> {
    return this.inner.close();
  }

  private aliasMap(): Promise<KeyIdAliasMap> {
    if (!this.aliases) {
      const finding = this.find();
      this.aliases = finding;
      finding.catch(() => {
        if (this.aliases === finding) this.aliases = undefined;
      });
    }
    return this.aliases.catch(() => new Map());
  }
}

/** Rows of several keys summed per model or day, sorted as a store sorts them. */
export function sumRows(rows: readonly UsageRow[], groupBy: UsageQuery['groupBy']): UsageRow[] {
  const groups = new Map<string, Record<string, number | string>>();
  for (const row of rows) {
    const group = String(row[groupBy]);
    const sum = groups.get(group);
    if (!sum) {
      groups.set(group, { ...row });
      continue;
    }
    for (const [field, value] of Object.entries(row)) {
      if (typeof value !== 'number') continue;
      const before = (sum[field] as number | undefined) ?? 0;
      // Money is summed in whole nano-USD, as the stores keep it, so no binary fraction creeps in.
      sum[field] = field === 'cost_usd' ? (Math.round(before * 1e9) + Math.round(value * 1e9)) / 1e9 : before + value;
    }
  }
  return [...groups.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, row]) => row as UsageRow);
}
