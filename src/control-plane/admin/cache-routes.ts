import { Router, type Request } from 'express';
import { badRequest, isGatewayError, keyNotFound, serviceUnavailable, teamNotFound } from '../../core/gateway-errors.ts';
import { cacheTenant, type CacheTenant, type ResponseCache } from '../../core/response-cache.ts';
import type { KeyStore } from '../../stores/keys/key-store.ts';
import type { TeamStore } from '../../stores/teams/team-store.ts';

/** Whose response cache entries to empty: one key's, one team's, or (neither given) everyone's. */
export type CacheClearTarget =
  | { readonly keyId?: undefined; readonly team?: undefined }
  | { readonly keyId: string; readonly team?: undefined }
  | { readonly team: string; readonly keyId?: undefined };

/** What a clear did: how many entries went, and whose (null: every tenant's). */
export interface CacheClearResult {
  readonly deleted: number;
  readonly tenant: CacheTenant | null;
}

export interface CacheClearStores {
  readonly keys: Pick<KeyStore, 'list'>;
  readonly teams: Pick<TeamStore, 'get'>;
}

/**
 * The tenant a clear empties, as the data plane names it for that caller: a key naming a team that
 * exists shares its team's entries (`team:<name>`), any other key has its own (`key:<id>`); undefined
 * for every entry. Throws 404 for a key id or team name the stores do not know (static keys from the
 * configuration are not in the key store: empty everything for those).
 */
export async function cacheClearTenant(target: CacheClearTarget, stores: CacheClearStores): Promise<CacheTenant | undefined> {
  if (target.team !== undefined) {
    if (!(await stores.teams.get(target.team))) throw teamNotFound(target.team);
    return `team:${target.team}`;
  }
  if (target.keyId === undefined) return undefined;
  const record = (await stores.keys.list()).find((key) => key.id === target.keyId);
  if (!record) throw keyNotFound(target.keyId);
  // A key whose team was deleted is served without one (see the authenticator): its entries are its own.
  const team = record.team !== undefined && (await stores.teams.get(record.team)) ? record.team : undefined;
  return cacheTenant(record.id, team);
}

/**
 * Empties the entries of `target` (see {@link cacheClearTenant}). Without a cache configured nothing is
 * held: the target is still checked, and 0 entries are deleted. A cache store that fails is a 503.
 */
export async function clearResponseCache(target: CacheClearTarget, stores: CacheClearStores, cache: ResponseCache | undefined): Promise<CacheClearResult> {
  const tenant = await cacheClearTenant(target, stores);
  if (!cache) return { deleted: 0, tenant: tenant ?? null };
  try {
    return { deleted: await cache.clear(tenant), tenant: tenant ?? null };
  } catch (error) {
    if (isGatewayError(error)) throw error;
    // The message only: an ioredis error object may carry the connection options, password included.
    throw serviceUnavailable('The response cache cannot be emptied right now (its store is unavailable); please retry shortly', new Error((error as Error).message));
  }
}

const PARAMETERS = new Set(['key_id', 'team']);

// One query parameter's value: absent, or given once and not empty.
function single(query: Request['query'], name: string): string | undefined {
  const value = query[name];
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || value === '') throw badRequest(`The query parameter '${name}' must be given once, with a value`, name);
  return value;
}

/** The target of `DELETE /cache` from its query; an unknown parameter is a 400, never an accidental "everything". */
export function cacheClearQuery(query: Request['query']): CacheClearTarget {
  const unknown = Object.keys(query).filter((name) => !PARAMETERS.has(name));
  if (unknown.length > 0) throw badRequest(`Unknown query parameter '${unknown[0]}': give key_id=KEY_ID or team=NAME, or neither to empty every entry`, unknown[0]);
  const keyId = single(query, 'key_id');
  const team = single(query, 'team');
  if (keyId !== undefined && team !== undefined) throw badRequest('Give key_id or team, not both (neither empties every entry)');
  return keyId !== undefined ? { keyId } : team !== undefined ? { team } : {};
}

export interface CacheRoutesOptions extends CacheClearStores {
  /** The gateway's response cache; absent when none is configured (a clear then deletes nothing). */
  readonly responseCache?: ResponseCache;
}

/**
 * `DELETE /cache` behind whatever guard mounts it (the admin token at `/admin/cache`): empties every
 * response cache entry, or those of `?key_id=` (its team's when it has one) or `?team=`, and answers
 * `{deleted, tenant}` (`tenant` null for every entry).
 */
export function cacheRoutes(options: CacheRoutesOptions): Router {
  const router = Router();
  router.delete('/cache', async (req, res) => {
    res.json(await clearResponseCache(cacheClearQuery(req.query), options, options.responseCache));
  });
  return router;
}
