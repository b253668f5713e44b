import { Router } from 'express';
import { keyStatus, type ApiKeyRecord } from '../../core/api-keys.ts';
import { conflict, groupNotFound, type GatewayError } from '../../core/gateway-errors.ts';
import type { GroupRecord, TeamRecord } from '../../core/limits.ts';
import { readJsonObject } from '../../data-plane/http/json-body.ts';
import type { GroupStore } from '../../stores/groups/group-store.ts';
import type { KeyStore } from '../../stores/keys/key-store.ts';
import type { TeamStore } from '../../stores/teams/team-store.ts';
import type { LimitLedger } from '../../usage/limit-ledger.ts';
import { metersOfLimits } from '../../usage/limit-meters.ts';
import { covers, scopeOf, type TeamScope } from '../access/permissions.ts';
import { currentScope, refused } from '../access/request-scope.ts';
import { useOfMeters, type LimitUse } from '../limit-use.ts';
import { parseGroupChanges, parseNewGroup } from './group-input.ts';

/** A budget group as the admin API shows it: every limit, null when off; its alert thresholds, null when unset. */
export interface GroupView {
  readonly name: string;
  readonly created_at: string;
  readonly tpm: number | null;
  readonly quota: GroupRecord['quota'] | null;
  readonly budget: GroupRecord['budget'] | null;
  readonly alerts: readonly number[] | null;
}

/** A key naming a group itself (over its team's group). */
export interface GroupMemberKey {
  readonly id: string;
  readonly name: string;
  readonly team: string | null;
}

/** A group with who draws from it and its use now. */
export interface GroupDetail extends GroupView {
  readonly members: {
    /** The teams naming the group: their keys draw from it, unless a key names a group of its own. */
    readonly teams: readonly string[];
    /** The keys (not revoked) naming the group themselves. */
    readonly keys: readonly GroupMemberKey[];
  };
  /** Null when no ledger counts use (the limits are shown, `used` and `remaining` are null). */
  readonly metered: boolean;
  /** Each token and money limit of the group with its use in the window open now (tpm, quota, budget). */
  readonly use: readonly LimitUse[];
}

export function groupView(record: GroupRecord): GroupView {
  return {
    name: record.name,
    created_at: record.createdAt,
    tpm: record.tpm ?? null,
    quota: record.quota ?? null,
    budget: record.budget ?? null,
    alerts: record.alerts ?? null,
  };
}

/** What group views are built from. */
export interface GroupParts {
  readonly groups: Pick<GroupStore, 'list' | 'get'>;
  readonly keys: Pick<KeyStore, 'list'>;
  readonly teams?: Pick<TeamStore, 'list'>;
  /** Where use is read; without it the limits are shown with no use figures. */
  readonly limits?: Pick<LimitLedger, 'peek'>;
}

/**
 * The groups with their members and their use at `now`, read with one `peek` of every counter; with a
 * team scope (a team-scoped reader), only the groups a team of the scope draws from (the team names it,
 * or one of its keys does), their members within the scope.
 */
export async function groupDetails(
  parts: GroupParts,
  groups: readonly GroupRecord[],
  now: number,
  scope: TeamScope = 'all',
): Promise<GroupDetail[]> {
  const [keys, teams] = await Promise.all([parts.keys.list(), parts.teams?.list() ?? []]);
  const live = keys.filter((key) => keyStatus(key, now) !== 'revoked');
  const visible = groups
    .map((group) => ({ group, members: membersOf(group.name, live, teams, scope) }))
    .filter(({ members }) => scope === 'all' || members.teams.length + members.keys.length > 0);
  const use = await useOfMeters(
    visible.map(({ group }) => metersOfLimits('group', group.name, group, now, group.id)),
    parts.limits,
  );
  return visible.map(({ group, members }, index) => ({
    ...groupView(group),
    members,
    metered: parts.limits !== undefined,
    use: use[index]!,
  }));
}

function membersOf(
  name: string,
  keys: readonly ApiKeyRecord[],
  teams: readonly TeamRecord[],
  scope: TeamScope,
): GroupDetail['members'] {
  return {
    teams: teams
      .filter((team) => team.group === name && covers(scope, team.name))
      .map((team) => team.name)
      .sort(),
    keys: keys
      .filter((key) => key.group === name && (scope === 'all' || covers(scope, key.team)))
      .sort((a, b) => a.name.localeCompare(b.name) || a.id.localeCompare(b.id))
      .map((key) => ({ id: key.id, name: key.name, team: key.team ?? null })),
  };
}

/** 409: teams or keys that are not revoked still name the group, listed. */
export function groupInUse(name: string, members: GroupDetail['members']): GatewayError {
  const named = [...members.teams.map((team) => `team '${team}'`), ...members.keys.map((key) => `key '${key.id}'`)];
  return conflict(
    `Group '${name}' is named by ${named.join(', ')}; remove the group from ${named.length === 1 ? 'it' : 'them'} first`,
  );
}

/**
 * Deletes a group once no team and no key that is not revoked names it (409 listing them otherwise);
 * false when no group has the name.
 */
export async function deleteGroup(
  name: string,
  parts: GroupParts & { readonly groups: Pick<GroupStore, 'remove'> },
  now = Date.now(),
): Promise<boolean> {
  const group = await parts.groups.get(name);
  if (!group) return false;
  const [detail] = await groupDetails({ ...parts, limits: undefined }, [group], now);
  if (detail!.members.teams.length + detail!.members.keys.length > 0) throw groupInUse(name, detail!.members);
  return parts.groups.remove(name);
}

export interface GroupRoutesOptions extends GroupParts {
  readonly groups: GroupStore;
  readonly bodyLimitBytes?: number;
  readonly now?: () => number;
}

/** Where the current request may read groups: every group outside a request (the CLI), else its scope. */
function readScope(): TeamScope {
  const request = currentScope();
  return request ? (scopeOf(request.principal, 'groups.read') ?? new Set()) : 'all';
}

/**
 * The budget group operations, behind whatever guard mounts them: `POST /groups` (201; 409 when the
 * name is taken), `GET /groups` (each with its members and use), `GET /groups/:name`, `PATCH
 * /groups/:name` (each limit or `alerts` set, or null to remove it) and `DELETE /groups/:name` (409
 * naming the teams and keys that still name it). A missing group is 404; a team-scoped reader sees only
 * the groups its teams draw from.
 */
export function groupRoutes(options: GroupRoutesOptions): Router {
  const router = Router();
  const limit = options.bodyLimitBytes ?? 1024 * 1024;
  const now = options.now ?? Date.now;
  const detailOf = async (record: GroupRecord): Promise<GroupDetail> =>
    (await groupDetails(options, [record], now()))[0]!;
  router.post('/groups', async (req, res) => {
    const input = parseNewGroup(await readJsonObject(req, limit));
    res.status(201).json(await detailOf(await options.groups.create(input)));
  });
  router.get('/groups', async (_req, res) => {
    res.json({ object: 'list', data: await groupDetails(options, await options.groups.list(), now(), readScope()) });
  });
  router.get('/groups/:name', async (req, res) => {
    const name = String(req.params.name);
    const group = await options.groups.get(name);
    if (!group) throw groupNotFound(name);
    const scope = readScope();
    const [detail] = await groupDetails(options, [group], now(), scope);
    if (!detail) {
      throw refused(
        currentScope()!,
        'groups.read',
        { type: 'group', id: name, team: null },
        `Your role may read only the groups its teams draw from`,
      );
    }
    res.json(detail);
  });
  router.patch('/groups/:name', async (req, res) => {
    const name = String(req.params.name);
    const changes = parseGroupChanges(await readJsonObject(req, limit));
    const group = await options.groups.update(name, changes);
    if (!group) throw groupNotFound(name);
    res.json(await detailOf(group));
  });
  router.delete('/groups/:name', async (req, res) => {
    const name = String(req.params.name);
    if (!(await deleteGroup(name, options, now()))) throw groupNotFound(name);
    res.json({ name, deleted: true });
  });
  return router;
}
