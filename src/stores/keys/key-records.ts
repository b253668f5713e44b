import type { ApiKeyRecord } from '../../core/api-keys.ts';
import { conflict, type GatewayError } from '../../core/gateway-errors.ts';
import type { KeyChanges } from './key-store.ts';

// Every field of a key a change may set or remove (its id, hash, creation time and revocation never change here).
const CHANGEABLE = [
  'name',
  'expiresAt',
  'models',
  'rpm',
  'concurrency',
  'quota',
  'tpm',
  'budget',
  'team',
  'teamId',
  'group',
  'cache',
  'guardrails',
  'end_user',
  'alerts',
] as const;

/** 409: a revoked key is not changed (revoking is final; create a new key instead). */
export function keyRevoked(id: string): GatewayError {
  return conflict(`API key '${id}' is revoked; a revoked key cannot be changed (create a new one)`);
}

/**
 * The record with the changes made: a `null` removes the field, an absent one keeps it. Throws the 409
 * of {@link keyRevoked} for a revoked key.
 */
export function applyKeyChanges(record: ApiKeyRecord, changes: KeyChanges): ApiKeyRecord {
  if (record.revoked) throw keyRevoked(record.id);
  const next: Record<string, unknown> = { ...record };
  for (const field of CHANGEABLE) {
    const value = changes[field];
    if (value === null) delete next[field];
    else if (value !== undefined) next[field] = value;
  }
  return {
    ...(next as unknown as ApiKeyRecord),
    id: record.id,
    hash: record.hash,
    createdAt: record.createdAt,
    revoked: record.revoked,
    name: (next.name as string | undefined) ?? record.name,
  };
}
