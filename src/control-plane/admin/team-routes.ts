import { Router, type RequestHandler } from 'express';
import { keyStatus } from '../../core/api-keys.ts';
import { conflict, teamNotFound, type GatewayError } from '../../core/gateway-errors.ts';
import type { TeamRecord } from '../../core/limits.ts';
import { readJsonObject } from '../../data-plane/http/json-body.ts';
import type { KeyStore } from '../../stores/keys/key-store.ts';
import type { TeamStore } from '../../stores/teams/team-store.ts';
import type { GroupStore } from '../../stores/groups/group-store.ts';
import { knownGroup } from './key-routes.ts';
import type { ResponseCache } from '../../core/response-cache.ts';
import { keyInTeam } from '../../core/team-identity.ts';
import { emptyCache, type EmptiedCache } from './cache-routes.ts';
import { parseNewTeam, parseTeamChanges } from './team-input.ts';

/** A team as the admin API shows it: every limit, null when off, and the cache setting, null when unset. */
export interface TeamView {
  readonly name: string;
  readonly created_at: string;
  readonly rpm: number | null;
  readonly tpm: number | null;
  readonly quota: TeamRecord['quota'] | null;
  readonly budget: TeamRecord['budget'] | null;
  readonly concurrency: number | null;
  readonly cache: boolean | null;
  /** The guardrails the team's keys get; null when unset (every configured one). */
  readonly guardrails: readonly string[] | null;
  /** The budget group the team's keys draw from (unless a key names its own); null when none. */
  readonly group: string | null;
  /** The limits each end user of the team's keys gets; null when unset. */
  readonly end_user: TeamRecord['end_user'] | null;
  /** The percents of its budgets and quotas at which the team's alerts fire; null when unset (the gateway's). */
  readonly alerts: readonly number[] | null;
}

export function teamView(record: TeamRecord): TeamView {
  return {
    name: record.name,
    created_at: record.createdAt,
    rpm: record.rpm ?? null,
    tpm: record.tpm ?? null,
    quota: record.quota ?? null,
    budget: record.budget ?? null,
    concurrency: record.concurrency ?? null,
    cache: record.cache ?? null,
    guardrails: record.guardrails ?? null,
    group: record.group ?? null,
    end_user: record.end_user ?? null,
    alerts: record.alerts ?? null,
  };
}

/** How many keys that are not revoked belong to the team (expired ones count: they still point at it). */
export async function keysNamingTeam(keys: Pick<KeyStore, 'list'>, team: TeamRecord): Promise<number> {
  return (await keys.list()).filter((record) => keyInTeam(record, team) && keyStatus(record) !== 'revoked').length;
}

/** 409: keys that are not revoked still name the team. */
export function teamInUse(name: string, naming: number): GatewayError {
  return conflict(
    `Team '${name}' is named by ${naming} key${naming === 1 ? '' : 's'} that ${naming === 1 ? 'is' : 'are'} not revoked; revoke ${naming === 1 ? 'it' : 'them'} first`,
  );
}

/**
 * Deletes a team once no key that is not revoked belongs to it (409 otherwise), after emptying its
 * response cache entries (a cache store that fails is a 503, and the team stays): a later team of the
 * same name gets an id of its own and never reads them. Answers how many entries went, or undefined
 * when no team has the name.
 */
export async function deleteTeam(
  name: string,
  stores: { readonly keys: Pick<KeyStore, 'list'>; readonly teams: TeamStore },
  cache: EmptiedCache | undefined,
): Promise<number | undefined> {
  const team = await stores.teams.get(name);
  if (!team) return undefined;
  const naming = await keysNamingTeam(stores.keys, team);
  if (naming > 0) throw teamInUse(name, naming);
  const unavailable =
    `Team '${name}' is not deleted: its response cache entries cannot be emptied right now ` +
    '(the cache store is unavailable); please retry shortly';
  const emptied = await emptyCache(cache, `team:${team.id}`, `team:${name}`, unavailable);
  return (await stores.teams.remove(name)) ? emptied : undefined;
}

export interface TeamRoutesOptions {
  readonly keys: KeyStore;
  readonly teams: TeamStore;
  /** The budget groups a team's `group` may name; without it, naming a group is refused. */
  readonly groups?: Pick<GroupStore, 'get'>;
  /** The response cache a deleted team's entries are emptied from; none when absent. */
  readonly responseCache?: ResponseCache;
  readonly bodyLimitBytes?: number;
  /**
   * The names of the guardrails the configuration in force holds, to check a team's `guardrails` against; unchecked
   * when absent.
   */
  readonly guardrails?: () => readonly string[];
}

/**
 * The team operations, behind whatever guard mounts them: `POST /teams` (201; 409 when the name is
 * taken), `GET /teams`, `GET /teams/:name`, `PATCH /teams/:name` (each limit or the cache setting set,
 * or null to remove it) and `DELETE /teams/:name` (409 while keys that are not revoked name the team; see
 * {@link deleteTeam}). A missing team is 404.
 */
export function teamRoutes(options: TeamRoutesOptions): Router {
  const router = Router();
  const limit = options.bodyLimitBytes ?? 1024 * 1024;
  const groupsOf = async (body: Record<string, unknown>) => options.groups && knownGroup(options.groups, body.group);
  router.post('/teams', async (req, res) => {
    const body = await readJsonObject(req, limit);
    const input = parseNewTeam(body, undefined, options.guardrails?.(), await groupsOf(body));
    res.status(201).json(teamView(await options.teams.create(input)));
  });
  router.get('/teams', async (_req, res) => {
    res.json({ object: 'list', data: (await options.teams.list()).map(teamView) });
  });
  router.get('/teams/:name', async (req, res) => {
    const name = String(req.params.name);
    const team = await options.teams.get(name);
    if (!team) throw teamNotFound(name);
    res.json(teamView(team));
  });
  router.patch('/teams/:name', async (req, res) => {
    const name = String(req.params.name);
    const body = await readJsonObject(req, limit);
    const changes = parseTeamChanges(body, undefined, options.guardrails?.(), await groupsOf(body));
    const team = await options.teams.update(name, changes);
    if (!team) throw teamNotFound(name);
    res.json(teamView(team));
  });
  const remove: RequestHandler = async (req, res) => {
    const name = String(req.params.name);
    if ((await deleteTeam(name, options, options.responseCache)) === undefined) throw teamNotFound(name);
    res.json({ name, deleted: true });
  };
  router.delete('/teams/:name', remove);
  return router;
}
