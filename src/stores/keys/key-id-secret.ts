import { randomBytes } from 'node:crypto';
import { link, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { RedisConnection } from '../redis/redis-client.ts';

/**
 * The installation's secret that static keys' public ids are derived from (an HMAC of the key), so an
 * id can be logged and shown without letting anyone test a guessed key against it, and the same key
 * gets another id in another installation. Made once, on first use, and kept: ids stay stable across
 * restarts, so usage and per-key limits keep adding up.
 */
export type KeyIdSecret = () => Promise<Buffer>;

const SECRET_BYTES = 32;
export const KEY_ID_SECRET_FILE = 'key-id-secret';
// The key store's hash tag: on a Cluster it shares their slot.
export const KEY_ID_SECRET_REDIS_KEY = '{gateway-keys}:key-id-secret';

function decode(text: string, where: string): Buffer {
  const secret = Buffer.from(text.trim(), 'base64url');
  if (secret.length !== SECRET_BYTES) {
    throw new Error(`${where} does not hold a key-id secret (${SECRET_BYTES} bytes, base64url); remove it to have a new one made (static key ids then change)`);
  }
  return secret;
}

/** Without Redis: `<dataDir>/key-id-secret` (mode 0600), made by the first process that needs it. */
export function fileKeyIdSecret(dataDir: string): KeyIdSecret {
  const path = join(dataDir, KEY_ID_SECRET_FILE);
  return async () => {
    try {
      return decode(await readFile(path, 'utf8'), path);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    }
    await mkdir(dataDir, { recursive: true });
    // Written whole under another name, then linked into place: a process racing to make it reads the
    // file that won, never a half-written one.
    const temporary = `${path}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
    await writeFile(temporary, `${randomBytes(SECRET_BYTES).toString('base64url')}\n`, { mode: 0o600 });
    try {
      await link(temporary, path);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    } finally {
      await rm(temporary, { force: true });
    }
    return decode(await readFile(path, 'utf8'), path);
  };
}

/** With Redis: one secret for every instance sharing it (the first to ask sets it), so they agree on ids. */
export function redisKeyIdSecret(redis: RedisConnection): KeyIdSecret {
  return async () => {
    await redis.set(KEY_ID_SECRET_REDIS_KEY, randomBytes(SECRET_BYTES).toString('base64url'), 'NX');
    const stored = await redis.get(KEY_ID_SECRET_REDIS_KEY);
    if (stored === null) throw new Error(`Redis lost ${KEY_ID_SECRET_REDIS_KEY} just after it was set`);
    return decode(stored, `Redis key ${KEY_ID_SECRET_REDIS_KEY}`);
  };
}
