import type { GroupInput, GroupRecord } from '../../core/limits.ts';

/** Where budget groups live: Redis when configured, a local file otherwise. */
export interface GroupStore {
  /** Creates a group; throws the 409 conflict error when the name is taken. */
  create(input: GroupInput): Promise<GroupRecord>;
  /** Every group, oldest first. */
  list(): Promise<GroupRecord[]>;
  get(name: string): Promise<GroupRecord | undefined>;
  /**
   * Changes a group's limits and alert thresholds: a field set to `null` removes it, an absent one keeps it.
   * Undefined when no group has that name.
   */
  update(name: string, changes: GroupChanges): Promise<GroupRecord | undefined>;
  /** False when no group has that name. */
  remove(name: string): Promise<boolean>;
  /** Grows whenever this process sees the groups change, so a cache in front reads again at once. */
  readonly revision?: number;
  close(): Promise<void>;
}

/** A PATCH of a group: each limit (and `alerts`) set, removed (`null`) or left as it is (absent). */
export type GroupChanges = { readonly [K in keyof Omit<GroupInput, 'name'>]?: GroupInput[K] | null };
