import type { ApiKeyRecord } from '../../core/api-keys.ts';
import type { KeyStore } from '../../stores/keys/key-store.ts';

interface Entry {
  readonly record: ApiKeyRecord;
  readonly readAt: number;
  readonly revision: number | undefined;
}

export interface PresentedKeyCacheOptions {
  /** How long a record read from the store is trusted; it is read again in the background after half of it. */
  readonly trustMs: number;
  /** Most keys remembered; when full, the key read longest ago is forgotten. */
  readonly maxEntries: number;
  /** The store's {@link KeyStore.revision}: a record read at another revision is read again at once. */
  readonly revision?: () => number | undefined;
}

/**
 * Presented API key → its stored record, so that a key in use costs neither a hash nor a store read per
 * request. A record is trusted for `trustMs` after it was read: answered synchronously, and read again
 * in the background once half of that has passed, so a busy key never waits. Only found keys are kept
 * (a flood of made-up keys cannot push the real ones out faster than it would without the cache, and
 * a key created a moment later is never refused from memory). The cache holds the keys themselves, in
 * this process's memory only, as the request did.
 */
export class PresentedKeyCache {
  private readonly entries = new Map<string, Entry>();
  private readonly loading = new Map<string, Promise<ApiKeyRecord | undefined>>();

  constructor(
    private readonly load: (key: string) => Promise<ApiKeyRecord | undefined>,
    private readonly options: PresentedKeyCacheOptions,
  ) {}

  /** The record (synchronously while it is trusted), a promise of it when the store must be read, undefined for an unknown key. */
  get(key: string): ApiKeyRecord | undefined | Promise<ApiKeyRecord | undefined> {
    const entry = this.entries.get(key);
    if (entry && entry.revision === this.options.revision?.()) {
      const age = Date.now() - entry.readAt;
      if (age < this.options.trustMs) {
        if (age >= this.options.trustMs / 2 && !this.loading.has(key)) this.refresh(key).catch(() => {});
        return entry.record;
      }
    }
    return this.loading.get(key) ?? this.refresh(key);
  }

  get size(): number {
    return this.entries.size;
  }

  private refresh(key: string): Promise<ApiKeyRecord | undefined> {
    const readAt = Date.now();
    const revision = this.options.revision?.();
    const loaded = this.load(key).then(
      (record) => {
        this.loading.delete(key);
        this.entries.delete(key);
        if (record) {
          if (this.entries.size >= this.options.maxEntries) this.entries.delete(this.entries.keys().next().value!);
          this.entries.set(key, { record, readAt, revision });
        }
        return record;
      },
      (error: unknown) => {
        this.loading.delete(key);
        throw error;
      },
    );
    this.loading.set(key, loaded);
    return loaded;
  }
}
