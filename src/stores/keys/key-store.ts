import type { ApiKeyRecord, NewKeyInput } from '../../core/api-keys.ts';

/** Where managed keys live: Redis when configured, a local file otherwise. Only hashes are stored. */
export interface KeyStore {
  /** Creates a key; the key itself is returned once and never stored. */
  create(input: NewKeyInput): Promise<{ key: string; record: ApiKeyRecord }>;
  list(): Promise<ApiKeyRecord[]>;
  /** Marks a key revoked; false when no key has that id. */
  revoke(id: string): Promise<boolean>;
  /**
   * Changes a key's name, limits and settings: a field set to `null` removes it, an absent one keeps it (an
   * object such as `quota` replaces the whole limit). Undefined when no key has that id; throws the 409
   * conflict error when the key is revoked (a revoked key stays as it was revoked). Atomic: a revoke or
   * another change made meanwhile is never lost.
   */
  update(id: string, changes: KeyChanges): Promise<ApiKeyRecord | undefined>;
  findByHash(hash: string): Promise<ApiKeyRecord | undefined>;
  /**
   * Grows whenever this process sees the keys change (a create or revoke here, a changed file read),
   * so that a cache in front of the store reads again at once; a store without it is cached by time only.
   */
  readonly revision?: number;
  close(): Promise<void>;
}

/** A change of a key: its `name` set, or each limit and setting set, removed (`null`) or left as it is (absent). */
export type KeyChanges = { readonly name?: string } & {
  readonly [K in keyof Omit<NewKeyInput, 'name'>]?: NewKeyInput[K] | null;
};
