import type { RequestHandler } from 'express';
import type { Logger } from 'pino';
import { forbidden, serviceUnavailable, unauthenticated } from '../errors/gateway-errors.ts';
import type { CallerKey } from '../routes/route-services.ts';
import { hashApiKey, looksLikeApiKey, sameHash, type ApiKeyRecord } from './api-keys.ts';
import type { KeyStore } from './key-store.ts';

const MISSING = 'Missing bearer token: send the header Authorization: Bearer <API key>';
const NOT_BEARER = "The Authorization header must use the Bearer scheme: 'Bearer <API key>'";
const INVALID = 'Invalid API key';

/** Static keys (`GATEWAY_API_KEYS`) as records: their ids derive from the key, never reveal it. */
export function staticKeyRecords(keys: readonly string[]): ApiKeyRecord[] {
  return keys.map((key) => ({
    id: `static-${hashApiKey(`gateway static key id:${key}`).slice(0, 12)}`,
    name: 'static',
    hash: hashApiKey(key),
    createdAt: new Date(0).toISOString(),
    revoked: false,
  }));
}

/** Checks a record found for a key: revoked or expired keys are forbidden. */
export function callerOf(record: ApiKeyRecord, now = Date.now()): CallerKey {
  if (record.revoked) throw forbidden('This API key has been revoked');
  if (record.expiresAt && Date.parse(record.expiresAt) <= now) throw forbidden(`This API key expired at ${record.expiresAt}`);
  return { id: record.id, models: record.models, quota: record.quota, rpm: record.rpm };
}

/**
 * Bearer authentication for the model routes: sets `res.locals.apiKey` (id and permissions, never the
 * key or its hash) or fails with 401 (no or unknown key) or 403 (revoked or expired key).
 */
export function createAuthenticator(options: { store: KeyStore; staticKeys: readonly string[]; logger: Logger }): RequestHandler {
  const statics = new Map(staticKeyRecords(options.staticKeys).map((record) => [record.hash, record]));
  return async function authenticate(req, res, next) {
    const header = req.headers.authorization;
    if (header === undefined || header.trim() === '') return next(unauthenticated(MISSING));
    const match = /^Bearer(?:[ \t]+(\S*))?[ \t]*$/i.exec(header);
    if (!match) return next(unauthenticated(NOT_BEARER));
    const key = match[1] ?? '';
    if (!key) return next(unauthenticated(MISSING));
    if (!looksLikeApiKey(key)) return next(unauthenticated(INVALID));
    const hash = hashApiKey(key);
    let record = statics.get(hash);
    if (!record) {
      try {
        record = await options.store.findByHash(hash);
      } catch (error) {
        options.logger.error({ err: { message: (error as Error).message } }, 'key store unavailable');
        return next(serviceUnavailable('The key store is unavailable; please retry shortly', error));
      }
    }
    if (!record || !sameHash(record.hash, hash)) return next(unauthenticated(INVALID));
    try {
      res.locals.apiKey = callerOf(record);
    } catch (error) {
      return next(error);
    }
    next();
  };
}
