interface Entry<V> {
  /** Undefined when the store had nothing under the name (kept only with `rememberMisses`). */
  readonly value: V | undefined;
  readonly readAt: number;
  readonly revision: number | undefined;
}

export interface TrustedCacheOptions {
  /** How long a value read from the store is trusted; it is read again in the background after half of it. */
  readonly trustMs: number;
  /** Most names remembered; when full, the one read longest ago is forgotten. */
  readonly maxEntries: number;
  /** The store's revision (see `KeyStore.revision`): a value read at another revision is read again at once. */
  readonly revision?: () => number | undefined;
  /** Remember that the store has nothing under a name too (so a miss costs no read per request). */
  readonly rememberMisses?: boolean;
  /**
   * When given, a failed read of a name read before answers its last value (trusted for another
   * `trustMs`) and is reported here instead of thrown; a name never read still fails.
   */
  readonly onStale?: (name: string, error: unknown) => void;
  readonly now?: () => number;
}

/**
 * Trust-and-refresh in front of a store read (the presented API keys' records, the teams' limits), so
 * that a name in use costs no store read per request. A value is trusted for `trustMs` after it was
 * read: answered synchronously, and read again in the background once half of that has passed, so a
 * busy name never waits; concurrent reads of one name share one store read. By default only found
 * values are kept (a flood of made-up names cannot push real ones out faster than it would without
 * the cache, and a name created a moment later is never refused from memory).
 */
export class TrustedCache<V> {
  private readonly entries = new Map<string, Entry<V>>();
  private readonly loading = new Map<string, Promise<V | undefined>>();
  private readonly now: () => number;

  constructor(
    private readonly load: (name: string) => Promise<V | undefined>,
    private readonly options: TrustedCacheOptions,
  ) {
    this.now = options.now ?? Date.now;
  }

  /**
   * The value (synchronously while trusted), a promise of it when the store must be read, undefined when the store has
   * none.
   */
  get(name: string): V | undefined | Promise<V | undefined> {
    const entry = this.entries.get(name);
    if (entry && entry.revision === this.options.revision?.()) {
      const age = this.now() - entry.readAt;
      if (age < this.options.trustMs) {
        if (age >= this.options.trustMs / 2 && !this.loading.has(name)) this.refresh(name).catch(() => {});
        return entry.value;
      }
    }
    return this.loading.get(name) ?? this.refresh(name);
  }

  get size(): number {
    return this.entries.size;
  }

  private refresh(name: string): Promise<V | undefined> {
    const readAt = this.now();
    const revision = this.options.revision?.();
    const loaded = this.load(name).then(
      (value) => {
        this.loading.delete(name);
        if (value !== undefined || this.options.rememberMisses) this.remember(name, { value, readAt, revision });
        else this.entries.delete(name);
        return value;
      },
      (error: unknown) => {
        this.loading.delete(name);
        const last = this.entries.get(name);
        if (!last || !this.options.onStale) throw error;
        this.options.onStale(name, error);
        // Trusted for another while, so a store that is away is not asked on every request.
        this.remember(name, { value: last.value, readAt: this.now(), revision: this.options.revision?.() });
        return last.value;
      },
    );
    this.loading.set(name, loaded);
    return loaded;
  }

  private remember(name: string, entry: Entry<V>): void {
    this.entries.delete(name);
    if (this.entries.size >= this.options.maxEntries) this.entries.delete(this.entries.keys().next().value!);
    this.entries.set(name, entry);
  }
}
