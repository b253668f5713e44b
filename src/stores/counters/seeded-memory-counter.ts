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
  // Hits counted here (not in Redis) per key, with the end of the window they were counted in.
  private outage = new Map<string, Window>();

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
    const counted = this.outage.get(key);
    if (counted && counted.resetTime === window.resetTime) counted.hits += 1;
    else {
      if (!counted && this.outage.size >= MAX_KEYS) this.outage.delete(this.outage.keys().next().value!);
      this.outage.set(key, { hits: 1, resetTime: window.resetTime });
    }
    return { totalHits: window.hits, resetTime: new Date(window.resetTime) };
  }

  decrement(key: string): void {
    const window = this.counters.get(key);
    if (window && window.hits > 0) window.hits -= 1;
    const counted = this.outage.get(key);
    if (counted && counted.hits > 0) counted.hits -= 1;
  }

  resetKey(key: string): void {
    this.counters.delete(key);
    this.lastKnown.delete(key);
    this.outage.delete(key);
  }

  /** True while hits counted here have not been handed to Redis. */
  get hasOutageHits(): boolean {
    return this.outage.size > 0;
  }

  /**
   * Hands over (and forgets) the hits counted here per key, each with the end of its window and the
   * key's whole count here (seed included).
   */
  takeOutageHits(): { key: string; hits: number; total: number; resetTime: number }[] {
    const taken = [...this.outage]
      .filter(([, window]) => window.hits > 0)
      .map(([key, window]) => {
        const counter = this.counters.get(key);
        return { key, ...window, total: counter?.resetTime === window.resetTime ? counter.hits : window.hits };
      });
    this.outage = new Map();
    return taken;
  }

  /** Takes back hits that could not be handed to Redis (added to those counted since). */
  restoreOutageHits(entries: readonly { key: string; hits: number; resetTime: number }[]): void {
    for (const entry of entries) {
      const counted = this.outage.get(entry.key);
      if (counted && counted.resetTime === entry.resetTime) counted.hits += entry.hits;
      else if (!counted) this.outage.set(entry.key, { hits: entry.hits, resetTime: entry.resetTime });
    }
  }

  /** Forgets the memory counts (Redis counts again); the last-known counts stay as seeds for the next outage. */
  clear(): void {
    this.counters.clear();
  }
}
