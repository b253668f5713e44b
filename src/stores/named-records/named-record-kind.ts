/** What every named record holds: a permanent id, a name unique in its store, and when it was made. */
export interface NamedRecord {
  readonly id: string;
  readonly name: string;
  /** ISO date-time. */
  readonly createdAt: string;
}

/**
 * What a named-record store needs to know of its records (`R`, made from `I`, changed by `C`, stored as `S`):
 * the noun its messages use, and how a record is made, changed and read back.
 */
export interface NamedRecordKind<R extends NamedRecord, I, C, S = R> {
  /** Lower case, as in "A team named 'x' exists already". */
  readonly noun: string;
  readonly newRecord: (input: I) => R;
  readonly applyChanges: (record: R, changes: C) => R;
  /** The record from what the store holds. */
  readonly fromStored: (stored: S) => R;
}

/** What the stores keep of a removed record: the id of the last record of each name, for emptying what it left. */
export interface DeletedRecord {
  readonly name: string;
  readonly id: string;
  /** ISO date-time. */
  readonly deletedAt: string;
}

/**
 * The record with the changes made to the `fields` a change may touch: a `null` removes the field, an absent
 * one keeps it; the id, name and creation time never change.
 */
export function applyFieldChanges<R extends NamedRecord>(
  record: R,
  changes: { readonly [field: string]: unknown },
  fields: readonly string[],
): R {
  const next: Record<string, unknown> = { ...(record as object) };
  for (const field of fields) {
    const value = changes[field];
    if (value === null) delete next[field];
    else if (value !== undefined) next[field] = value;
  }
  return { ...(next as R), id: record.id, name: record.name, createdAt: record.createdAt };
}

/** The noun with a capital, to open a message. */
export function capitalised(noun: string): string {
  return noun.charAt(0).toUpperCase() + noun.slice(1);
}
