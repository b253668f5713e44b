import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

/** A managed or static key as stored: never the key itself, only its SHA-256 hash. */
export interface ApiKeyRecord {
  /** Public id (`key_…`), safe to show and log. */
  readonly id: string;
  readonly name: string;
  /** Hex SHA-256 of the key. */
  readonly hash: string;
  readonly createdAt: string;
  readonly expiresAt?: string;
  readonly revoked: boolean;
  /** Canonical model IDs the key may use; all models when absent. */
  readonly models?: readonly string[];
  /** The key's own request limit per rate-limit window, instead of the gateway's. */
  readonly rpm?: number;
  /** Charged-token quotas per UTC day and month. */
  readonly quota?: { readonly daily?: number; readonly monthly?: number };
}

export type NewKeyInput = Pick<ApiKeyRecord, 'name' | 'expiresAt' | 'models' | 'rpm' | 'quota'>;

const KEY_SHAPE = /^sk-[A-Za-z0-9_-]{8,200}$/;

/** `sk-` and 32 random bytes in base64url (43 characters). */
export function generateApiKey(): string {
  return `sk-${randomBytes(32).toString('base64url')}`;
}

export function generateKeyId(): string {
  return `key_${randomBytes(9).toString('base64url')}`;
}

export function hashApiKey(key: string): string {
  return createHash('sha256').update(key).digest('hex');
}

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
  return { id: generateKeyId(), hash: hashApiKey(key), createdAt: now.toISOString(), revoked: false, ...stripUndefined(input) };
}

function stripUndefined<T extends object>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, entry]) => entry !== undefined)) as T;
}

/** A record without its hash, as the admin API and CLI show it. */
export function publicView(record: ApiKeyRecord): Omit<ApiKeyRecord, 'hash'> {
  const { hash: _hash, ...rest } = record;
  return rest;
}
