import { Router, type RequestHandler } from 'express';
import { keyStatus, type ApiKeyRecord } from '../../core/api-keys.ts';
import type { KeyStore } from '../../stores/keys/key-store.ts';
import type { TeamStore } from '../../stores/teams/team-store.ts';
import type { GroupStore } from '../../stores/groups/group-store.ts';
import { isGroupName } from '../../core/group-identity.ts';
import { isTeamName } from '../../core/team-name.ts';
import { keyNotFound } from '../../core/gateway-errors.ts';
import { readJsonObject } from '../../data-plane/http/json-body.ts';
import type { ModelRegistry } from '../../core/model-registry.ts';
import type { ResponseCache } from '../../core/response-cache.ts';
import { emptyCache, type EmptiedCache } from './cache-routes.ts';
import { parseKeyChanges, parseNewKey, type NewKeyCheck } from './new-key-input.ts';

/** A key as the admin API shows it: never the hash (the key itself only once, on creation). */
export interface KeyView {
  readonly id: string;
  readonly name: string;
  readonly status: 'active' | 'revoked' | 'expired';
  readonly created_at: string;
  readonly expires_at: string | null;
  readonly revoked: boolean;
  readonly models: readonly string[] | null;
  readonly rpm: number | null;
  readonly concurrency: number | null;
  readonly quota: ApiKeyRecord['quota'] | null;
  readonly tpm: number | null;
  readonly budget: ApiKeyRecord['budget'] | null;
  /** The name of the key's team. */
  readonly team: string | null;
  /** The budget group the key names itself (over its team's); null when none. */
  readonly group: string | null;
  /** The key's response cache setting as set; null when unset (the gateway's setting applies). */
  readonly cache: boolean | null;
  /** The guardrails the key's requests get; null when unset (its team's, else every configured one). */
  readonly guardrails: readonly string[] | null;
  /** The limits each end user of the key gets; null when unset. */
  readonly end_user: ApiKeyRecord['end_user'] | null;
  /** The percents of its budgets and quotas at which the key's alerts fire; null when unset (the gateway's). */
  readonly alerts: readonly number[] | null;
}

export function keyView(record: ApiKeyRecord): KeyView {
  return {
    id: record.id,
    name: record.name,
    status: keyStatus(record),
    created_at: record.createdAt,
    expires_at: record.expiresAt ?? null,
    revoked: record.revoked,
    models: record.models ?? null,
    rpm: record.rpm ?? null,
    concurrency: record.concurrency ?? null,
    quota: record.quota ?? null,
    tpm: record.tpm ?? null,
    budget: record.budget ?? null,
    team: record.team ?? null,
    group: record.group ?? null,
    cache: record.cache ?? null,
    guardrails: record.guardrails ?? null,
    end_user: record.end_user ?? null,
    alerts: record.alerts ?? null,
  };
}

/** The group a body's `group` names, as the one known name when it exists (none else). */
export async function knownGroup(groups: Pick<GroupStore, 'get'>, name: unknown): Promise<Set<string>> {
  return new Set(isGroupName(name) && (await groups.get(name)) ? [name] : []);
}

/** The canonical model IDs (`vendor/model`) a key's `models` may name. */
export function canonicalModelIds(registry: ModelRegistry): Set<string> {
  return new Set(registry.plugins.flatMap((plugin) => plugin.models.map((model) => `${plugin.vendor}/${model.id}`)));
}

/**
 * Revokes a key, then empties its own response cache entries (`key:<id>`, which nobody can read any more;
 * those of its team stay the team's other keys'). Answers how many entries went, or undefined when no key
 * has the id. A cache store that fails is a 503 saying the key is revoked; the same request again empties them.
 */
export async function revokeKey(
  id: string,
  keys: Pick<KeyStore, 'revoke'>,
  cache: EmptiedCache | undefined,
): Promise<number | undefined> {
  if (!(await keys.revoke(id))) return undefined;
  const unavailable =
    `API key '${id}' is revoked, but its response cache entries cannot be emptied right now ` +
    '(the cache store is unavailable); send this request again shortly to empty them';
  return emptyCache(cache, `key:${id}`, `key:${id}`, unavailable);
}

export interface KeyRoutesOptions {
  readonly keys: KeyStore;
  readonly registry?: () => ModelRegistry;
  readonly bodyLimitBytes?: number;
  /** `GET /usage`, when the usage module provides it. */
  readonly usage?: RequestHandler;
  readonly teams?: TeamStore;
  /** The budget groups a key's `group` may name; without it, naming a group is refused. */
  readonly groups?: Pick<GroupStore, 'get'>;
  /** The names of the configured guardrails, to check a key's `guardrails` against; unchecked when absent. */
  readonly guardrails?: () => readonly string[];
  /** The response cache a revoked key's own entries are emptied from; none when absent. */
  readonly responseCache?: ResponseCache;
}

/**
 * The key and usage operations behind whatever guard mounts them: the admin API (admin token) and the
 * account page (session cookie + CSRF token) answer alike. Without `teams`, a new key cannot name a team.
 */
export function keyRoutes(options: KeyRoutesOptions): Router {
  const router = Router();
  const checksOf = keyBodyChecks(options);
  router.post('/keys', async (req, res) => {
    const body = await readJsonObject(req, options.bodyLimitBytes ?? 1024 * 1024);
    const input = parseNewKey(body, await checksOf(body));
    const { key, record } = await options.keys.create(input);
    res.status(201).json({ ...keyView(record), key });
  });
  // Each field set (an object replaces the whole limit), null to remove it, absent to keep it; 409 for a revoked key.
  router.patch('/keys/:id', async (req, res) => {
    const id = String(req.params.id);
    const body = await readJsonObject(req, options.bodyLimitBytes ?? 1024 * 1024);
    const record = await options.keys.update(id, parseKeyChanges(body, await checksOf(body)));
    if (!record) throw keyNotFound(id);
    res.json(keyView(record));
  });
  router.get('/keys', async (_req, res) => {
    res.json({ object: 'list', data: (await options.keys.list()).map(keyView) });
  });
  const revoke: RequestHandler = async (req, res) => {
    const id = String(req.params.id);
    if ((await revokeKey(id, options.keys, options.responseCache)) === undefined) throw keyNotFound(id);
    res.json({ id, revoked: true });
  };
  router.delete('/keys/:id', revoke);
  router.post('/keys/:id/revoke', revoke);
  if (options.usage) router.get('/usage', options.usage);
  return router;
}

/**
 * What a key's body is checked against: the gateway's models, the team and group it names (looked up), the
 * configured guardrails.
 */
function keyBodyChecks(options: KeyRoutesOptions): (body: Record<string, unknown>) => Promise<NewKeyCheck> {
  return async (body) => {
    const team = isTeamName(body.team) ? await options.teams?.get(body.team) : undefined;
    const knownTeams = options.teams && new Map(team ? [[team.name, team.id]] : []);
    const knownGroups = options.groups && (await knownGroup(options.groups, body.group));
    const knownModels = options.registry && canonicalModelIds(options.registry());
    return { knownModels, knownTeams, knownGroups, knownGuardrails: options.guardrails?.() };
  };
}
