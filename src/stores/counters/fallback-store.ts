import type { IncrementResponse, Options, Store } from 'express-rate-limit';
import type { Logger } from 'pino';
import type { RedisStore } from 'rate-limit-redis';
import { RedisBreaker } from '../redis/redis-breaker.ts';
import { isReady, type RedisConnection } from '../redis/redis-client.ts';
import { withDeadline } from '../redis/with-deadline.ts';
import { createRedisCounterStore } from './redis-counter-store.ts';
import { SeededMemoryCounter } from './seeded-memory-counter.ts';

// Adds hits counted in memory to a rate-limit-redis counter (key = prefix + key). A counter Redis no
// longer has (it restarted, or the window began during the outage) is created at the count memory had,
// expiring when that window ends (as rate-limit-redis would have set it).
// KEYS: the counter. ARGV: hits counted in memory, the whole count in memory, milliseconds left.
const CATCH_UP = `
local total
if redis.call('EXISTS', KEYS[1]) == 1 then
  total = redis.call('INCRBY', KEYS[1], ARGV[1])
else
  total = redis.call('INCRBY', KEYS[1], ARGV[2])
end
if redis.call('PTTL', KEYS[1]) <= 0 then redis.call('PEXPIRE', KEYS[1], ARGV[3]) end
return total`;

interface CatchUpCommand {
  gatewayRateCatchUp(key: string, hits: string, total: string, remainingMs: string): Promise<number>;
}

export interface FallbackStoreOptions {
  /** Shared counter keys start with this; every gateway process must use the same prefix. */
  readonly prefix: string;
  readonly logger: Logger;
  /** Longest wait for Redis before one decision is made in memory instead (250 ms by default). */
  readonly timeoutMs?: number;
}

/**
 * Counts in Redis, shared by every gateway process. When Redis is unreachable, or a command fails or
 * is slow, the connection's {@link RedisBreaker} opens: decisions are made in this process's memory at
 * once (requests keep flowing, each process enforcing the limit on its own, every key starting from
 * the count Redis last gave it), that is logged once and shown in {@link FallbackStore.degraded}. The
 * breaker's probe closes it as soon as Redis answers again, with or without traffic.
 */
export class FallbackStore implements Store {
  readonly prefix: string;
  readonly localKeys = false;
  private readonly shared: RedisStore;
  private readonly memory = new SeededMemoryCounter();
  private readonly logger: Logger;
  private readonly timeoutMs: number;
  private readonly breaker: RedisBreaker;
  private readonly stopListening: () => void;
  private failing = false;
  private catchingUp: Promise<void> | undefined;
  // Set after a failure: the scripts may be missing (Redis restarted) or never loaded (Redis was down at start).
  private scriptsStale = false;

  constructor(
    private readonly redis: RedisConnection,
    options: FallbackStoreOptions,
  ) {
    this.prefix = options.prefix;
    this.logger = options.logger;
    this.timeoutMs = options.timeoutMs ?? 250;
    this.shared = createRedisCounterStore(redis, options.prefix);
    redis.defineCommand('gatewayRateCatchUp', { numberOfKeys: 1, lua: CATCH_UP });
    this.breaker = RedisBreaker.of(redis);
    this.stopListening = this.breaker.onClose(() => this.recover());
  }

  /** True while decisions are made in process memory rather than in Redis. */
  get degraded(): boolean {
    return this.failing || this.breaker.open;
  }

  init(options: Options): void {
    this.memory.setWindow(options.windowMs);
    this.shared.init(options).catch(() => {
      this.scriptsStale = true;
    });
  }

  async increment(key: string): Promise<IncrementResponse> {
    if (!isReady(this.redis)) {
      this.breaker.trip();
      this.fallBack(`connection ${this.redis.status}`);
      return this.memory.increment(key);
    }
    // The breaker is open: no request waits for a Redis that just failed; its probe closes it.
    if (this.breaker.open) {
      this.fallBack('a Redis command failed or timed out moments ago');
      return this.memory.increment(key);
    }
    if (this.failing) {
      // Redis answers again, but the hits counted meanwhile are not in it yet: go on in memory until they are.
      this.recover();
      if (this.failing) return this.memory.increment(key);
    }
    try {
      if (this.scriptsStale) this.reloadScripts();
      const result = await withDeadline(this.shared.increment(key), this.timeoutMs);
      this.memory.remember(key, result);
      this.recover();
      return result;
    } catch (error) {
      this.breaker.trip();
      this.fallBack((error as Error).message);
      return this.memory.increment(key);
    }
  }

  async decrement(key: string): Promise<void> {
    if (this.degraded) return this.memory.decrement(key);
    await withDeadline(this.shared.decrement(key), this.timeoutMs).catch(() => {});
  }

  async resetKey(key: string): Promise<void> {
    this.memory.resetKey(key);
    await withDeadline(this.shared.resetKey(key), this.timeoutMs).catch(() => {});
  }

  shutdown(): void {
    this.stopListening();
  }

  private fallBack(reason: string): void {
    // Redis may come back restarted, without the scripts.
    this.scriptsStale = true;
    if (this.failing) return;
    this.failing = true;
    this.logger.warn({ prefix: this.prefix, reason }, 'rate limits: Redis unavailable, counting in process memory until it returns');
  }

  private recover(): void {
    if (!this.failing || this.breaker.open || this.catchingUp) return;
    this.catchingUp = this.catchUp().finally(() => {
      this.catchingUp = undefined;
    });
  }

  /**
   * Adds the hits counted in memory during the outage to Redis's counters (windows that ended are
   * skipped), then counts in Redis again. Without it a key could use its whole window again after a
   * stall. A command that timed out at the stall's start still runs once Redis resumes, so that hit is
   * counted twice: an overcount, on the safe side. A push that fails is retried whole, for the same reason.
   */
  private async catchUp(): Promise<void> {
    while (this.memory.hasOutageHits) {
      if (!isReady(this.redis) || this.breaker.open) {
        this.breaker.trip();
        return;
      }
      const batch = this.memory.takeOutageHits();
      const now = Date.now();
      const open = batch.filter((entry) => entry.resetTime > now);
      try {
        const totals = await withDeadline(
          Promise.all(open.map((entry) => (this.redis as unknown as CatchUpCommand).gatewayRateCatchUp(`${this.prefix}${entry.key}`, String(entry.hits), String(entry.total), String(entry.resetTime - now)))),
          this.timeoutMs,
        );
        open.forEach((entry, index) => this.memory.remember(entry.key, { totalHits: Number(totals[index]), resetTime: new Date(entry.resetTime) }));
      } catch {
        this.memory.restoreOutageHits(batch);
        this.breaker.trip();
        return;
      }
    }
    this.failing = false;
    this.memory.clear();
    this.logger.info({ prefix: this.prefix }, 'rate limits: Redis back, hits counted meanwhile written, counting in Redis again');
  }

  private reloadScripts(): void {
    this.scriptsStale = false;
    // Handled here so that a script nobody awaits cannot become an unhandled rejection.
    this.shared.incrementScriptSha = this.shared.loadIncrementScript();
    this.shared.incrementScriptSha.catch(() => {});
    this.shared.getScriptSha = this.shared.loadGetScript();
    this.shared.getScriptSha.catch(() => {});
  }
}
