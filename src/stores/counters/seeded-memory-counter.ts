import type { ClientRateLimitInfo, IncrementResponse } from 'express-rate-limit';

// Counters and last-known counts kept at most; past it the oldest are dropped.
const MAX_KEYS = 100_000;

interface Window {
  hits: number;
  resetTime: number;
}

/**
 * Fixed-window counters in process memory for the time Redis cannot be asked, seeded from the last
 * count Redis gave for each key in its current window: a key that had used 15 of its 20 requests
 * before a stall has 5 left during the stall, not 20. A key Redis never counted starts from zero.
 */
export class SeededMemoryCounter {
  private windowMs = 60_000;
  private readonly counters = new Map<string, Window>();
  private readonly lastKnown = new Map<string, Window>();

  constructor(private readonly now: () => number = Date.now) {}

  setWindow(windowMs: number): void {
    this.windowMs = windowMs;
  }

  /** Remembers what Redis answered for a key (its count so far and when its window ends). */
  remember(key: string, info: ClientRateLimitInfo): void {
    this.lastKnown.delete(key);
    if (this.lastKnown.size >= MAX_KEYS) this.lastKnown.delete(this.lastKnown.keys().next().value!);
    this.lastKnown.set(key, { hits: info.totalHits, resetTime: info.resetTime?.getTime() ?? this.now() + this.windowMs });
  }

  increment(key: string): IncrementResponse {
    const now = this.now();
    let window = this.counters.get(key);
    if (!window || window.resetTime <= now) {
      const seed = this.lastKnown.get(key);
      window = seed && seed.resetTime > now ? { ...seed } : { hits: 0, resetTime: now + this.windowMs };
      if (this.counters.size >= MAX_KEYS) this.counters.delete(this.counters.keys().next().value!);
      this.counters.set(key, window);
    }
    window.hits += 1;
    return { totalHits: window.hits, resetTime: new Date(window.resetTime) };
  }

  decrement(key: string): void {
    const window = this.counters.get(key);
    if (window && window.hits > 0) window.hits -= 1;
  }

  resetKey(key: string): void {
    this.counters.delete(key);
    this.lastKnown.delete(key);
  }

  /** Forgets the memory counts (Redis counts again); the last-known counts stay as seeds for the next outage. */
  clear(): void {
    this.counters.clear();
  }
}
