import { Router, type Request } from 'express';
import {
  badRequest,
  isGatewayError,
  keyNotFound,
  serviceUnavailable,
  teamNotFound,
} from '../../core/gateway-errors.ts';
import { cacheTenant, type CacheTenant, type ResponseCache } from '../../core/response-cache.ts';
import { keyInTeam } from '../../core/team-identity.ts';
import type { KeyStore } from '../../stores/keys/key-store.ts';
import type { TeamStore } from '../../stores/teams/team-store.ts';

/** Whose response cache entries to empty: one key's, one team's, or (neither given) everyone's. */
export type CacheClearTarget =
  | { readonly keyId?: undefined; readonly team?: undefined }
  | { readonly keyId: string; readonly team?: undefined }
  | { readonly team: string; readonly keyId?: undefined };

/** What a clear did: how many entries went, and whose (`team:<name>` or `key:<id>`; null: every tenant's). */
export interface CacheClearResult {
  readonly deleted: number;
  readonly tenant: string | null;
}

/** The entries of one tenant, and how an answer names their owner (a team by its name, a key by its id). */
export interface TenantOf {
  readonly tenant: CacheTenant;
  readonly whose: string;
}

export interface CacheClearStores {
  readonly keys: Pick<KeyStore, 'list'>;
  readonly teams: Pick<TeamStore, 'get' | 'deletedId'>;
}

/**
 * The tenant a clear empties, as the data plane names it for that caller: a key of a team that exists
 * shares its team's entries (`team:<team id>`), any other key has its own (`key:<id>`); a team's name
 * stands for the team of that name, or when none exists for the last one deleted. Undefined for every
 * entry. Throws 404 for a key id, or a team name, the stores do not know (static keys from the
 * configuration are not in the key store: empty everything for those).
 */
export async function cacheClearTenant(
  target: CacheClearTarget,
  stores: CacheClearStores,
): Promise<TenantOf | undefined> {
  if (target.team !== undefined) {
    const id = (await stores.teams.get(target.team))?.id ?? (await stores.teams.deletedId(target.team));
    if (id === undefined) throw teamNotFound(target.team);
    return { tenant: `team:${id}`, whose: `team:${target.team}` };
  }
  if (target.keyId === undefined) return undefined;
  const record = (await stores.keys.list()).find((key) => key.id === target.keyId);
  if (!record) throw keyNotFound(target.keyId);
  // A key whose team was deleted is served without one (see the authenticator): its entries are its own.
  const team = record.team === undefined ? undefined : await stores.teams.get(record.team);
  if (team && keyInTeam(record, team)) return { tenant: cacheTenant(record.id, team.id), whose: `team:${team.name}` };
  return { tenant: cacheTenant(record.id, undefined), whose: `key:${record.id}` };
}

/**
 * A response cache as the control plane empties it: a clear may say whose entries go, by name
 * (`team:<name>`, `key:<id>`), for a cache that records its clears (see `accessResponseCache`).
 */
export interface EmptiedCache {
  clear(tenant?: CacheTenant, whose?: string): Promise<number>;
}

/**
 * Empties one tenant's entries (every entry without one), answering how many went: 0 without a cache. A
 * cache store that fails is a 503 saying `unavailable`.
 */
export async function emptyCache(
  cache: EmptiedCache | undefined,
  tenant: CacheTenant | undefined,
  whose: string | undefined,
  unavailable: string,
): Promise<number> {
  if (!cache) return 0;
  try {
    return await cache.clear(tenant, whose);
  } catch (error) {
    if (isGatewayError(error)) throw error;
    // The message only: an ioredis error object may carry the connection options, password included.
    throw serviceUnavailable(unavailable, new Error((error as Error).message));
  }
}

/**
 * Empties the entries of `target` (see {@link cacheClearTenant}). Without a cache configured nothing is
 * held: the target is still checked, and 0 entries are deleted. A cache store that fails is a 503.
 */
export async function clearResponseCache(
  target: CacheClearTarget,
  stores: CacheClearStores,
  cache: EmptiedCache | undefined,
): Promise<CacheClearResult> {
  const of = await cacheClearTenant(target, stores);
  const unavailable = 'The response cache cannot be emptied right now (its store is unavailable); please retry shortly';
  const deleted = await emptyCache(cache, of?.tenant, of?.whose, unavailable);
  return { deleted, tenant: of?.whose ?? null };
}

const PARAMETERS = new Set(['key_id', 'team']);

// One query parameter's value: absent, or given once and not empty.
function single(query: Request['query'], name: string): string | undefined {
  const value = query[name];
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || value === '')
    throw badRequest(`The query parameter '${name}' must be given once, with a value`, name);
  return value;
}

/** The target of `DELETE /cache` from its query; an unknown parameter is a 400, never an accidental "everything". */
export function cacheClearQuery(query: Request['query']): CacheClearTarget {
  const unknown = Object.keys(query).filter((name) => !PARAMETERS.has(name));
  if (unknown.length > 0)
    throw badRequest(
      `Unknown query parameter '${unknown[0]}': give key_id=KEY_ID or team=NAME, or neither to empty every entry`,
      unknown[0],
    );
  const keyId = single(query, 'key_id');
  const team = single(query, 'team');
  if (keyId !== undefined && team !== undefined)
    throw badRequest('Give key_id or team, not both (neither empties every entry)');
  return keyId !== undefined ? { keyId } : team !== undefined ? { team } : {};
}

const NO_BODY =
  'DELETE /admin/cache takes no body: give key_id=KEY_ID or team=NAME in the query string, ' +
  'or neither to empty every entry';

/** Whether a request carries a body (any length but 0, or chunked). */
function hasBody(req: Request): boolean {
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && length.trim() !== '0');
}

export interface CacheRoutesOptions extends CacheClearStores {
  /** The gateway's response cache; absent when none is configured (a clear then deletes nothing). */
  readonly responseCache?: ResponseCache;
}

/**
 * `DELETE /cache` behind whatever guard mounts it (the admin token at `/admin/cache`): empties every
 * response cache entry, or those of `?key_id=` (its team's when it has one) or `?team=` (a team that
 * exists, else the last one deleted of that name), and answers `{deleted, tenant}` (`tenant` null for
 * every entry). A body is refused (400): whose entries go is said in the query only, so that a target
 * sent as JSON never empties everything.
 */
export function cacheRoutes(options: CacheRoutesOptions): Router {
  const router = Router();
  router.delete('/cache', async (req, res) => {
    if (hasBody(req)) throw badRequest(NO_BODY);
    res.json(await clearResponseCache(cacheClearQuery(req.query), options, options.responseCache));
  });
  return router;
}
