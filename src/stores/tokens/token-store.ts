import { randomBytes } from 'node:crypto';
import { hashApiKey } from '../../core/api-keys.ts';
import type { Grant } from '../../core/access.ts';

/** A service token as stored: never the token itself, only its SHA-256 hash. */
export interface ServiceTokenRecord {
  /** Public id (`tok_…`), safe to show and log. */
  readonly id: string;
  readonly name: string;
  /** Hex SHA-256 of the token. */
  readonly hash: string;
  /** The role the token acts with (one grant). */
  readonly grant: Grant;
  readonly createdAt: string;
  /** After this the token is refused. */
  readonly expiresAt: string;
  /** Who made it (the audit actor's kind and id). */
  readonly createdBy: string;
  readonly revoked: boolean;
}

export type NewServiceToken = Pick<ServiceTokenRecord, 'name' | 'grant' | 'expiresAt' | 'createdBy'>;

/** Every service token starts so: the admin API tells it from the admin token by its shape. */
export const SERVICE_TOKEN_PREFIX = 'gwt_';
const TOKEN_SHAPE = /^gwt_[A-Za-z0-9_-]{43}$/;

export const looksLikeServiceToken = (value: string): boolean => TOKEN_SHAPE.test(value);

/** A new token and its record; the token is shown once and never stored. */
export function newServiceToken(
  input: NewServiceToken,
  now = new Date(),
): { token: string; record: ServiceTokenRecord } {
  const token = `${SERVICE_TOKEN_PREFIX}${randomBytes(32).toString('base64url')}`;
  const record: ServiceTokenRecord = {
    id: `tok_${randomBytes(8).toString('hex')}`,
    name: input.name,
    hash: hashApiKey(token),
    grant: input.grant,
    createdAt: now.toISOString(),
    expiresAt: input.expiresAt,
    createdBy: input.createdBy,
    revoked: false,
  };
  return { token, record };
}

export function tokenStatus(record: ServiceTokenRecord, now = Date.now()): 'active' | 'revoked' | 'expired' {
  return record.revoked ? 'revoked' : Date.parse(record.expiresAt) <= now ? 'expired' : 'active';
}

/** Where service tokens live: Redis when configured, a local file otherwise. */
export interface TokenStore {
  create(input: NewServiceToken): Promise<{ token: string; record: ServiceTokenRecord }>;
  list(): Promise<ServiceTokenRecord[]>;
  /** False when no token has that id. */
  revoke(id: string): Promise<boolean>;
  findByHash(hash: string): Promise<ServiceTokenRecord | undefined>;
  close(): Promise<void>;
}
