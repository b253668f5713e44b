import type { Logger } from 'pino';
import type { CounterChange, CounterDemand, Enrolment, LimitLedger, ReserveResult } from '../../usage/limit-ledger.ts';
import { RedisBreaker } from '../redis/redis-breaker.ts';
import { isReady, type RedisConnection } from '../redis/redis-client.ts';
import { SharedDeadline } from '../redis/shared-deadline.ts';
import { MemoryLedger } from './embedded-ledger.ts';
import { RedisLedger, type CatchUpEntry } from './redis-ledger.ts';

export interface FallbackLedgerOptions {
  readonly logger: Logger;
  /** Longest wait for Redis before one decision is made in memory instead (250 ms by default). */
  readonly timeoutMs?: number;
}

interface Known {
  value: number;
  resetAt: number;
}

// Last-known counter values kept at most; past it the oldest are dropped.
const MAX_KNOWN = 100_000;

/**
 * Limit counters in Redis ({@link RedisLedger}) that go on in this process's memory while Redis is
 * away, as {@link FallbackStore} does for request rates. When Redis is not ready, its
 * {@link RedisBreaker} is open, or a command does not answer within the timeout, decisions are made in
 * a {@link MemoryLedger} seeded from the last value Redis gave for each counter; the switch is logged
 * once each way and shown by {@link degraded}.
 *
 * Everything counted in memory meanwhile is also kept as a pending change per counter. Once the
 * breaker closes, those changes are added to Redis in one script (a counter Redis lost is recreated at
 * the value memory had; a window that ended is skipped) before any decision is made in Redis again:
 * until Redis acknowledges that catch-up, this instance stays on memory, and what it counts meanwhile
 * is pushed next. So one instance never serves more than a limit across a stall.
 *
 * A command that timed out during a stall (SIGSTOP) is not cancelled: Redis runs it once it resumes,
 * while its effect was also counted in memory and caught up. That overcounts, which errs on the safe
 * side; for the same reason releases (negative changes) whose fate is unknown are dropped rather than
 * applied twice.
 */
export class FallbackLedger implements LimitLedger {
  private readonly shared: RedisLedger;
  private readonly memory = new MemoryLedger();
  private readonly breaker: RedisBreaker;
  private readonly logger: Logger;
  private readonly deadline: SharedDeadline;
  private readonly lastKnown = new Map<string, Known>();
  private pending = new Map<string, Known>();
  private failing = false;
  private catchingUp: Promise<void> | undefined;
  private readonly stopListening: () => void;

  constructor(
    private readonly redis: RedisConnection,
    options: FallbackLedgerOptions,
  ) {
    this.logger = options.logger;
    this.deadline = new SharedDeadline(options.timeoutMs ?? 250);
    this.shared = new RedisLedger(redis, {
      logger: options.logger,
      deadline: this.deadline,
      onAdjustFailed: (changes, error, sent) => this.adjustFailed(changes, error, sent),
      // A batch taken before an outage began is applied in memory instead, as a change made during it.
      canSend: () => isReady(redis) && !this.breaker.open && !this.failing,
      onValues: (values, resets) =>
        values.forEach((value, counter) => this.remember(counter, value, resets.get(counter)!)),
    });
    this.breaker = RedisBreaker.of(redis);
    this.stopListening = this.breaker.onClose(() => this.recover());
  }

  /** True while decisions are made in process memory (Redis away, or its catch-up not yet acknowledged). */
  degraded(): boolean {
    return this.failing || this.breaker.open;
  }

  reserve(demands: readonly CounterDemand[]): ReserveResult | Promise<ReserveResult> {
    const reason = this.memoryReason();
    if (reason) {
      this.fallBack(reason);
      return this.reserveInMemory(demands);
    }
    return this.reserveInRedis(demands);
  }

  adjust(changes: readonly CounterChange[]): void {
    try {
      const reason = this.memoryReason();
      if (!reason) return this.shared.adjust(changes);
      this.fallBack(reason);
      this.adjustInMemory(changes, true);
    } catch (error) {
      this.logger.error({ err: error }, 'limit ledger: settlement failed');
    }
  }

  /**
   * In Redis, exactly across instances; while Redis is away, in this process's memory (from empty: each
   * instance then admits up to the cap of members of its own, and nothing of it is caught up later).
   */
  enroll(roster: string, member: string, cap: number, resetAt: number): Enrolment | Promise<Enrolment> {
    const reason = this.memoryReason();
    if (reason) {
      this.fallBack(reason);
      return this.memory.enroll(roster, member, cap, resetAt);
    }
    return this.deadline.race(this.shared.enroll(roster, member, cap, resetAt)).catch((error: Error) => {
      this.breaker.trip();
      this.fallBack(error.message);
      return this.memory.enroll(roster, member, cap, resetAt);
    });
  }

  async peek(counters: readonly string[]): Promise<number[]> {
    if (!this.memoryReason()) {
      try {
        return await this.deadline.race(this.shared.peek(counters));
      } catch {
        this.breaker.trip();
      }
    }
    const now = Date.now();
    return counters.map((counter) => {
      this.seed(counter, now);
      return this.memory.valueOf(counter, now);
    });
  }

  async flush(): Promise<void> {
    await this.shared.flush();
    if (this.catchingUp) await this.catchingUp;
  }

  async close(): Promise<void> {
    this.stopListening();
    await this.flush();
  }

  /** Why this decision is made in memory, or undefined when Redis is to be asked. */
  private memoryReason(): string | undefined {
    if (!isReady(this.redis)) {
      this.breaker.trip();
      return `connection ${this.redis.status}`;
    }
    // The breaker is open: no request waits for a Redis that just failed; its probe closes it.
    if (this.breaker.open) return 'a Redis command failed or timed out moments ago';
    if (this.failing) {
      // With nothing left to push, recover() is done at once and this decision is made in Redis.
      this.recover();
      if (this.failing) return 'catching up after an outage';
    }
    return undefined;
  }

  private async reserveInRedis(demands: readonly CounterDemand[]): Promise<ReserveResult> {
    try {
      const result = await this.deadline.race(this.shared.reserve(demands));
      for (let i = 0; i < demands.length; i++) this.remember(demands[i]!.counter, result.used[i]!, demands[i]!.resetAt);
      return result;
    } catch (error) {
      this.breaker.trip();
      this.fallBack((error as Error).message);
      return this.reserveInMemory(demands);
    }
  }

  private reserveInMemory(demands: readonly CounterDemand[]): ReserveResult {
    const now = Date.now();
    for (const demand of demands) this.seed(demand.counter, now);
    const result = this.memory.reserve(demands);
    if (result.refused === undefined)
      demands.forEach((demand, index) => this.addPending(demand.counter, result.reserved[index]!, demand.resetAt));
    return result;
  }

  /** Applies changes in memory (seeding each counter first); with `releases` false, negative ones are left out. */
  private adjustInMemory(changes: readonly CounterChange[], releases: boolean): void {
    const now = Date.now();
    for (const change of changes) {
      if (change.resetAt <= now || (!releases && change.delta < 0)) continue;
      this.seed(change.counter, now);
      if (!this.memory.has(change.counter, now)) continue;
      this.memory.add(change.counter, change.delta, change.resetAt, now);
      this.addPending(change.counter, change.delta, change.resetAt);
    }
  }

  private adjustFailed(changes: readonly CounterChange[], error: Error, sent: boolean): void {
    this.breaker.trip();
    this.fallBack(error.message);
    // A batch that reached Redis may still be applied once Redis resumes; counting its increases here
    // too at worst overcounts, while a release counted twice would let more through than the limit.
    this.adjustInMemory(changes, !sent);
  }

  /** Starts a memory counter from the value Redis last gave for it, if any, in an outage's first use. */
  private seed(counter: string, now: number): void {
    if (this.memory.has(counter, now)) return;
    const known = this.lastKnown.get(counter);
    if (known && known.resetAt > now) this.memory.add(counter, known.value, known.resetAt, now);
  }

  private remember(counter: string, value: number, resetAt: number): void {
    const known = this.lastKnown.get(counter);
    if (known) {
      // Updated in place: the bound below drops the longest-known counters first, which is close
      // enough to the least recently used for seeding an outage's first decisions.
      known.value = value;
      known.resetAt = resetAt;
      return;
    }
    if (this.lastKnown.size >= MAX_KNOWN) {
      const now = Date.now();
      for (const [name, entry] of this.lastKnown) if (entry.resetAt <= now) this.lastKnown.delete(name);
      if (this.lastKnown.size >= MAX_KNOWN) this.lastKnown.delete(this.lastKnown.keys().next().value!);
    }
    this.lastKnown.set(counter, { value, resetAt });
  }

  private addPending(counter: string, delta: number, resetAt: number): void {
    const entry = this.pending.get(counter);
    if (entry) entry.value += delta;
    else this.pending.set(counter, { value: delta, resetAt });
  }

  private fallBack(reason: string): void {
    if (this.failing) return;
    this.failing = true;
    this.logger.warn({ reason }, 'limit ledger: Redis unavailable, counting in process memory until it returns');
  }

  private recover(): void {
    if (!this.failing || this.breaker.open || this.catchingUp) return;
    this.catchingUp = this.catchUp().finally(() => {
      this.catchingUp = undefined;
    });
  }

  /** Pushes the pending changes to Redis until none is left, then counts in Redis again. */
  private async catchUp(): Promise<void> {
    while (this.pending.size) {
      if (!isReady(this.redis) || this.breaker.open) {
        this.breaker.trip();
        return;
      }
      const batch = this.pending;
      this.pending = new Map();
      const now = Date.now();
      const entries: CatchUpEntry[] = [...batch]
        .filter(([, entry]) => entry.resetAt > now)
        .map(([counter, entry]) => ({
          counter,
          delta: entry.value,
          value: this.memory.valueOf(counter, now),
          resetAt: entry.resetAt,
        }));
      try {
        const values = await this.deadline.race(this.shared.catchUp(entries));
        for (const entry of entries)
          this.remember(entry.counter, values.get(entry.counter) ?? entry.value, entry.resetAt);
      } catch {
        // The push may still be applied once Redis resumes: it is retried, but without its releases,
        // so that at worst it is counted twice (an overcount), never released twice.
        for (const [counter, entry] of batch) this.addPending(counter, Math.max(0, entry.value), entry.resetAt);
        this.breaker.trip();
        return;
      }
    }
    this.failing = false;
    this.memory.clear();
    this.logger.info('limit ledger: Redis back, changes counted meanwhile written, counting in Redis again');
  }
}
