import { createHmac, scrypt, scryptSync } from 'node:crypto';

/**
 * The public id of a static key (`GATEWAY_API_KEYS`): `static_` and 16 hex digits derived from the key
 * alone, so every instance, whatever Redis or the disk hold, gives a key the same id, and usage and
 * limits add up under it. Without a secret the derivation is scrypt (a deliberately slow, memory-hard
 * hash, under a fixed salt of this project's), so an id that is logged or shown is of no use to test
 * guessed keys against at any useful rate. With `GATEWAY_KEY_ID_SECRET` it is an HMAC under that
 * secret instead: the ids are then not computable from a key without the secret.
 */
const SALT = 'model-gateway static key id v2';
// About 30 ms and 16 MiB per key on one core; done once per key per process (on its first use).
const SCRYPT = { N: 1 << 14, r: 8, p: 1, maxmem: 64 * 1024 * 1024 } as const;
const ID_BYTES = 8;

const idOf = (digest: Buffer): string => `static_${digest.subarray(0, ID_BYTES).toString('hex')}`;

/** The id of a static key, computed synchronously (tests, the CLI). */
export function staticKeyId(key: string, secret?: string): string {
  if (secret) return idOf(createHmac('sha256', secret).update(key).digest());
  return idOf(scryptSync(key, SALT, ID_BYTES, SCRYPT));
}

/** The id of a static key, computed on libuv's thread pool (the scrypt derivation does not block the event loop). */
export function staticKeyIdAsync(key: string, secret?: string): Promise<string> {
  if (secret) return Promise.resolve(staticKeyId(key, secret));
  return new Promise((resolve, reject) =>
    scrypt(key, SALT, ID_BYTES, SCRYPT, (error, digest) => (error ? reject(error) : resolve(idOf(digest)))),
  );
}
