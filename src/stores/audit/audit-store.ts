import { createHash } from 'node:crypto';
import type { Actor } from '../../core/access.ts';
import type { EventTarget } from '../../core/diagnostics.ts';

/** One thing done on the control plane, as the audit log keeps it: ids, names and views, never a secret. */
export interface AuditEntry {
  /** ISO 8601 date-time. */
  readonly time: string;
  /** Who; null when no one could be told (a refused credential). */
  readonly actor: Actor | null;
  /** `admin` (the admin API), `account` (the page), `cli`, `config` (a reload). */
  readonly via: string;
  /** The client address; null for the CLI and reloads. */
  readonly address: string | null;
  readonly action: string;
  /** `ok`, or `refused` (401, 403). */
  readonly outcome: 'ok' | 'refused';
  readonly target: EventTarget;
  readonly before: unknown;
  readonly after: unknown;
  /** Why it was refused. */
  readonly reason: string | null;
}

/** An entry as stored: its place in the log and the hash chain that shows tampering. */
export interface AuditRecord extends AuditEntry {
  /** 1 for the first record, then one more each. */
  readonly seq: number;
  /** The hash of the record before (64 zeros for the first). */
  readonly prev: string;
  /** SHA-256 (hex) of `prev` and this record without its hash. */
  readonly hash: string;
}

/** The last record's place and hash, kept beside the log so that records cut from its end show too. */
export interface AuditHead {
  readonly seq: number;
  readonly hash: string;
}

export const GENESIS_HASH = '0'.repeat(64);

/** The record that follows `head`, its fields in a fixed order, the hash last. */
export function chainedRecord(entry: AuditEntry, head: AuditHead | undefined): AuditRecord {
  const body = {
    seq: (head?.seq ?? 0) + 1,
    time: entry.time,
    actor: entry.actor,
    via: entry.via,
    address: entry.address,
    action: entry.action,
    outcome: entry.outcome,
    target: entry.target,
    before: entry.before ?? null,
    after: entry.after ?? null,
    reason: entry.reason ?? null,
    prev: head?.hash ?? GENESIS_HASH,
  };
  return { ...body, hash: recordHash(body) };
}

/** The hash of a record as stored: over its JSON without `hash`, as written (parsing keeps the order of fields). */
export function recordHash(record: Omit<AuditRecord, 'hash'> | AuditRecord): string {
  const { hash: _hash, ...body } = record as AuditRecord;
  return createHash('sha256').update(JSON.stringify(body)).digest('hex');
}

export interface ChainCheck {
  readonly ok: boolean;
  /** Records read. */
  readonly records: number;
  /** The first problem: the record it was found at and what is wrong. */
  readonly problem?: { readonly seq: number; readonly reason: string };
}

/**
 * Walks the records in order: consecutive numbers, each `prev` the hash before, each hash its content's, the head the
 * last.
 */
export function verifyChain(records: readonly AuditRecord[], head: AuditHead | undefined): ChainCheck {
  let previous: AuditHead = { seq: 0, hash: GENESIS_HASH };
  for (const record of records) {
    const fail = (reason: string): ChainCheck => ({
      ok: false,
      records: records.length,
      problem: { seq: previous.seq + 1, reason },
    });
    if (record.seq !== previous.seq + 1)
      return fail(`record ${previous.seq + 1} is missing (found ${record.seq} next)`);
    if (record.prev !== previous.hash)
      return fail(`record ${record.seq} does not follow record ${previous.seq} (its prev is not that record's hash)`);
    if (recordHash(record) !== record.hash)
      return fail(`record ${record.seq} was changed (its content does not give its hash)`);
    previous = { seq: record.seq, hash: record.hash };
  }
  if (head && (head.seq !== previous.seq || head.hash !== previous.hash)) {
    return {
      ok: false,
      records: records.length,
      problem: {
        seq: previous.seq + 1,
        reason: `the log ends at record ${previous.seq} but its head says ${head.seq}: records were cut or the head changed`,
      },
    };
  }
  return { ok: true, records: records.length };
}

/** Where audit records are kept: append-only, chained by hash. Redis when configured, else the data directory. */
export interface AuditStore {
  /** Appends an entry after the newest record (whoever wrote it: every instance and the CLI share the log). */
  append(entry: AuditEntry): Promise<AuditRecord>;
  /** Up to `limit` records that `keep` accepts, newest first, each older than `before` (a seq) when given. */
  page(keep: (record: AuditRecord) => boolean, limit: number, before?: number): Promise<AuditRecord[]>;
  /** Every record, oldest first (to verify the chain). */
  all(): Promise<AuditRecord[]>;
  head(): Promise<AuditHead | undefined>;
  close(): Promise<void>;
}
