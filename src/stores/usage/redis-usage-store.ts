import { appendFileSync, createReadStream } from 'node:fs';
import { mkdir, readdir, rename, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import type { Cluster, Redis } from 'ioredis';
import type { Logger } from 'pino';
import { closeTornLine } from './embedded-usage-store.ts';
import {
  dayOf,
  recordTotals,
  TOTAL_FIELDS,
  type UsageRecord,
  dayRange,
  groupCells,
  inRange,
  totalsFromHash,
  type UsageCell,
  type UsageQuery,
  type UsageRow,
  type UsageStore,
} from '../../usage/usage-accounting.ts';

type RedisConnection = Redis | Cluster;

// Applies records of one key id, each exactly once: a record's id marker is set first, and nothing
// else is written for it when the marker was already there. Every key is under the key id's hash tag,
// so one Cluster slot holds them all; one call per key id and batch instead of one per record.
// KEYS: cell index, record stream, end-user cell index, then per record its marker, its totals hash and
// its end-user totals hash. ARGV: marker TTL, stream cap, then per record its cell member, its end-user
// cell member, its JSON, the number of field/increment pairs, and those pairs. Returns how many records
// were applied (not seen before).
const APPLY_RECORDS = `
local applied = 0
local at = 3
for r = 0, (#KEYS - 3) / 3 - 1 do
  local totals = KEYS[5 + 3 * r]
  local endUserTotals = KEYS[6 + 3 * r]
  local member = ARGV[at]
  local endUserMember = ARGV[at + 1]
  local json = ARGV[at + 2]
  local count = tonumber(ARGV[at + 3])
  at = at + 4
  if redis.call('SET', KEYS[4 + 3 * r], '1', 'NX', 'EX', ARGV[1]) then
    for i = 0, count - 1 do
      redis.call('HINCRBY', totals, ARGV[at + 2 * i], ARGV[at + 2 * i + 1])
      redis.call('HINCRBY', endUserTotals, ARGV[at + 2 * i], ARGV[at + 2 * i + 1])
    end
    redis.call('SADD', KEYS[1], member)
    redis.call('SADD', KEYS[3], endUserMember)
    redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[2], '*', 'record', json)
    applied = applied + 1
  end
  at = at + 2 * count
end
return applied`;

/** The set of every key id with usage (admin read-back); outside any hash tag. */
const KEY_IDS = 'gw-usage:keys';
const LIVE_SPILL = 'usage-pending.spill.jsonl';
const REPLAYING = /^usage-pending\.\d+-\d+\.jsonl$/;
const BATCH = 200;
const DAY_SECONDS = 24 * 3600;
// Summed only when not zero (see applyGroup).
const OPTIONAL_FIELDS = new Set<string>(['cache_hits', 'saved_nano_usd']);

export interface RedisUsageStoreOptions {
  /** Where records that cannot reach Redis are spilled (`usage-pending.*.jsonl`). */
  readonly dataDir: string;
  readonly logger: Logger;
  /** Records held in memory while Redis is away; when full, they all spill to disk. Default 10 000. */
  readonly maxQueued?: number;
  /** Length each key's record stream is capped at (approximately). Default 100 000. */
  readonly streamMaxLength?: number;
  /**
   * How long a record's "applied" marker lives. A replay within it is never counted twice, so it
   * must outlast any outage whose spilled records are replayed later. Default 7 days.
   */
  readonly markerTtlSeconds?: number;
  /** Pause between attempts while Redis is away. Default 500 ms. */
  readonly retryDelayMs?: number;
}

/** The hash tag of one key id's usage keys. */
export const usageKeyTag = (keyId: string): string => `{gw-usage:${keyId}}`;

/**
 * Usage on Redis (single node, Sentinel or Cluster).
 *
 * Per key id (all under the hash tag `{gw-usage:<keyId>}`):
 * - `:records`: a Stream of the records, capped at about `streamMaxLength` entries (`XADD MAXLEN ~`).
 * - `:totals:<day>:<model>`: a hash of the day's sums (`requests`, `input_tokens`, `output_tokens`,
 *   `cached_tokens`, `total_tokens`, `charged_tokens`, `cost_nano_usd`, `cache_hits`, `saved_nano_usd`), all integers.
 * - `:cells`: the index of those hashes (`<day>|<model>`); `gw-usage:keys` lists every key id.
 * - `:end-user-totals:<day>|=<end user>` (`<day>|` for requests naming none): the same sums per end user,
 *   indexed in `:end-user-cells`.
 * - `:applied:<record id>`: the exactly-once marker.
 *
 * One script call per record writes all of it atomically, and nothing when the record's marker is
 * already set. `record()` only queues; a single drain loop writes the queue after the response.
 * While Redis is unreachable the queue holds up to `maxQueued` records, then spills them to a local
 * journal; the loop retries, and once Redis answers writes the queue and replays every spilled journal
 * (also those a previous process left), deleting a journal only when all its records are applied.
 */
export class RedisUsageStore implements UsageStore {
  private queue: UsageRecord[] = [];

  /** Records taken and not yet written to Redis (the usage-queue gauge). */
  get queueDepth(): number {
    return this.queue.length + this.inFlight.length;
  }
  private inFlight: UsageRecord[] = [];
  private draining: Promise<void> | undefined;
  private retryTimer: NodeJS.Timeout | undefined;
  private spilledSinceReplay = true;
  private readonly knownKeyIds = new Set<string>();
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
    this.maxQueued = Math.max(1, options.maxQueued ?? 10_000);
    this.streamMaxLength = options.streamMaxLength ?? 100_000;
    this.markerTtlSeconds = options.markerTtlSeconds ?? 7 * DAY_SECONDS;
    this.retryDelayMs = options.retryDelayMs ?? 500;
    redis.defineCommand('gatewayApplyUsage', { lua: APPLY_RECORDS });
  }

  /** Opens the store and starts replaying whatever an earlier process spilled. */
  static async open(redis: RedisConnection, options: RedisUsageStoreOptions): Promise<RedisUsageStore> {
    await mkdir(options.dataDir, { recursive: true });
    await closeTornLine(join(options.dataDir, LIVE_SPILL));
    const store = new RedisUsageStore(redis, options);
    store.schedule();
    return store;
  }

  record(record: UsageRecord): void {
    try {
      if (this.closed) return this.spill([record]);
      this.queue.push(record);
      // Full: the whole queue goes to disk in one write, rather than one write per record from here on.
      if (this.queue.length >= this.maxQueued) this.spill(this.queue.splice(0));
      this.schedule();
    } catch (error) {
      this.options.logger.error({ err: error, record: record.id }, 'usage store: record failed');
    }
  }

  private schedule(): void {
    if (this.draining || this.retryTimer || this.closed) return;
    this.draining = this.drain().finally(() => {
      this.draining = undefined;
      // Records that arrived, or spilled, while the last pass was being written.
      if (this.healthy && (this.queue.length || this.spilledSinceReplay)) this.schedule();
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
        this.inFlight = this.queue.splice(0, BATCH);
        await this.applyAll(this.inFlight);
        this.inFlight = [];
      }
      if (this.spilledSinceReplay) await this.replaySpilled();
      if (!this.healthy) this.options.logger.info('usage store: Redis is back, held usage records written');
      this.healthy = true;
    } catch (error) {
      // The batch may have been partly applied: its markers make the retry count each record once.
      this.queue.unshift(...this.inFlight);
      this.inFlight = [];
      if (this.queue.length >= this.maxQueued) this.spill(this.queue.splice(0));
      this.knownKeyIds.clear();
      if (this.healthy)
        this.options.logger.warn(
          { err: error },
          'usage store: Redis unreachable, holding usage records until it returns',
        );
      this.healthy = false;
      this.retryLater();
    }
  }

  private async applyAll(records: readonly UsageRecord[]): Promise<void> {
    const byKey = new Map<string, UsageRecord[]>();
    for (const record of records) {
      const group = byKey.get(record.keyId);
      if (group) group.push(record);
      else byKey.set(record.keyId, [record]);
    }
    await Promise.all([...byKey].map(([keyId, group]) => this.applyGroup(keyId, group)));
  }

  /** Records of one key id in one script call. */
  private async applyGroup(keyId: string, records: readonly UsageRecord[]): Promise<void> {
    const tag = usageKeyTag(keyId);
    const keys = [`${tag}:cells`, `${tag}:records`, `${tag}:end-user-cells`];
    const args = [String(this.markerTtlSeconds), String(this.streamMaxLength)];
    for (const record of records) {
      const day = dayOf(record.time);
      const totals = recordTotals(record);
      // An end user's cell member and hash: `<day>|=<end user>`, `<day>|` for the requests that named none.
      const endUser = record.endUser === undefined ? '' : `=${record.endUser}`;
      keys.push(
        `${tag}:applied:${record.id}`,
        `${tag}:totals:${day}:${record.model}`,
        `${tag}:end-user-totals:${day}|${endUser}`,
      );
      const increments: string[] = [];
      for (const field of TOTAL_FIELDS) {
        // The cache's fields only when they count: a record the cache did not answer leaves the hash as before.
        if (totals[field] === 0 && OPTIONAL_FIELDS.has(field)) continue;
        increments.push(field, String(wholeNumber(totals[field])));
      }
      args.push(
        `${day}|${record.model}`,
        `${day}|${endUser}`,
        JSON.stringify(record),
        String(increments.length / 2),
        ...increments,
      );
    }
    await (
      this.redis as unknown as { gatewayApplyUsage: (numberOfKeys: number, ...args: string[]) => Promise<number> }
    ).gatewayApplyUsage(keys.length, ...keys, ...args);
    if (!this.knownKeyIds.has(keyId)) {
      await this.redis.sadd(KEY_IDS, keyId);
      this.knownKeyIds.add(keyId);
    }
  }

  /** Appends records to the live spill journal (synchronously: they are on disk when this returns). */
  private spill(records: readonly UsageRecord[]): void {
    if (!records.length) return;
    try {
      appendFileSync(
        join(this.options.dataDir, LIVE_SPILL),
        records.map((record) => `${JSON.stringify(record)}\n`).join(''),
      );
      this.spilledSinceReplay = true;
    } catch (error) {
      this.options.logger.error(
        { err: error, count: records.length },
        'usage store: cannot spill usage records to disk; they are lost',
      );
    }
  }

  /** Replays spilled journals; a journal is deleted only once every record in it is applied. */
  private async replaySpilled(): Promise<void> {
    const dir = this.options.dataDir;
    this.spilledSinceReplay = false;
    try {
      await rename(join(dir, LIVE_SPILL), join(dir, `usage-pending.${Date.now()}-${process.pid}.jsonl`));
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    }
    try {
      for (const name of (await readdir(dir)).filter((file) => REPLAYING.test(file)).sort()) {
        for await (const batch of journalBatches(join(dir, name), BATCH)) await this.applyAll(batch);
        await unlink(join(dir, name)).catch((error: NodeJS.ErrnoException) => {
          if (error.code !== 'ENOENT') throw error;
        });
      }
    } catch (error) {
      this.spilledSinceReplay = true;
      throw error;
    }
  }

  /** The daily cells of one key, optionally only those in a day range (one round trip for the hashes). */
  private async cellsOf(keyId: string, fromDay?: string, toDay?: string): Promise<UsageCell[]> {
    const tag = usageKeyTag(keyId);
    const members = (await this.redis.smembers(`${tag}:cells`))
      .map((member) => ({ day: member.slice(0, member.indexOf('|')), model: member.slice(member.indexOf('|') + 1) }))
      .filter((cell) => inRange(cell.day, fromDay, toDay));
    if (!members.length) return [];
    const pipeline = this.redis.pipeline();
    for (const { day, model } of members) pipeline.hgetall(`${tag}:totals:${day}:${model}`);
    const replies = (await pipeline.exec()) ?? [];
    return members.map(({ day, model }, index) => {
      const [error, hash] = replies[index] ?? [new Error('no reply')];
      if (error) throw error;
      return { keyId, day, model, totals: totalsFromHash(hash as Record<string, string>) };
    });
  }

  /** The daily cells per end user of one key in a day range (see {@link applyGroup}). */
  private async endUserCellsOf(keyId: string, fromDay?: string, toDay?: string): Promise<UsageCell[]> {
    const tag = usageKeyTag(keyId);
    const members = (await this.redis.smembers(`${tag}:end-user-cells`)).filter((member) =>
      inRange(member.slice(0, member.indexOf('|')), fromDay, toDay),
    );
    if (!members.length) return [];
    const pipeline = this.redis.pipeline();
    for (const member of members) pipeline.hgetall(`${tag}:end-user-totals:${member}`);
    const replies = (await pipeline.exec()) ?? [];
    return members.map((member, index) => {
      const [error, hash] = replies[index] ?? [new Error('no reply')];
      if (error) throw error;
      const named = member.slice(member.indexOf('|') + 1);
      const endUser = named === '' ? null : named.slice(1);
      return {
        keyId,
        day: member.slice(0, member.indexOf('|')),
        model: '',
        endUser,
        totals: totalsFromHash(hash as Record<string, string>),
      };
    });
  }

  async query(query: UsageQuery): Promise<UsageRow[]> {
    const { fromDay, toDay } = dayRange(query);
    const keyIds = query.keyId !== undefined ? [query.keyId] : await this.redis.smembers(KEY_IDS);
    const cellsOf = (keyId: string) =>
      query.groupBy === 'end_user' ? this.endUserCellsOf(keyId, fromDay, toDay) : this.cellsOf(keyId, fromDay, toDay);
    const cells = (await Promise.all(keyIds.map(cellsOf))).flat();
    return groupCells(cells, query);
  }

  async flush(): Promise<void> {
    if (this.retryTimer) {
      clearTimeout(this.retryTimer);
      this.retryTimer = undefined;
    }
    this.schedule();
    while (this.draining) await this.draining;
    // Redis is away: what is still queued is made safe on disk.
    if (this.queue.length) this.spill(this.queue.splice(0));
  }

  async close(): Promise<void> {
    await this.flush();
    this.closed = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
  }
}

const wholeNumber = (value: number): number => (Number.isFinite(value) ? Math.round(value) : 0);

/** Reads a spilled journal in batches (a torn or foreign line is skipped). */
async function* journalBatches(path: string, size: number): AsyncGenerator<UsageRecord[]> {
  let batch: UsageRecord[] = [];
  let lines;
  try {
    lines = createInterface({ input: createReadStream(path, { encoding: 'utf8' }), crlfDelay: Infinity });
    for await (const line of lines) {
      if (!line.trim()) continue;
      try {
        const value = JSON.parse(line) as UsageRecord;
        if (typeof value?.id === 'string' && typeof value.keyId === 'string') batch.push(value);
      } catch {
        continue;
      }
      if (batch.length >= size) {
        yield batch;
        batch = [];
      }
    }
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  if (batch.length) yield batch;
}
