import type { TeamInput, TeamRecord } from '../../core/limits.ts';

/** Where teams live: Redis when configured, a local file otherwise. */
export interface TeamStore {
  /** Creates a team; throws the 409 conflict error when the name is taken. */
  create(input: TeamInput): Promise<TeamRecord>;
  list(): Promise<TeamRecord[]>;
  get(name: string): Promise<TeamRecord | undefined>;
  /**
   * Changes a team's limits and cache setting: a field set to `null` removes it, an absent one keeps it.
   * Undefined when no team has that name.
   */
  update(name: string, changes: TeamChanges): Promise<TeamRecord | undefined>;
  /** False when no team has that name. The store keeps the removed team's id under its name (see {@link deletedId}). */
  remove(name: string): Promise<boolean>;
  /** The id of the last team of that name that was removed, kept after it (undefined when none was). */
  deletedId(name: string): Promise<string | undefined>;
  /** Grows whenever this process sees the teams change, so a cache in front reads again at once. */
  readonly revision?: number;
  close(): Promise<void>;
}

/** A PATCH of a team: each limit (and `cache`) set, removed (`null`) or left as it is (absent). */
export type TeamChanges = { readonly [K in keyof Omit<TeamInput, 'name'>]?: TeamInput[K] | null };
