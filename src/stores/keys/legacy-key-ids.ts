import { createHmac } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { RedisConnection } from '../redis/redis-client.ts';

/**
 * Static keys' ids of the previous scheme, kept readable. Releases before this one derived a static
 * key's id as an HMAC under an installation secret kept in Redis (`{gateway-keys}:key-id-secret`) or
 * in `<dataDir>/key-id-secret`; the secret is only read here, never made: usage recorded under those
 * ids is read back under the key's current id (see `usage/usage-accounting.ts`).
 */
export const LEGACY_SECRET_FILE = 'key-id-secret';
export const LEGACY_SECRET_REDIS_KEY = '{gateway-keys}:key-id-secret';

/** Where the previous scheme's secret lives: Redis when configured, else the data directory. */
export interface LegacySecretSource {
  readonly redis?: RedisConnection;
  readonly dataDir: string;
}

/** The previous scheme's secret, undefined when this installation never made one. */
export async function readLegacySecret(source: LegacySecretSource): Promise<Buffer | undefined> {
  let text: string | null;
  if (source.redis) text = await source.redis.get(LEGACY_SECRET_REDIS_KEY);
  else {
    try {
      text = await readFile(join(source.dataDir, LEGACY_SECRET_FILE), 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw error;
    }
  }
  if (text === null) return undefined;
  const secret = Buffer.from(text.trim(), 'base64url');
  return secret.length === 32 ? secret : undefined;
}

/** A static key's id under the previous scheme. */
export function legacyStaticKeyId(key: string, secret: Buffer): string {
  return `static_${createHmac('sha256', secret).update(key).digest('hex').slice(0, 16)}`;
}
