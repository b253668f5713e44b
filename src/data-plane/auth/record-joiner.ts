import type { Logger } from 'pino';
import { serviceUnavailable } from '../../core/gateway-errors.ts';
import { TrustedCache } from '../pipeline/authenticate.ts';

/** A store of named records, as a joiner reads it. */
export interface NamedRecordSource<R> {
  get(name: string): Promise<R | undefined>;
  readonly revision?: number;
}

/** What a joiner joins callers (`C`) with: records (`R`) named by what it is given about the caller (`A`). */
export interface JoinedRecordKind<C, R, A> {
  /** Lower case ('team'): the log field of the name, and what the store and its limits are called in messages. */
  readonly noun: string;
  readonly nameOf: (about: A) => string;
  /** Whether the record found under the name is the caller's (any is when absent). */
  readonly belongs?: (about: A, found: R) => boolean;
  /** The warning, logged once per name, that callers name a record that does not exist. */
  readonly missing: (name: string) => string;
  readonly join: (caller: C, record: R) => C;
}

export type RecordJoiner<C, A> = (caller: C, about: A) => C | Promise<C>;

/**
 * Joins a caller with the record it names, read through a {@link TrustedCache}; the joined caller is reused
 * while neither the caller nor the record changes. A record that does not exist (deleted, or no store), or that
 * is not the caller's, leaves the caller as it is, with one warning per name; a store that cannot be read for a
 * name never seen answers 503.
 */
export function recordJoiner<C extends { readonly id: string }, R, A>(
  store: NamedRecordSource<R> | undefined,
  kind: JoinedRecordKind<C, R, A>,
  trustMs: number,
  logger: Logger,
): RecordJoiner<C, A> {
  const { noun } = kind;
  const cache = store && trustedRecords(store, noun, trustMs, logger);
  const joined = new WeakMap<C, { readonly record: R; readonly caller: C }>();
  const warned = new Set<string>();
  const join = (caller: C, about: A, found: R | undefined): C => {
    const name = kind.nameOf(about);
    const record = found !== undefined && (kind.belongs?.(about, found) ?? true) ? found : undefined;
    if (record === undefined) {
      if (!warned.has(name)) {
        warned.add(name);
        logger.warn({ key_id: caller.id, [noun]: name }, kind.missing(name));
      }
      return caller;
    }
    warned.delete(name);
    const last = joined.get(caller);
    if (last?.record === record) return last.caller;
    const withRecord = kind.join(caller, record);
    joined.set(caller, { record, caller: withRecord });
    return withRecord;
  };
  const unavailable = (error: unknown): never => {
    logger.error({ reason: (error as Error).message }, `${noun} store unavailable`);
    throw serviceUnavailable(`The ${noun} store is unavailable; please retry shortly`, error);
  };
  return (caller, about) => {
    if (!cache) return join(caller, about, undefined);
    let found: R | undefined | Promise<R | undefined>;
    try {
      found = cache.get(kind.nameOf(about));
    } catch (error) {
      return unavailable(error);
    }
    if (!(found instanceof Promise)) return join(caller, about, found);
    return found.then(
      (record) => join(caller, about, record),
      (error: unknown) => unavailable(error),
    );
  };
}

/** The store read through a {@link TrustedCache}: misses remembered, the last record read used while it fails. */
function trustedRecords<R>(
  store: NamedRecordSource<R>,
  noun: string,
  trustMs: number,
  logger: Logger,
): TrustedCache<R> {
  return new TrustedCache((name) => store.get(name), {
    trustMs,
    maxEntries: 10_000,
    revision: () => store.revision,
    rememberMisses: true,
    onStale: (name, error) =>
      logger.warn(
        { [noun]: name, reason: (error as Error).message },
        `${noun} store unavailable: using the ${noun} limits last read`,
      ),
  });
}
