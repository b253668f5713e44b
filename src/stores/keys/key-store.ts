import type { ApiKeyRecord, NewKeyInput } from '../../core/api-keys.ts';

/** Where managed keys live: Redis when configured, a local file otherwise. Only hashes are stored. */
export interface KeyStore {
  /** Creates a key; the key itself is returned once and never stored. */
  create(input: NewKeyInput): Promise<{ key: string; record: ApiKeyRecord }>;
  list(): Promise<ApiKeyRecord[]>;
  /** Marks a key revoked; false when no key has that id. */
  revoke(id: string): Promise<boolean>;
  findByHash(hash: string): Promise<ApiKeyRecord | undefined>;
  /**
   * Grows whenever this process sees the keys change (a create or revoke here, a changed file read),
   * so that a cache in front of the store reads again at once; a store without it is cached by time only.
   */
  readonly revision?: number;
  close(): Promise<void>;
}
