import type { Current } from '../../core/current.ts';
import type { CacheEvents, CachedAnswer, CacheTenant, ResponseCache } from '../../core/response-cache.ts';

/**
 * One entry, flat: a few objects per entry and no buffer of its own. The body is kept as a one-byte
 * (latin1) string holding its bytes: tens of thousands of entries as Buffers would each carry an
 * ArrayBuffer that every garbage collection sweeps, and each a view into shared memory the bound
 * cannot see; strings are plain heap objects the collector marks without looking inside.
 */
interface Entry {
  readonly tenant: CacheTenant;
  readonly body: string;
  readonly storedAt: number;
  readonly status: number;
  readonly contentType: string;
  readonly stream: boolean;
  readonly model: string;
  readonly usage: CachedAnswer['usage'];
  /** What it is counted as against the bound: its body, its id and a fixed allowance for the rest. */
  readonly size: number;
  readonly expiresAt: number;
  /** When it was last put at the end of the order (a count of puts). */
  touched: number;
}

// Eviction goes below the bound by this share of it, so that its cost is paid once per many stores.
const EVICT_HEADROOM = 0.05;

// Bytes counted per entry beside its body and id (the head's fields and the Map's own overhead).
const ENTRY_OVERHEAD = 256;

// Content types and model ids repeat across entries: one string each, not one per entry.
const strings = new Map<string, string>();
function shared(text: string): string {
  const known = strings.get(text);
  if (known !== undefined) return known;
  if (strings.size < 1024) strings.set(text, text);
  return text;
}

/** The bound when none is configured (the cache off, then turned on by a reload). */
const DEFAULT_MAX_BYTES = 64 * 1024 * 1024;

/**
 * The embedded store's response cache: entries in process memory, least recently used dropped first
 * once their bytes pass `maxBytes`, each gone when its TTL ends. One process's entries only (a cluster's
 * workers do not share them; Redis does).
 */
export class MemoryResponseCache implements ResponseCache {
  // A Map keeps insertion order, oldest first. A read moves its entry to the end only once it has
  // fallen into the older half of the order: deleting and re-adding one hot key on every read leaves a
  // dead slot in its hash chain each time (V8 keeps them until the table is rebuilt), and reads of it
  // slowed to 80 µs in a full cache. The order is then nearly, not exactly, least recently used.
  private readonly entries = new Map<string, Entry>();
  private bytes = 0;
  private puts = 0;

  constructor(
    private readonly maxBytes: Current<number | undefined>,
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
    if (this.puts - entry.touched > this.entries.size / 2) {
      this.entries.delete(id);
      entry.touched = this.puts += 1;
      this.entries.set(id, entry);
    }
    const { storedAt, status, contentType, stream, model, usage } = entry;
    return { storedAt, status, contentType, stream, model, usage, body: Buffer.from(entry.body, 'latin1') };
  }

  set(tenant: CacheTenant, key: string, answer: CachedAnswer, ttlMs: number): void {
    const id = `${tenant}\n${key}`;
    const size = answer.body.length + id.length + ENTRY_OVERHEAD;
    const limit = this.maxBytes.current ?? DEFAULT_MAX_BYTES;
    const previous = this.entries.get(id);
    if (previous) this.drop(id, previous);
    if (size > limit) return;
    const { storedAt, status, contentType, stream, model, usage } = answer;
    this.entries.set(id, {
      tenant,
      body: answer.body.toString('latin1'),
      storedAt,
      status,
      contentType: shared(contentType),
      stream,
      model: shared(model),
      usage,
      size,
      expiresAt: this.now() + ttlMs,
      touched: (this.puts += 1),
    });
    this.bytes += size;
    this.events.stored?.(answer.body.length);
    this.evict(limit);
  }

  delete(tenant: CacheTenant, key: string): void {
    const id = `${tenant}\n${key}`;
    const entry = this.entries.get(id);
    if (entry) this.drop(id, entry);
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

  /**
   * Drops the least recently used entries until the bytes fit with some room (an expired one goes when it is read, or
   * here).
   */
  private evict(limit: number): void {
    if (this.bytes <= limit) return;
    // Iteration starts at the table's first slot and walks over every dead one there: once per batch.
    const target = limit * (1 - EVICT_HEADROOM);
    let evicted = 0;
    for (const [id, entry] of this.entries) {
      if (this.bytes <= target) break;
      this.drop(id, entry);
      evicted += entry.body.length;
    }
    if (evicted > 0) this.events.evicted?.(evicted);
  }
}
