import { decodeCachedAnswer, encodeCachedAnswer, type CacheEvents, type CachedAnswer, type CacheTenant, type ResponseCache } from '../../core/response-cache.ts';

interface Entry {
  readonly tenant: CacheTenant;
  readonly stored: Buffer;
  readonly expiresAt: number;
}

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

  /** Bytes held, entries' keys included. */
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
    return decodeCachedAnswer(entry.stored);
  }

  set(tenant: CacheTenant, key: string, answer: CachedAnswer, ttlMs: number): void {
    const id = `${tenant}\n${key}`;
    const stored = encodeCachedAnswer(answer);
    const size = stored.length + id.length;
    const limit = this.maxBytes();
    const previous = this.entries.get(id);
    if (previous) this.drop(id, previous);
    if (size > limit) return;
    this.entries.set(id, { tenant, stored, expiresAt: this.now() + ttlMs });
    this.bytes += size;
    this.events.stored?.(stored.length);
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
    this.bytes -= entry.stored.length + id.length;
  }

  /** Drops the least recently used entries until the bytes fit (an expired one goes when it is read, or here). */
  private evict(limit: number): void {
    if (this.bytes <= limit) return;
    let evicted = 0;
    for (const [id, entry] of this.entries) {
      if (this.bytes <= limit) break;
      this.drop(id, entry);
      evicted += entry.stored.length;
    }
    if (evicted > 0) this.events.evicted?.(evicted);
  }
}
