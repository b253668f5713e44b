import { groupField, type UsageQuery, type UsageRow, type UsageStore } from './usage-store.ts';

/** Key id → the older ids its usage was also recorded under. */
export type KeyIdAliasMap = ReadonlyMap<string, readonly string[]>;

/**
 * A usage store whose read-back of one key also sums what was recorded under that key's older ids
 * (static keys' ids of the previous scheme: see `stores/keys/legacy-key-ids.ts`), and whose rows per
 * key show that usage under the current id. Records are written as they come, under the current id.
 * The aliases are worked out on first read and kept once found; a failed lookup is tried again on the
 * next read.
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
    if (query.groupBy === 'key') return this.perKey(query);
    if (query.keyId === undefined) return this.inner.query(query);
    const older = (await this.aliasMap()).get(query.keyId);
    if (!older?.length) return this.inner.query(query);
    const parts = await Promise.all([query.keyId, ...older].map((keyId) => this.inner.query({ ...query, keyId })));
    return sumRows(parts.flat(), query.groupBy);
  }

  /** Rows per key id, a row under an older id summed into its key's row under the current id. */
  private async perKey(query: UsageQuery): Promise<UsageRow[]> {
    const aliases = await this.aliasMap();
    const ids = query.keyId === undefined ? [undefined] : [query.keyId, ...(aliases.get(query.keyId) ?? [])];
    const rows = (await Promise.all(ids.map((keyId) => this.inner.query({ ...query, keyId })))).flat();
    const current = new Map<string, string>();
    for (const [id, older] of aliases) for (const old of older) current.set(old, id);
    return sumRows(
      rows.map((row) => ({ ...row, key_id: current.get(row.key_id!) ?? row.key_id })),
      'key',
    );
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

/**
 * Rows summed per model, day, key id or team, sorted as a store sorts them (by that field; the team
 * null, keys in no team, last).
 */
export function sumRows(rows: readonly UsageRow[], groupBy: UsageQuery['groupBy'] | 'team'): UsageRow[] {
  const field = groupField(groupBy);
  const groups = new Map<string | null, Record<string, number | string | null>>();
  for (const row of rows) {
    const group = row[field] ?? null;
    const sum = groups.get(group);
    if (!sum) {
      groups.set(group, { ...row, [field]: group });
      continue;
    }
    for (const [name, value] of Object.entries(row)) {
      if (typeof value !== 'number') continue;
      const before = (sum[name] as number | undefined) ?? 0;
      // Money is summed in whole nano-USD, as the stores keep it, so no binary fraction creeps in.
      sum[name] =
        name === 'cost_usd' || name === 'saved_usd'
          ? (Math.round(before * 1e9) + Math.round(value * 1e9)) / 1e9
          : before + value;
    }
  }
  return [...groups.entries()]
    .sort(([a], [b]) => (a === b ? 0 : a === null ? 1 : b === null ? -1 : a < b ? -1 : 1))
    .map(([, row]) => row as UsageRow);
}
