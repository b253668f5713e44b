import type { CounterChange, CounterDemand, Enrolment, LimitLedger, ReserveResult } from '../../usage/limit-ledger.ts';

interface Counter {
  value: number;
  resetAt: number;
}

// Counters kept at most; past it, the ones whose window ends first are dropped.
const MAX_COUNTERS = 200_000;

/**
 * Limit counters in process memory: the embedded default's ledger (one machine), and the counts an
 * instance goes on with while Redis is away. Every call is synchronous, so a reservation is atomic.
 */
export class MemoryLedger implements LimitLedger {
  protected readonly counters = new Map<string, Counter>();

  constructor(protected readonly now: () => number = Date.now) {}

  reserve(demands: readonly CounterDemand[]): ReserveResult {
    const now = this.now();
    const used = demands.map((demand) => this.valueOf(demand.counter, now));
    for (let index = 0; index < demands.length; index += 1) {
      const demand = demands[index]!;
      if (demand.limit - used[index]! < demand.need) return { refused: index, used, reserved: demands.map(() => 0) };
    }
    const reserved = demands.map((demand, index) => Math.max(0, Math.min(demand.want, demand.limit - used[index]!)));
    demands.forEach((demand, index) => {
      used[index] = this.add(demand.counter, reserved[index]!, demand.resetAt, now);
    });
    return { used, reserved };
  }

  adjust(changes: readonly CounterChange[]): void {
    const now = this.now();
    for (const change of changes) {
      if (change.resetAt <= now || !this.has(change.counter, now)) continue;
      this.add(change.counter, change.delta, change.resetAt, now);
    }
  }

  // A roster is kept as counters (its size, and one marker per member, named to end as the roster's window
  // tag does), so the embedded ledger keeps it across a restart as it keeps the day's counters.
  enroll(roster: string, member: string, cap: number, resetAt: number): Enrolment {
    const now = this.now();
    const marker = `${member}@${roster}`;
    if (this.valueOf(marker, now) > 0) return 'member';
    if (this.valueOf(roster, now) < cap) {
      this.add(roster, 1, resetAt, now);
      this.add(marker, 1, resetAt, now);
      return 'member';
    }
    const over = `!over@${roster}`;
    if (this.valueOf(over, now) > 0) return 'over';
    this.add(over, 1, resetAt, now);
    return 'first-over';
  }

  async peek(counters: readonly string[]): Promise<number[]> {
    const now = this.now();
    return counters.map((counter) => this.valueOf(counter, now));
  }

  /** The value of one counter now (0 when unknown or its window ended). */
  valueOf(counter: string, now = this.now()): number {
    const entry = this.counters.get(counter);
    if (!entry) return 0;
    if (entry.resetAt <= now) {
      this.counters.delete(counter);
      return 0;
    }
    return entry.value;
  }

  /** True when the counter exists and its window is still open. */
  has(counter: string, now = this.now()): boolean {
    const entry = this.counters.get(counter);
    return entry !== undefined && entry.resetAt > now;
  }

  /** Forgets every counter. */
  clear(): void {
    this.counters.clear();
  }

  /** Adds to a counter (creating it for its window) and gives back its new value. */
  add(counter: string, amount: number, resetAt: number, now = this.now()): number {
    let entry = this.counters.get(counter);
    if (!entry || entry.resetAt <= now) {
      if (this.counters.size >= MAX_COUNTERS) this.dropOldest(now);
      entry = { value: 0, resetAt };
      this.counters.set(counter, entry);
    }
    entry.value += amount;
    return entry.value;
  }

  degraded(): boolean {
    return false;
  }

  async flush(): Promise<void> {}

  async close(): Promise<void> {}

  private dropOldest(now: number): void {
    for (const [name, entry] of this.counters) if (entry.resetAt <= now) this.counters.delete(name);
    if (this.counters.size < MAX_COUNTERS) return;
    // Every window still open: drop the minute counters first, they matter for the shortest time.
    const byReset = [...this.counters].sort((a, b) => a[1].resetAt - b[1].resetAt);
    for (const [name] of byReset.slice(0, Math.ceil(MAX_COUNTERS / 10))) this.counters.delete(name);
  }
}
