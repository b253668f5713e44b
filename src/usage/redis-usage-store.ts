import { appendFileSync } from 'node:fs';
import { mkdir, readdir, rename, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import type { Cluster, Redis } from 'ioredis';
import type { Logger } from 'pino';
import { readJournal } from './embedded-usage-store.ts';
import { dayOf, recordTotals, TOTAL_FIELDS, type UsageRecord } from './usage-record.ts';
import { groupCells, inRange, totalsFromHash, type UsageCell, type UsageQuery, type UsageRow, type UsageStore } from './usage-store.ts';

type RedisConnection = Redis | Cluster;

// Applies one record exactly once: the id marker is set first, and totals, index and stream are
// only written when it was not there yet. All keys share the key's hash tag (one Cluster slot).
const APPLY_RECORD = `
if not redis.call('SET', KEYS[1], '1', 'NX', 'EX', ARGV[1]) then return 0 end
for i = 0, ${TOTAL_FIELDS.length - 1} do
  redis.call('HINCRBY', KEYS[2], ARGV[4 + i * 2], ARGV[5 + i * 2])
end
redis.call('SADD', KEYS[3], ARGV[2])
redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[3], '*', 'record', ARGV[${4 + TOTAL_FIELDS.length * 2}])
return 1`;

const KEYS_SET = 'gw-usage:keys';
const PENDING = /^usage-pending\..+\.jsonl$/;

export interface RedisUsageStoreOptions {
  /** Where records that cannot reach Redis are spilled. */
  readonly dataDir: string;
  readonly logger: Logger;
  /** Records held in memory while Redis is away before they spill to disk. */
  readonly maxQueued?: number;
  /** Length the per-key record stream is capped at (approximately). */
  readonly streamMaxLength?: number;
  /** How long a record's "applied" marker lives: replays within it are never counted twice. */
  readonly markerTtlSeconds?: number;
  readonly retryDelayMs?: number;
}

const tagOf = (keyId: string) => `{gw-usage:${keyId}}`;

/**
 * Usage on Redis: each record in a capped per-key Stream plus daily totals per key × model, written
 * atomically and exactly once by one script call. Records are taken synchronously and written after
 * the response; while Redis is unreachable they wait in memory (bounded), spill to a local journal,
 * and are replayed when it returns.
 */
export class RedisUsageStore implements UsageStore {
  private queue: UsageRecord[] = [];
  private draining: Promise<void> | undefined;
  private retryTimer: NodeJS.Timeout | undefined;
  private knownKeys = new Set<string>();
  private closed = false;
  healthy = true;

  private readonly maxQueued: number;
  private readonly streamMaxLength: number;
  private readonly markerTtlSeconds: number;
  private readonly retryDelayMs: number;

  constructor(
    private readonly redis: RedisConnection,
    private readonly options: RedisUsageStoreOptions,
  ) {
    this.maxQueued = options.maxQueued ?? 10_000;
    this.streamMaxLength = options.streamMaxLength ?? 100_000;
    this.markerTtlSeconds = options.markerTtlSeconds ?? 7 * 24 * 3600;
    this.retryDelayMs = options.retryDelayMs ?? 500;
    redis.defineCommand('gatewayApplyUsage', { numberOfKeys: 4, lua: APPLY_RECORD });
  }

  /** Opens the store and replays whatever an earlier process spilled. */
  static async open(redis: RedisConnection, options: RedisUsageStoreOptions): Promise<RedisUsageStore> {
    await mkdir(options.dataDir, { recursive: true });
    const store = new RedisUsageStore(redis, options);
    store.schedule();
    return store;
  }

  record(record: UsageRecord): void {
    if (this.closed) return this.spill([record]);
    this.queue.push(record);
    if (this.queue.length > this.maxQueued) this.spill(this.queue.splice(0, this.queue.length - this.maxQueued));
    this.schedule();
  }

  private schedule(): void {
    if (this.draining || this.retryTimer) return;
    this.draining = this.drain().finally(() => {
      this.draining = undefined;
      // Records that arrived while the last batch was being written.
      if (this.queue.length && this.healthy && !this.closed) this.schedule();
    });
  }

  private retryLater(): void {
    if (this.retryTimer || this.closed) return;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      this.schedule();
    }, this.retryDelayMs);
    this.retryTimer.unref();
  }

  private async drain(): Promise<void> {
    try {
      while (this.queue.length) {
        const batch = this.queue.slice(0, 200);
        await Promise.all(batch.map((record) => this.apply(record)));
        this.queue.splice(0, batch.length);
      }
      await this.replaySpilled();
      if (!this.healthy) this.options.logger.info('usage store: Redis is back, queued usage written');
      this.healthy = true;
    } catch (error) {
      if (this.healthy) this.options.logger.warn({ err: error }, 'usage store: Redis unreachable, holding usage records until it returns');
      this.healthy = false;
      this.retryLater();
    }
  }

  private async apply(record: UsageRecord): Promise<void> {
    const tag = tagOf(record.keyId);
    const day = dayOf(record.time);
    const totals = recordTotals(record);
    const fields = TOTAL_FIELDS.flatMap((field) => [field, String(totals[field])]);
    await (this.redis as unknown as { gatewayApplyUsage: (...args: string[]) => Promise<number> }).gatewayApplyUsage(
      `${tag}:applied:${record.id}`,
      `${tag}:totals:${day}:${record.model}`,
      `${tag}:cells`,
      `${tag}:records`,
      String(this.markerTtlSeconds),
      `${day}|${record.model}`,
      String(this.streamMaxLength),
      ...fields,
      JSON.stringify(record),
    );
    if (!this.knownKeys.has(record.keyId)) {
      await this.redis.sadd(KEYS_SET, record.keyId);
      this.knownKeys.add(record.keyId);
    }
  }

  private spill(records: UsageRecord[]): void {
    if (!records.length) return;
    try {
      appendFileSync(join(this.options.dataDir, 'usage-pending.spill.jsonl'), records.map((record) => `${JSON.stringify(record)}\n`).join(''));
    } catch (error) {
      this.options.logger.error({ err: error, count: records.length }, 'usage store: cannot spill usage records to disk');
    }
  }

  /** Replays spilled journals; a journal is deleted only once every record in it is applied. */
  private async replaySpilled(): Promise<void> {
    const dir = this.options.dataDir;
    const live = join(dir, 'usage-pending.spill.jsonl');
    try {
      await rename(live, join(dir, `usage-pending.${Date.now()}-${process.pid}.jsonl`));
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    }
    for (const name of (await readdir(dir)).filter((file) => PENDING.test(file) && file !== 'usage-pending.spill.jsonl').sort()) {
      const records: UsageRecord[] = [];
      await readJournal(join(dir, name), (record) => records.push(record));
      for (let index = 0; index < records.length; index += 200) await Promise.all(records.slice(index, index + 200).map((record) => this.apply(record)));
      await unlink(join(dir, name));
    }
  }

  private async cellsOf(keyId: string): Promise<UsageCell[]> {
    const tag = tagOf(keyId);
    const members = await this.redis.smembers(`${tag}:cells`);
    const cells = await Promise.all(
      members.map(async (member) => {
        const [day, model] = [member.slice(0, member.indexOf('|')), member.slice(member.indexOf('|') + 1)];
        return { keyId, day, model, totals: totalsFromHash(await this.redis.hgetall(`${tag}:totals:${day}:${model}`)) };
      }),
    );
    return cells;
  }

  async query(query: UsageQuery): Promise<UsageRow[]> {
    const keys = query.keyId !== undefined ? [query.keyId] : await this.redis.smembers(KEYS_SET);
    const cells = (await Promise.all(keys.map((keyId) => this.cellsOf(keyId)))).flat();
    return groupCells(cells, query);
  }

  async chargedTokens(keyId: string, fromDay: string, toDay: string): Promise<number> {
    const cells = await this.cellsOf(keyId);
    return cells.filter((cell) => inRange(cell.day, fromDay, toDay)).reduce((sum, cell) => sum + cell.totals.charged_tokens, 0);
  }

  async flush(): Promise<void> {
    if (this.retryTimer) {
      clearTimeout(this.retryTimer);
      this.retryTimer = undefined;
    }
    this.schedule();
    while (this.draining) await this.draining;
    if (this.queue.length) this.spill(this.queue.splice(0));
  }

  async close(): Promise<void> {
    await this.flush();
    this.closed = true;
  }
}
