import type { RequestHandler } from 'express';
import type { IncomingHttpHeaders } from 'node:http';
import { pino, type Logger } from 'pino';
import { forbidden, isGatewayError, serviceUnavailable, unauthenticated } from '../errors/gateway-errors.ts';
import type { CallerKey } from '../routes/route-services.ts';
import { hashApiKey, keyStatus, looksLikeApiKey, sameHash, type ApiKeyRecord } from './api-keys.ts';
import { clientAddress, type FailedAuthThrottle } from './failed-auth-throttle.ts';
import type { KeyStore } from './key-store.ts';

/** The caller as `res.locals.apiKey` holds it: id, name and permissions, never the key or its hash. */
export interface AuthenticatedKey extends CallerKey {
  readonly name: string;
}

const MISSING = 'Missing bearer token: send the header Authorization: Bearer <API key>';
const NOT_BEARER = "The Authorization header must use the Bearer scheme: 'Authorization: Bearer <API key>'";
const MALFORMED = "Invalid API key: keys start with 'sk-' followed by letters, digits, '-' or '_'";
const UNKNOWN = 'Invalid API key';

/** Static keys (`GATEWAY_API_KEYS`) as records; their ids derive from the key but never reveal it. */
export function staticKeyRecords(keys: readonly string[]): ApiKeyRecord[] {
  return keys.map((key, index) => ({
    id: `static_${hashApiKey(`gateway static key id:${key}`).slice(0, 16)}`,
    name: `static key ${index + 1}`,
    hash: hashApiKey(key),
    createdAt: new Date(0).toISOString(),
    revoked: false,
  }));
}

/** The caller a found record stands for; throws 403 for a revoked or expired key. */
export function authenticatedKey(record: ApiKeyRecord, now = Date.now()): AuthenticatedKey {
  const status = keyStatus(record, now);
  if (status === 'revoked') throw forbidden('This API key has been revoked');
  if (status === 'expired') throw forbidden(`This API key expired at ${record.expiresAt}`);
  const { id, name, models, rpm, quota } = record;
  return { id, name, ...(models && { models }), ...(rpm !== undefined && { rpm }), ...(quota && { quota }) };
}

/** Throws 403 unless the key may use the model (its resolved canonical ID). */
export function assertModelAllowed(key: CallerKey | undefined, canonicalModelId: string): void {
  if (key?.models && !key.models.includes(canonicalModelId)) {
    throw forbidden(`This API key may not use the model '${canonicalModelId}'`);
  }
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

/** Paths of the Messages wire format, whose clients send their key as `x-api-key` (that format's own header). */
const API_KEY_HEADER_PATHS: ReadonlySet<string> = new Set(['/v1/messages', '/v1/messages/count_tokens']);

// The presented key: the bearer token, or on the Messages paths `x-api-key` when no Authorization header is sent.
function presentedKey(headers: IncomingHttpHeaders, path: string): string {
  const authorization = headers.authorization;
  const apiKey = headers['x-api-key'];
  const noAuthorization = authorization === undefined || authorization.trim() === '';
  if (noAuthorization && typeof apiKey === 'string' && apiKey.trim() !== '' && API_KEY_HEADER_PATHS.has(path)) return apiKey.trim();
  return bearerToken(authorization);
}

export interface AuthenticatorOptions {
  readonly store: KeyStore;
  /** Keys from `GATEWAY_API_KEYS`, accepted besides the store's. */
  readonly staticKeys?: readonly string[];
  readonly logger?: Logger;
  /** Answers 429 instead of 401 to a client address past its failed attempts per minute. */
  readonly throttle?: FailedAuthThrottle;
}

/**
 * Bearer authentication for the model routes (on `/v1/messages` and `/v1/messages/count_tokens` also
 * `x-api-key`; Authorization wins when both are sent): sets `res.locals.apiKey` ({@link AuthenticatedKey}) or
 * fails with 401 (no, malformed or unknown key), 403 (revoked or expired key) or 503 (key store
 * unreachable). The presented key is hashed and looked up by its hash; hashes are compared in
 * constant time.
 */
export function createAuthenticator(options: AuthenticatorOptions): RequestHandler {
  const logger = options.logger ?? pino({ level: 'silent' });
  const statics = new Map(staticKeyRecords(options.staticKeys ?? []).map((record) => [record.hash, record]));
  return async function authenticate(req, res, next) {
    let presented = false;
    try {
      const key = presentedKey(req.headers, req.path);
      presented = true;
      if (!looksLikeApiKey(key)) throw unauthenticated(MALFORMED);
      const hash = hashApiKey(key);
      const record = statics.get(hash) ?? (await findInStore(options.store, hash, logger));
      if (!record || !sameHash(record.hash, hash)) throw unauthenticated(UNKNOWN);
      res.locals.apiKey = authenticatedKey(record);
      next();
    } catch (error) {
      // Only a key presented and refused counts as a failed attempt, not a missing header.
      const refused = presented && isGatewayError(error) && error.status === 401;
      next((refused && options.throttle?.failed(clientAddress(req))) || error);
    }
  };
}

async function findInStore(store: KeyStore, hash: string, logger: Logger): Promise<ApiKeyRecord | undefined> {
  try {
    return await store.findByHash(hash);
  } catch (error) {
    logger.error({ reason: (error as Error).message }, 'key store unavailable');
    throw serviceUnavailable('The key store is unavailable; please retry shortly', error);
  }
}
