import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { EndUserLimits, MoneyBudget, TokenQuota } from './limits.ts';

/** A managed key as stored: never the key itself, only its SHA-256 hash. */
export interface ApiKeyRecord {
  /** Public id (`key_…`), safe to show and log. */
  readonly id: string;
  readonly name: string;
  /** Hex SHA-256 of the key. */
  readonly hash: string;
  /** ISO date-time. */
  readonly createdAt: string;
  /** ISO date-time after which the key is refused; never when absent. */
  readonly expiresAt?: string;
  readonly revoked: boolean;
  /** Canonical model IDs the key may use; every model when absent. */
  readonly models?: readonly string[];
  /** The key's own request limit per rate-limit window, instead of the gateway's. */
  readonly rpm?: number;
  /** The key's own limit of requests in flight at once (per gateway instance), instead of the gateway's. */
  readonly concurrency?: number;
  /** Charged-token quotas per UTC day and month. */
  readonly quota?: TokenQuota;
  /** Tokens (input + output) per UTC minute. */
  readonly tpm?: number;
  /** Money budgets per UTC day and month. */
  readonly budget?: MoneyBudget;
  /** The name of the team whose limits the key shares. */
  readonly team?: string;
  /**
   * That team's id (see `core/team-identity.ts`), so that a later team of the same name is not the key's;
   * absent on keys given their team before teams had ids.
   */
  readonly teamId?: string;
  /** The name of the budget group the key draws from, over its team's group. */
  readonly group?: string;
  /**
   * `false`: the key's requests never use the response cache. Absent or `true` (kept as set): they follow
   * the gateway's setting (and the key's team's).
   */
  readonly cache?: boolean;
  /**
   * The configured guardrails the key's requests get, over its team's; absent: its team's (else every one). `[]`: none.
   */
  readonly guardrails?: readonly string[];
  /** Limits each end user of the key gets separately (see `EndUserLimits`). */
  readonly end_user?: EndUserLimits;
  /**
   * Percents of the key's money budgets and token quotas at which its alerts fire;
   * absent: the gateway's. `[]`: none.
   */
  readonly alerts?: readonly number[];
}

export type NewKeyInput = Pick<
  ApiKeyRecord,
  | 'name'
  | 'expiresAt'
  | 'models'
  | 'rpm'
  | 'concurrency'
  | 'quota'
  | 'tpm'
  | 'budget'
  | 'team'
  | 'teamId'
  | 'group'
  | 'cache'
  | 'guardrails'
  | 'end_user'
  | 'alerts'
>;

const KEY_SHAPE = /^sk-[A-Za-z0-9_-]{8,200}$/;

/** `sk-` and 32 random bytes in base64url (43 characters). */
export function generateApiKey(): string {
  return `sk-${randomBytes(32).toString('base64url')}`;
}

export function generateKeyId(): string {
  return `key_${randomBytes(8).toString('hex')}`;
}

export function hashApiKey(key: string): string {
  return createHash('sha256').update(key).digest('hex');
}

/** Whether a presented value has the shape of a gateway key (`sk-` and 8 to 200 URL-safe characters). */
export function looksLikeApiKey(value: string): boolean {
  return KEY_SHAPE.test(value);
}

/** Compares two hex digests in constant time. */
export function sameHash(a: string, b: string): boolean {
  const left = Buffer.from(a, 'hex');
  const right = Buffer.from(b, 'hex');
  return left.length === right.length && left.length > 0 && timingSafeEqual(left, right);
}

/** Compares two secrets in constant time whatever their lengths (by their digests). */
export function sameSecret(a: string, b: string): boolean {
  return sameHash(hashApiKey(a), hashApiKey(b));
}

export function newKeyRecord(key: string, input: NewKeyInput, now = new Date()): ApiKeyRecord {
  return {
    id: generateKeyId(),
    name: input.name,
    hash: hashApiKey(key),
    createdAt: now.toISOString(),
    revoked: false,
    ...definedOnly(input),
  };
}

function definedOnly<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, entry]) => entry !== undefined)) as Partial<T>;
}

/** A record without its hash, as lists show it. */
export function publicView(record: ApiKeyRecord): Omit<ApiKeyRecord, 'hash'> {
  const { hash: _hash, ...rest } = record;
  return rest;
}

/** `active`, `revoked` or `expired` at `now`. */
export function keyStatus(record: ApiKeyRecord, now = Date.now()): 'active' | 'revoked' | 'expired' {
  if (record.revoked) return 'revoked';
  if (record.expiresAt !== undefined && Date.parse(record.expiresAt) <= now) return 'expired';
  return 'active';
}
