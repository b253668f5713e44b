import { clientAddress } from '../../core/incoming-request.ts';
import { EVENTS } from '../../core/diagnostics.ts';
import type { Stage } from './exchange.ts';
import type { RequestHandler } from 'express';
import type { IncomingHttpHeaders } from 'node:http';
import { pino, type Logger } from 'pino';
import {
  forbidden,
  isGatewayError,
  serviceUnavailable,
  unauthenticated,
  rateLimited,
  type GatewayError,
} from '../../core/gateway-errors.ts';
import type { CallerKey } from '../../core/exchange.ts';
import { hashApiKey, keyStatus, looksLikeApiKey, sameHash, type ApiKeyRecord } from '../../core/api-keys.ts';
import { staticKeyIdAsync } from '../../core/static-key-id.ts';
import type { KeyStore } from '../../stores/keys/key-store.ts';
import type { GroupRecord, TeamRecord } from '../../core/limits.ts';
import type { GroupStore } from '../../stores/groups/group-store.ts';
import type { TeamStore } from '../../stores/teams/team-store.ts';
import { keyInTeam } from '../../core/team-identity.ts';
import { modelRouteAt, type KeyHeader } from '../../core/route-table.ts';

/**
 * The authenticate stage: the caller presenting the request's key (the route's key headers), or the
 * 401, 403, 429 (an address past the failed-key throttle) or 503 that refuses it.
 */
export function authenticate(authenticator: Pick<KeyAuthenticator, 'check'>): Stage {
  return async function authenticate(exchange, next) {
    const checked = authenticator.check(exchange.headers, exchange.route.keyHeaders, () => clientAddress(exchange.req));
    exchange.caller = checked instanceof Promise ? await checked : checked;
    if (EVENTS.authenticated.activeFor(exchange)) EVENTS.authenticated.publish(exchange);
    return next(exchange);
  };
}

/** The caller as `res.locals.apiKey` holds it: id, name and permissions, never the key or its hash. */
export interface AuthenticatedKey extends CallerKey {
  readonly name: string;
}

const MISSING = 'Missing bearer token: send the header Authorization: Bearer <API key>';
const NOT_BEARER = "The Authorization header must use the Bearer scheme: 'Authorization: Bearer <API key>'";
const MALFORMED = "Invalid API key: keys start with 'sk-' followed by letters, digits, '-' or '_'";
const UNKNOWN = 'Invalid API key';

/**
 * A static key's record (its id from {@link staticKeyId}): never revoked, never expiring, with the gateway's limits.
 */
export function staticKeyRecord(key: string, index: number, id: string): ApiKeyRecord {
  return {
    id,
    name: `static key ${index + 1}`,
    hash: hashApiKey(key),
    createdAt: new Date(0).toISOString(),
    revoked: false,
  };
}

/**
 * The caller a found record stands for, with the key's own limits; throws 403 for a revoked or expired
 * key. The key's team, if it names one, is joined by the authenticator (see {@link withTeam}).
 */
export function authenticatedKey(record: ApiKeyRecord, now = Date.now()): AuthenticatedKey {
  const status = keyStatus(record, now);
  if (status === 'revoked') throw forbidden('This API key has been revoked');
  if (status === 'expired') throw forbidden(`This API key expired at ${record.expiresAt}`);
  const {
    id,
    name,
    models,
    rpm,
    concurrency,
    quota,
    tpm,
    budget,
    cache,
    guardrails,
    end_user: endUser,
    alerts,
  } = record;
  return {
    id,
    name,
    ...(models && { models }),
    ...(rpm !== undefined && { rpm }),
    ...(concurrency !== undefined && { concurrency }),
    ...(quota && { quota }),
    ...(tpm !== undefined && { tpm }),
    ...(budget && { budget }),
    ...(cache !== undefined && { cache }),
    ...(guardrails && { guardrails }),
    ...(endUser && { end_user: endUser }),
    ...(alerts && { alerts }),
  };
}

/** The caller with its team's name, limits, cache setting, guardrails and group name (`CallerKey.team`). */
export function withTeam(caller: AuthenticatedKey, team: TeamRecord): AuthenticatedKey {
  const { id, name, rpm, tpm, quota, budget, concurrency, cache, guardrails, group, end_user: endUser, alerts } = team;
  return {
    ...caller,
    team: {
      id,
      name,
      ...(group !== undefined && { group }),
      ...(rpm !== undefined && { rpm }),
      ...(tpm !== undefined && { tpm }),
      ...(quota && { quota }),
      ...(budget && { budget }),
      ...(concurrency !== undefined && { concurrency }),
      ...(cache !== undefined && { cache }),
      ...(guardrails && { guardrails }),
      ...(endUser && { end_user: endUser }),
      ...(alerts && { alerts }),
    },
  };
}

/** The caller with the budget group it draws from, as `CallerKey.group` carries it. */
export function withGroup(caller: AuthenticatedKey, group: GroupRecord): AuthenticatedKey {
  const { id, name, tpm, quota, budget, alerts } = group;
  return {
    ...caller,
    group: {
      id,
      name,
      ...(tpm !== undefined && { tpm }),
      ...(quota && { quota }),
      ...(budget && { budget }),
      ...(alerts && { alerts }),
    },
  };
}

// The token of an `Authorization: Bearer <token>` header, or the 401 that fits the header.
function bearerToken(header: string | undefined): string {
  if (header === undefined || header.trim() === '') throw unauthenticated(MISSING);
  const match = /^(\S+)(?:[ \t]+(.*))?$/.exec(header.trim());
  if (!match || match[1]!.toLowerCase() !== 'bearer') throw unauthenticated(NOT_BEARER);
  const token = (match[2] ?? '').trim();
  if (token === '') throw unauthenticated(MISSING);
  return token;
}

const BEARER_ONLY: readonly KeyHeader[] = ['authorization'];

/**
 * The headers a key may be presented in at a path: its model route's (see the route table), else Authorization only.
 */
export function keyHeadersAt(path: string): readonly KeyHeader[] {
  return modelRouteAt(path)?.keyHeaders ?? BEARER_ONLY;
}

/**
 * The API key a request presents: the bearer token, or where the route accepts it (the Messages
 * routes, whose clients send their key as `x-api-key`) that header when no Authorization header is
 * sent. Throws the 401 that fits when none is presented (missing, not Bearer).
 */
export function presentedKey(headers: IncomingHttpHeaders, where: string | readonly KeyHeader[]): string {
  const authorization = headers.authorization;
  const apiKey = headers['x-api-key'];
  const noAuthorization = authorization === undefined || authorization.trim() === '';
  if (
    noAuthorization &&
    typeof apiKey === 'string' &&
    apiKey.trim() !== '' &&
    (typeof where === 'string' ? keyHeadersAt(where) : where).includes('x-api-key')
  )
    return apiKey.trim();
  return bearerToken(authorization);
}

export interface AuthenticatorOptions {
  readonly store: KeyStore;
  /**
   * Where the teams keys name live: a key naming a team carries the team's limits (`CallerKey.team`).
   * Without it, or when the team no longer exists, a key is served with its own limits only.
   */
  readonly teams?: TeamStore;
  /**
   * How long a team or a group, once read, is trusted without asking again (5 s): a PATCH reaches every
   * instance within it.
   */
  readonly teamTrustMs?: number;
  /**
   * Where the budget groups keys and teams name live: a request draws from its key's group, else its team's
   * (`CallerKey.group`). Without it, or when the group no longer exists, no group applies.
   */
  readonly groups?: GroupStore;
  /**
   * Keys from `GATEWAY_API_KEYS`, accepted besides the store's, whatever the store does (it is never
   * asked about them).
   */
  readonly staticKeys?: readonly string[];
  /** `GATEWAY_KEY_ID_SECRET`: the static keys' ids are an HMAC under it; derived from the key alone without it. */
  readonly keyIdSecret?: string;
  readonly logger?: Logger;
  /**
   * Failed API keys per client address: an address past its limit is answered 429 before the key it
   * presents is looked at (not hashed, not looked up), valid or not, until its window ends.
   */
  readonly throttle?: FailedAuthThrottle;
  /**
   * How long a key's record, once read from the store, is trusted without asking again (200 ms). With
   * the stores' own caches (Redis 500 ms, file 250 ms) a revoke or a change (`PATCH /admin/keys/{id}`, `keys update`)
   * reaches every instance within 1 s.
   */
  readonly trustMs?: number;
  /** Most presented keys remembered at once (10,000); the one read longest ago is forgotten first. */
  readonly cacheSize?: number;
}

/**
 * Bearer authentication (on `/v1/messages` and `/v1/messages/count_tokens` also `x-api-key`;
 * Authorization wins when both are sent): as Express middleware it sets `res.locals.apiKey` or passes the 401, 403 or
 * 503 on; {@link KeyAuthenticator.check} is the same decision for the model route dispatcher.
 */
export interface KeyAuthenticator extends RequestHandler {
  /**
   * The caller presenting these headers, or throws (401 no, malformed or unknown key; 403 revoked or
   * expired; 503 key store unreachable). Synchronous for a key whose record was read within
   * `trustMs`; a promise only when the store must be asked. With `addressOf`, a refused key counts
   * against the client address, and an address past the throttle's limit is answered 429 without its
   * key being looked up.
   */
  check(
    headers: IncomingHttpHeaders,
    where: string | readonly KeyHeader[],
    addressOf?: () => string,
  ): AuthenticatedKey | Promise<AuthenticatedKey>;
  /**
   * Settles once every static key's id is derived (started at once; a static key presented earlier waits for its own).
   */
  readonly ready: Promise<void>;
}

/**
 * Authentication for the model routes, failing with 401 (no, malformed or unknown key), 403 (revoked or
 * expired key) or 503 (key store unreachable). The presented key is hashed and looked up by its hash
 * (hashes compared in constant time); the record found is remembered per presented key for `trustMs`,
 * so a busy key costs neither a hash nor a store read per request.
 */
export function createAuthenticator(options: AuthenticatorOptions): KeyAuthenticator {
  const logger = options.logger ?? pino({ level: 'silent' });
  const statics = new StaticKeys(options.staticKeys ?? [], options.keyIdSecret);
  const cache = new TrustedCache(recordFinder(statics, options.store, logger), {
    trustMs: options.trustMs ?? 200,
    maxEntries: options.cacheSize ?? 10_000,
    revision: () => options.store.revision,
  });
  const trust = options.teamTrustMs ?? 5000;
  const admit = callerOf(
    recordJoiner(options.teams, TEAM_JOIN, trust, logger),
    recordJoiner(options.groups, GROUP_JOIN, trust, logger),
  );
  // A key presented and refused counts against the client address; past its limit the answer is 429.
  const refuse =
    (addressOf: (() => string) | undefined) =>
    (error: unknown): never => {
      if (addressOf && options.throttle && isGatewayError(error) && error.status === 401)
        throw options.throttle.failed(addressOf()) ?? error;
      throw error;
    };
  const check = (
    headers: IncomingHttpHeaders,
    where: string | readonly KeyHeader[],
    addressOf?: () => string,
  ): AuthenticatedKey | Promise<AuthenticatedKey> => {
    // A missing header or another scheme is no attempt at a key: it is answered 401 but not counted.
    const key = presentedKey(headers, where);
    const { throttle } = options;
    // A throttled address gets no key checked, so a guess from it can never find out whether it was right.
    if (addressOf && throttle && !throttle.idle) {
      const refusal = throttle.refusal(addressOf());
      if (refusal) throw refusal;
    }
    try {
      if (!looksLikeApiKey(key)) throw unauthenticated(MALFORMED);
      const found = cache.get(key);
      if (found instanceof Promise) return found.then(admit).catch(refuse(addressOf));
      const admitted = admit(found);
      return admitted instanceof Promise ? admitted.catch(refuse(addressOf)) : admitted;
    } catch (error) {
      return refuse(addressOf)(error);
    }
  };
  return Object.assign(keyMiddleware(check), { check, ready: statics.ready });
}

/** The check as Express middleware: `res.locals.apiKey` set, or the refusal passed on. */
function keyMiddleware(check: KeyAuthenticator['check']): RequestHandler {
  const middleware: RequestHandler = async (req, res, next) => {
    try {
      res.locals.apiKey = await check(req.headers, req.path, () => clientAddress(req));
      next();
    } catch (error) {
      next(error);
    }
  };
  return middleware;
}

/** The static keys by hash, each record made once its id is derived (all started at once, off the event loop). */
class StaticKeys {
  private readonly records = new Map<string, Promise<ApiKeyRecord>>();
  readonly ready: Promise<void>;

  constructor(keys: readonly string[], secret: string | undefined) {
    keys.forEach((key, index) => {
      const hash = hashApiKey(key);
      if (!this.records.has(hash))
        this.records.set(
          hash,
          staticKeyIdAsync(key, secret).then((id) => staticKeyRecord(key, index, id)),
        );
    });
    this.ready = Promise.all(this.records.values()).then(() => undefined);
  }

  /** The record of a static key by its hash, undefined for any other key. */
  find(hash: string): Promise<ApiKeyRecord> | undefined {
    return this.records.get(hash);
  }
}

/**
 * Reads a presented key's record: a static key's (never asking the store), else the store's; 503 while the store cannot
 * be read.
 */
function recordFinder(
  statics: StaticKeys,
  store: KeyStore,
  logger: Logger,
): (key: string) => Promise<ApiKeyRecord | undefined> {
  return async (key) => {
    const hash = hashApiKey(key);
    const record = (await statics.find(hash)) ?? (await findInStore(store, hash, logger));
    return record && sameHash(record.hash, hash) ? record : undefined;
  };
}

/** A key's record that names a team. */
type TeamKeyRecord = ApiKeyRecord & { readonly team: string };

type TeamJoiner = RecordJoiner<AuthenticatedKey, TeamKeyRecord>;

type GroupJoiner = RecordJoiner<AuthenticatedKey, string>;

/**
 * The caller of a record: one object per record read, reused while the record is trusted (its status is
 * checked each time), joined with its team's limits, then with its budget group (the key's, else its
 * team's), synchronously while the team and the group are cached.
 */
function callerOf(
  joinTeam: TeamJoiner,
  joinGroup: GroupJoiner,
): (record: ApiKeyRecord | undefined) => AuthenticatedKey | Promise<AuthenticatedKey> {
  const callers = new WeakMap<ApiKeyRecord, AuthenticatedKey>();
  const withItsGroup = (record: ApiKeyRecord) => (caller: AuthenticatedKey) => {
    const group = record.group ?? caller.team?.group;
    return group === undefined ? caller : joinGroup(caller, group);
  };
  return (record) => {
    if (!record) throw unauthenticated(UNKNOWN);
    let caller = callers.get(record);
    if (caller === undefined || keyStatus(record) !== 'active') {
      caller = authenticatedKey(record);
      callers.set(record, caller);
    }
    const joined = record.team === undefined ? caller : joinTeam(caller, record as TeamKeyRecord);
    return joined instanceof Promise ? joined.then(withItsGroup(record)) : withItsGroup(record)(joined);
  };
}

/**
 * A key's budget group (the key's, else its team's), trusted as long as a team. A group that does not exist
 * (deleted, or no group store) leaves the caller without one.
 */
const GROUP_JOIN: JoinedRecordKind<AuthenticatedKey, GroupRecord, string> = {
  noun: 'group',
  nameOf: (name) => name,
  missing: (name) => `API keys draw from the group '${name}', which does not exist: no group limits apply to them`,
  join: withGroup,
};

/**
 * A key's team. A team that does not exist (deleted, or no team store), or a later team of the name that is not
 * the key's (see {@link keyInTeam}), leaves the key its own limits.
 */
const TEAM_JOIN: JoinedRecordKind<AuthenticatedKey, TeamRecord, TeamKeyRecord> = {
  noun: 'team',
  nameOf: (record) => record.team,
  belongs: keyInTeam,
  missing: (name) =>
    `API keys name the team '${name}', which does not exist (or was created after theirs was deleted): they are served with their own limits only`,
  join: withTeam,
};

async function findInStore(store: KeyStore, hash: string, logger: Logger): Promise<ApiKeyRecord | undefined> {
  try {
    return await store.findByHash(hash);
  } catch (error) {
    logger.error({ reason: (error as Error).message }, 'key store unavailable');
    throw serviceUnavailable('The key store is unavailable; please retry shortly', error);
  }
}

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

// Addresses tracked at most; past it, windows already over are dropped first, then everything.
const MAX_ADDRESSES = 100_000;

export interface FailedAuthThrottleOptions {
  /** What the 429 says was refused too often: `authentication attempts` by default. */
  readonly subject?: string;
  readonly windowMs?: number;
  readonly now?: () => number;
}

/**
 * Counts failed credentials of one kind (the gateway keeps one throttle for API keys and another for
 * the admin token) per client address in fixed one-minute windows, in this process's memory. Past
 * `perMinute` failures an address is answered 429 with `Retry-After` until its window ends, before
 * its credential is looked at; requests that authenticate are never counted.
 */
export class FailedAuthThrottle {
  private readonly windows = new Map<string, { failures: number; resetAt: number }>();
  private readonly subject: string;
  private readonly windowMs: number;
  private readonly now: () => number;
  // When the last window counted so far ends: past it, nothing is refused and the windows are dropped.
  private lastResetAt = 0;

  constructor(
    readonly perMinute: number,
    options: FailedAuthThrottleOptions = {},
  ) {
    this.subject = options.subject ?? 'authentication attempts';
    this.windowMs = options.windowMs ?? 60_000;
    this.now = options.now ?? Date.now;
  }

  /** True while no address has failures counted in a current window: callers may skip working out the address. */
  get idle(): boolean {
    if (this.windows.size === 0) return true;
    if (this.now() < this.lastResetAt) return false;
    this.windows.clear();
    return true;
  }

  /** The 429 for an address that used up its failures in this window, else undefined. */
  refusal(address: string): GatewayError | undefined {
    const window = this.windows.get(address);
    const now = this.now();
    if (!window || window.resetAt <= now || window.failures < this.perMinute) return undefined;
    const retryAfter = Math.max(1, Math.ceil((window.resetAt - now) / 1000));
    return rateLimited(`Too many failed ${this.subject} from this address: at most ${this.perMinute} per minute`, {
      'Retry-After': String(retryAfter),
    });
  }

  /** Counts one failure; gives back the 429 to answer instead when the address is over its limit. */
  failed(address: string): GatewayError | undefined {
    const now = this.now();
    let window = this.windows.get(address);
    if (!window || window.resetAt <= now) {
      if (this.windows.size >= MAX_ADDRESSES) this.prune(now);
      window = { failures: 0, resetAt: now + this.windowMs };
      this.windows.set(address, window);
      this.lastResetAt = window.resetAt;
    }
    window.failures += 1;
    return window.failures > this.perMinute ? this.refusal(address) : undefined;
  }

  private prune(now: number): void {
    for (const [address, window] of this.windows) if (window.resetAt <= now) this.windows.delete(address);
    if (this.windows.size >= MAX_ADDRESSES) this.windows.clear();
  }
}

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
