import type { Logger } from 'pino';
import { pino } from 'pino';
import type { CounterChange, CounterDemand, LimitLedger, ReserveResult } from '../../usage/limit-ledger.ts';
import type { RedisConnection } from '../redis/redis-client.ts';
import { SharedDeadline } from '../redis/shared-deadline.ts';

/**
 * Every counter key starts with this. The one hash tag puts all counters in one Cluster slot, so a
 * script may touch any set of them (a key's and its team's counters in one reservation, a whole batch
 * of settlements) without a cross-slot error; the price is that one node holds them all.
 */
export const LIMIT_KEY_PREFIX = 'gw-lim:{gw-lim}:';

/** The Redis key of a counter. */
export const limitKey = (counter: string): string => `${LIMIT_KEY_PREFIX}${counter}`;

// Reads every counter, refuses (changing nothing) at the first demand with less than `need` left,
// else adds to each what it reserves, capped at what remains, and makes it expire when its window ends.
// KEYS: the counters. ARGV: per demand limit, want, need, resetAt (epoch ms).
// Returns one flat array (cheaper to parse than nested ones, on every request): the refused index or
// -1, then each counter's value, then what was reserved on each.
const RESERVE = `
local n = #KEYS
local reply = { -1 }
for i = 1, n do
  reply[1 + i] = tonumber(redis.call('GET', KEYS[i]) or '0')
  reply[1 + n + i] = 0
end
for i = 1, n do
  local base = (i - 1) * 4
  if tonumber(ARGV[base + 1]) - reply[1 + i] < tonumber(ARGV[base + 3]) then
    reply[1] = i - 1
    return reply
  end
end
for i = 1, n do
  local base = (i - 1) * 4
  local amount = math.min(tonumber(ARGV[base + 2]), tonumber(ARGV[base + 1]) - reply[1 + i])
  if amount < 0 then amount = 0 end
  reply[1 + n + i] = amount
  reply[1 + i] = redis.call('INCRBY', KEYS[i], string.format('%d', amount))
  redis.call('PEXPIREAT', KEYS[i], ARGV[base + 4])
end
return reply`;

// Settlements: adds each delta to its counter when the counter exists (a counter whose window ended,
// or that Redis lost, is not recreated). KEYS: the counters. ARGV: the deltas.
// Returns each counter's value afterwards (false when it does not exist).
const ADJUST = `
local values = {}
for i = 1, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 1 then
    values[i] = redis.call('INCRBY', KEYS[i], ARGV[i])
  else
    values[i] = false
  end
end
return values`;

// Catch-up after an outage: adds what was counted in memory meanwhile. A counter Redis no longer has
// (it restarted) is recreated at the value memory had, expiring when its window ends.
// KEYS: the counters. ARGV: per counter delta, value in memory, resetAt (epoch ms).
const CATCH_UP = `
local values = {}
for i = 1, #KEYS do
  local base = (i - 1) * 3
  if redis.call('EXISTS', KEYS[i]) == 1 then
    values[i] = redis.call('INCRBY', KEYS[i], ARGV[base + 1])
    if redis.call('PTTL', KEYS[i]) < 0 then redis.call('PEXPIREAT', KEYS[i], ARGV[base + 3]) end
  else
    redis.call('SET', KEYS[i], ARGV[base + 2])
    redis.call('PEXPIREAT', KEYS[i], ARGV[base + 3])
    values[i] = tonumber(ARGV[base + 2])
  end
end
return values`;

interface LedgerCommands {
  gatewayLimitReserve(numberOfKeys: number, ...args: string[]): Promise<number[]>;
  gatewayLimitAdjust(numberOfKeys: number, ...args: string[]): Promise<(number | null)[]>;
  gatewayLimitCatchUp(numberOfKeys: number, ...args: string[]): Promise<number[]>;
}

/** What to catch up on one counter: the change made meanwhile, and its value in memory. */
export interface CatchUpEntry {
  readonly counter: string;
  readonly delta: number;
  readonly value: number;
  readonly resetAt: number;
}

export interface RedisLedgerOptions {
  readonly logger?: Logger;
  /** Longest wait for one adjustment batch (none by default: the client's command timeout). */
  readonly timeoutMs?: number;
  /** The deadline shared with the caller's own commands; takes the place of `timeoutMs`. */
  readonly deadline?: SharedDeadline;
  /**
   * Called when a batch of adjustments could not be applied; `sent` is false when it never left
   * this process (the connection was down), true when Redis may still apply it later. Logged by default.
   */
  readonly onAdjustFailed?: (changes: readonly CounterChange[], error: Error, sent: boolean) => void;
  /** Asked before a batch of adjustments is sent; when false, it goes to `onAdjustFailed` unsent. */
  readonly canSend?: () => boolean;
  /** Called with each counter's value Redis gave back after an adjustment. */
  readonly onValues?: (values: ReadonlyMap<string, number>, resetAt: ReadonlyMap<string, number>) => void;
}

// Keys per script call when catching up (a very long outage may leave many).
const CATCH_UP_CHUNK = 1000;

/**
 * Limit counters in Redis (single node, Sentinel or Cluster), shared by every gateway instance: each
 * reservation is one atomic script over all its counters; settlements are coalesced per counter and
 * sent as one script call per batch (on the next turn of the event loop). Counter values are integers
 * (tokens or nano-USD, below 2^53).
 */
export class RedisLedger implements LimitLedger {
  private pending = new Map<string, { delta: number; resetAt: number }>();
  private scheduled = false;
  private readonly inFlight = new Set<Promise<void>>();
  private readonly logger: Logger;
  private readonly deadline: SharedDeadline | undefined;

  constructor(
    private readonly redis: RedisConnection,
    private readonly options: RedisLedgerOptions = {},
  ) {
    this.logger = options.logger ?? pino({ level: 'silent' });
    this.deadline =
      options.deadline ?? (options.timeoutMs === undefined ? undefined : new SharedDeadline(options.timeoutMs));
    // defineCommand sends EVALSHA and reloads the script on NOSCRIPT (a restarted Redis).
    redis.defineCommand('gatewayLimitReserve', { lua: RESERVE });
    redis.defineCommand('gatewayLimitAdjust', { lua: ADJUST });
    redis.defineCommand('gatewayLimitCatchUp', { lua: CATCH_UP });
  }

  private get commands(): LedgerCommands {
    return this.redis as unknown as LedgerCommands;
  }

  async reserve(demands: readonly CounterDemand[]): Promise<ReserveResult> {
    const count = demands.length;
    if (!count) return { used: [], reserved: [] };
    const args: string[] = new Array(count * 5);
    for (let i = 0; i < count; i++) {
      const demand = demands[i]!;
      args[i] = limitKey(demand.counter);
      const base = count + i * 4;
      args[base] = whole(demand.limit);
      args[base + 1] = whole(demand.want);
      args[base + 2] = whole(demand.need);
      args[base + 3] = whole(demand.resetAt);
    }
    const reply = await this.commands.gatewayLimitReserve(count, ...args);
    const used = new Array<number>(count);
    const reserved = new Array<number>(count);
    for (let i = 0; i < count; i++) {
      used[i] = Number(reply[1 + i]);
      reserved[i] = Number(reply[1 + count + i]);
    }
    const refused = Number(reply[0]);
    return refused >= 0 ? { refused, used, reserved } : { used, reserved };
  }

  adjust(changes: readonly CounterChange[]): void {
    const now = Date.now();
    for (const change of changes) {
      if (change.resetAt <= now || !Number.isFinite(change.delta)) continue;
      const entry = this.pending.get(change.counter);
      if (entry) entry.delta += Math.round(change.delta);
      else this.pending.set(change.counter, { delta: Math.round(change.delta), resetAt: change.resetAt });
    }
    if (this.scheduled || !this.pending.size) return;
    this.scheduled = true;
    setImmediate(() => this.sendBatch());
  }

  async peek(counters: readonly string[]): Promise<number[]> {
    if (!counters.length) return [];
    const values = await this.redis.mget(...counters.map(limitKey));
    return values.map((value) => Number(value ?? 0));
  }

  /**
   * Adds what was counted in memory during an outage (see {@link CatchUpEntry}); a counter whose
   * window has ended is skipped. Resolves with each counter's value afterwards.
   */
  async catchUp(entries: readonly CatchUpEntry[]): Promise<Map<string, number>> {
    const now = Date.now();
    const open = entries.filter((entry) => entry.resetAt > now);
    const values = new Map<string, number>();
    for (let start = 0; start < open.length; start += CATCH_UP_CHUNK) {
      const chunk = open.slice(start, start + CATCH_UP_CHUNK);
      const args = chunk.flatMap((entry) => [whole(entry.delta), whole(entry.value), whole(entry.resetAt)]);
      const replies = await this.commands.gatewayLimitCatchUp(
        chunk.length,
        ...chunk.map((entry) => limitKey(entry.counter)),
        ...args,
      );
      chunk.forEach((entry, index) => values.set(entry.counter, Number(replies[index])));
    }
    return values;
  }

  degraded(): boolean {
    return false;
  }

  async flush(): Promise<void> {
    if (this.pending.size) this.sendBatch();
    while (this.inFlight.size) await Promise.all([...this.inFlight]);
  }

  async close(): Promise<void> {
    await this.flush();
  }

  private sendBatch(): void {
    this.scheduled = false;
    if (!this.pending.size) return;
    const batch = this.pending;
    this.pending = new Map();
    const changes = [...batch].map(([counter, { delta, resetAt }]) => ({ counter, delta, resetAt }));
    if (this.options.canSend?.() === false && this.options.onAdjustFailed) {
      this.options.onAdjustFailed(changes, new Error('Redis is unavailable'), false);
      return;
    }
    const sent = this.redis.status === 'ready';
    const call = this.commands.gatewayLimitAdjust(
      changes.length,
      ...changes.map((change) => limitKey(change.counter)),
      ...changes.map((change) => whole(change.delta)),
    );
    const done = (this.deadline ? this.deadline.race(call) : call).then(
      (replies) => {
        const values = new Map<string, number>();
        const resets = new Map<string, number>();
        changes.forEach((change, index) => {
          const value = replies[index];
          if (value === null || value === undefined) return;
          values.set(change.counter, Number(value));
          resets.set(change.counter, change.resetAt);
        });
        this.options.onValues?.(values, resets);
      },
      (error: Error) => {
        if (this.options.onAdjustFailed) this.options.onAdjustFailed(changes, error, sent);
        else
          this.logger.warn(
            { reason: error.message, counters: changes.length },
            'limit ledger: settlements could not reach Redis; they are dropped',
          );
      },
    );
    const tracked = done.finally(() => this.inFlight.delete(tracked));
    this.inFlight.add(tracked);
  }
}

/** An integer as Redis takes it (values are whole tokens or nano-USD). */
const whole = (value: number): string => String(Math.round(value));
