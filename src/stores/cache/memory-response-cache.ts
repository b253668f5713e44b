import type { CacheEvents, CachedAnswer, CacheTenant, ResponseCache } from '../../core/response-cache.ts';

interface Entry {
  readonly tenant: CacheTenant;
  readonly answer: CachedAnswer;
  /** What it is counted as against the bound: its body, its id and a fixed allowance for the rest. */
  readonly size: number;
  readonly expiresAt: number;
}

// Bytes counted per entry beside its body and id (the head's fields and the Map's own overhead).
const ENTRY_OVERHEAD = 256;

/**
 * The embedded store's response cache: entries in process memory, least recently used dropped first
 * once their bytes pass `maxBytes`, each gone when its TTL ends. One process's entries only (a cluster's
 * workers do not share them; Redis does).
 */
export class MemoryResponseCache implements ResponseCache {
  // A Map keeps insertion order: a read moves its entry to the end, so the first entry is the least recently used.
  private readonly entries = new Map<string, Entry>();
  private bytes = 0;

  constructor(
    private readonly maxBytes: () => number,
    private readonly events: CacheEvents = {},
    private readonly now: () => number = Date.now,
  ) {}

  /** Bytes counted against the bound: bodies, keys and a fixed allowance per entry. */
  get size(): number {
    return this.bytes;
  }

  get(tenant: CacheTenant, key: string): CachedAnswer | undefined {
    const id = `${tenant}\n${key}`;
    const entry = this.entries.get(id);
    if (!entry) return undefined;
    if (entry.expiresAt <= this.now()) {
      this.drop(id, entry);
      return undefined;
    }
    this.entries.delete(id);
    this.entries.set(id, entry);
    return entry.answer;
  }

  set(tenant: CacheTenant, key: string, answer: CachedAnswer, ttlMs: number): void {
    const id = `${tenant}\n${key}`;
    const size = answer.body.length + id.length + ENTRY_OVERHEAD;
    const limit = this.maxBytes();
    const previous = this.entries.get(id);
    if (previous) this.drop(id, previous);
    if (size > limit) return;
    // A body in memory of its own, exactly its size: a view into a larger buffer (a socket read, or
    // Buffer's shared 8 KiB pool) would keep all of that alive, and the bound would not hold.
    const body = Buffer.allocUnsafeSlow(answer.body.length);
    answer.body.copy(body);
    const owned = { ...answer, body };
    this.entries.set(id, { tenant, answer: owned, size, expiresAt: this.now() + ttlMs });
    this.bytes += size;
    this.events.stored?.(answer.body.length);
    this.evict(limit);
  }

  async clear(tenant?: CacheTenant): Promise<number> {
    let dropped = 0;
    for (const [id, entry] of this.entries) {
      if (tenant !== undefined && entry.tenant !== tenant) continue;
      this.drop(id, entry);
      dropped += 1;
    }
    return dropped;
  }

  async close(): Promise<void> {
    this.entries.clear();
    this.bytes = 0;
  }

  private drop(id: string, entry: Entry): void {
    this.entries.delete(id);
    this.bytes -= entry.size;
  }

  /** Drops the least recently used entries until the bytes fit (an expired one goes when it is read, or here). */
  private evict(limit: number): void {
    if (this.bytes <= limit) return;
    let evicted = 0;
    for (const [id, entry] of this.entries) {
      if (this.bytes <= limit) break;
      this.drop(id, entry);
      evicted += entry.answer.body.length;
    }
    if (evicted > 0) this.events.evicted?.(evicted);
  }
}
