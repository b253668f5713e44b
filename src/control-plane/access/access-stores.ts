import type { ApiKeyRecord, NewKeyInput } from '../../core/api-keys.ts';
import type { CacheTenant, ResponseCache } from '../../core/response-cache.ts';
import type { EndUserSetting, Limits, TeamRecord } from '../../core/limits.ts';
import type { KeyChanges, KeyStore } from '../../stores/keys/key-store.ts';
import type { TeamChanges, TeamStore } from '../../stores/teams/team-store.ts';
import type { GroupChanges, GroupStore } from '../../stores/groups/group-store.ts';
import { groupView } from '../admin/group-routes.ts';
import type { UsageQuery, UsageRow, UsageStore } from '../../usage/usage-accounting.ts';
import type { GuardrailActionLog } from '../../stores/guardrail-actions/guardrail-action-log.ts';
import type { AlertLog } from '../../stores/alerts/alert-log.ts';
import { keyView } from '../admin/key-routes.ts';
import { teamView } from '../admin/team-routes.ts';
import type { EmptiedCache } from '../admin/cache-routes.ts';
import { keyInTeam } from '../../core/team-identity.ts';
import { covers, scopeOf, type Permission, type TeamScope } from './permissions.ts';
import { changed, currentScope, refused, type RequestScope } from './request-scope.ts';

/** The scope the current request holds `permission` over; every team outside a request (the CLI's own calls). */
function scopeNow(permission: Permission): { scope: TeamScope; request?: RequestScope } {
  const request = currentScope();
  return { scope: request ? (scopeOf(request.principal, permission) ?? new Set()) : 'all', request };
}

/** Each limit a key may carry above its team's, as `[field, key's, team's]`. */
function limitsAbove(key: Limits & EndUserSetting, team: TeamRecord): [string, number, number][] {
  const pairs: [string, number | undefined, number | undefined][] = [
    ['rpm', key.rpm, team.rpm],
    ['tpm', key.tpm, team.tpm],
    ['concurrency', key.concurrency, team.concurrency],
    ['quota.daily', key.quota?.daily, team.quota?.daily],
    ['quota.monthly', key.quota?.monthly, team.quota?.monthly],
    ['budget.daily_usd', key.budget?.daily_usd, team.budget?.daily_usd],
    ['budget.monthly_usd', key.budget?.monthly_usd, team.budget?.monthly_usd],
    ['end_user.rpm', key.end_user?.rpm, team.end_user?.rpm],
    ['end_user.tpm', key.end_user?.tpm, team.end_user?.tpm],
    ['end_user.quota.daily', key.end_user?.quota?.daily, team.end_user?.quota?.daily],
    ['end_user.quota.monthly', key.end_user?.quota?.monthly, team.end_user?.quota?.monthly],
    ['end_user.budget.daily_usd', key.end_user?.budget?.daily_usd, team.end_user?.budget?.daily_usd],
    ['end_user.budget.monthly_usd', key.end_user?.budget?.monthly_usd, team.end_user?.budget?.monthly_usd],
  ];
  return pairs.filter(
    (pair): pair is [string, number, number] => pair[1] !== undefined && pair[2] !== undefined && pair[1] > pair[2],
  );
}

/**
 * The keys of `records` that belong to their team as it is now: a key of an earlier team whose name a
 * later team took (see `keyInTeam`) is no key of that team, so a role scoped to the name does not get it.
 */
async function ofTeamsNow<K extends Pick<ApiKeyRecord, 'team' | 'teamId' | 'createdAt'>>(
  records: readonly K[],
  teams: Pick<TeamStore, 'get'> | undefined,
): Promise<K[]> {
  if (!teams) return [...records];
  const named = new Map<string, TeamRecord | undefined>();
  const names = new Set(records.flatMap((record) => (record.team === undefined ? [] : [record.team])));
  for (const name of names) named.set(name, await teams.get(name));
  return records.filter((record) => {
    const team = record.team === undefined ? undefined : named.get(record.team);
    return !team || keyInTeam(record, team);
  });
}

/**
 * The key store as the management routes see it: a team-scoped role lists only its teams' keys, and
 * creates or changes a key only in its teams, within the team's limits and without setting the key's
 * guardrails (an admin's choice); every change is published on the control-plane change channel.
 */
export function accessKeyStore(inner: KeyStore, teams: Pick<TeamStore, 'get'> | undefined): KeyStore {
  const checkTeamKey = teamKeyCheck(teams);
  return {
    get revision() {
      return inner.revision;
    },
    list: () => keysInScope(inner, teams),
    async create(input: NewKeyInput) {
      const { scope, request } = scopeNow('keys.write');
      if (request) await checkTeamKey(request, scope, 'key.create', input);
      const created = await inner.create(input);
      changed(
        'key.create',
        { type: 'key', id: created.record.id, team: created.record.team ?? null },
        null,
        keyView(created.record),
      );
      return created;
    },
    async update(id: string, changes: KeyChanges) {
      const { scope, request } = scopeNow('keys.write');
      const before = (await inner.list()).find((record) => record.id === id);
      if (request && before) await checkTeamKey(request, scope, 'key.update', changedKey(before, changes), id);
      const after = await inner.update(id, changes);
      if (after)
        changed('key.update', { type: 'key', id, team: after.team ?? null }, before && keyView(before), keyView(after));
      return after;
    },
    revoke: (id: string) => revokePublished(inner, id),
    findByHash: (hash) => inner.findByHash(hash),
    close: () => inner.close(),
  };
}

/** The keys the current request reads: every key, or those of its teams as they are now. */
async function keysInScope(inner: KeyStore, teams: Pick<TeamStore, 'get'> | undefined): Promise<ApiKeyRecord[]> {
  const { scope } = scopeNow('keys.read');
  const records = await inner.list();
  return scope === 'all'
    ? records
    : ofTeamsNow(
        records.filter((record) => covers(scope, record.team)),
        teams,
      );
}

/** Revokes a key and publishes the change: the key as it was, and revoked. */
async function revokePublished(inner: KeyStore, id: string): Promise<boolean> {
  const before = (await inner.list()).find((record) => record.id === id);
  const done = await inner.revoke(id);
  if (done && before)
    changed(
      'key.revoke',
      { type: 'key', id, team: before.team ?? null },
      keyView(before),
      keyView({ ...before, revoked: true }),
    );
  return done;
}

/**
 * A key as a change would leave it (a field given null removed, one absent kept), its guardrails as the change sets
 * them.
 */
function changedKey(before: ApiKeyRecord, changes: KeyChanges): Partial<ApiKeyRecord> {
  const next = { ...before } as Record<string, unknown>;
  for (const [field, value] of Object.entries(changes)) {
    if (value === null) delete next[field];
    else if (value !== undefined) next[field] = value;
  }
  return {
    ...(next as Partial<ApiKeyRecord>),
    guardrails: changes.guardrails === undefined ? undefined : (changes.guardrails ?? []),
    group: changes.group === undefined ? undefined : (changes.group ?? ''),
  };
}

/** A team admin's key stays in its teams and under their limits, and leaves its guardrails and group to an admin. */
function teamKeyCheck(teams: Pick<TeamStore, 'get'> | undefined) {
  return async (
    request: RequestScope,
    scope: TeamScope,
    action: string,
    key: Partial<ApiKeyRecord>,
    id?: string,
  ): Promise<void> => {
    if (scope === 'all') return;
    const target = { type: 'key' as const, id, team: key.team ?? null };
    if (!covers(scope, key.team)) {
      throw refused(
        request,
        action,
        target,
        key.team
          ? `Your role may not manage keys of team '${key.team}'`
          : 'Your role may manage only keys in its teams: name one of them in team',
      );
    }
    if (key.guardrails !== undefined)
      throw refused(request, action, target, "Only an admin may set a key's guardrails");
    // A group's budget is shared by teams: only an admin puts a key into one or takes it out.
    if (key.group !== undefined) throw refused(request, action, target, "Only an admin may set a key's group");
    const team = await teams?.get(key.team!);
    const above = team ? limitsAbove(key, team) : [];
    if (above.length > 0) {
      const listed = above
        .map(([field, value, limit]) => `${field} ${value} is above team '${key.team}''s ${limit}`)
        .join('; ');
      throw refused(request, action, target, `A key's limits may not exceed its team's: ${listed}`);
    }
  };
}

/** The team store as the management routes see it: a team-scoped role lists its teams only; changes are published. */
export function accessTeamStore(inner: TeamStore): TeamStore {
  return {
    get revision() {
      return inner.revision;
    },
    async list() {
      const { scope } = scopeNow('teams.read');
      const records = await inner.list();
      return scope === 'all' ? records : records.filter((record) => covers(scope, record.name));
    },
    // Not scoped: a key's team is looked up by name (the routes refuse other teams before).
    get: (name) => inner.get(name),
    async create(input) {
      const record = await inner.create(input);
      changed('team.create', { type: 'team', id: record.name, team: record.name }, null, teamView(record));
      return record;
    },
    async update(name: string, changes: TeamChanges) {
      const before = await inner.get(name);
      const after = await inner.update(name, changes);
      if (after)
        changed('team.update', { type: 'team', id: name, team: name }, before && teamView(before), teamView(after));
      return after;
    },
    async remove(name: string) {
      const before = await inner.get(name);
      const done = await inner.remove(name);
      if (done) changed('team.delete', { type: 'team', id: name, team: name }, before && teamView(before), null);
      return done;
    },
    deletedId: (name) => inner.deletedId(name),
    close: () => inner.close(),
  };
}

/** The group store as the management routes see it: changes are published (reads are scoped by the group routes). */
export function accessGroupStore(inner: GroupStore): GroupStore {
  return {
    get revision() {
      return inner.revision;
    },
    list: () => inner.list(),
    get: (name) => inner.get(name),
    async create(input) {
      const record = await inner.create(input);
      changed('group.create', { type: 'group', id: record.name, team: null }, null, groupView(record));
      return record;
    },
    async update(name: string, changes: GroupChanges) {
      const before = await inner.get(name);
      const after = await inner.update(name, changes);
      const target = { type: 'group', id: name, team: null } as const;
      if (after) changed('group.update', target, before && groupView(before), groupView(after));
      return after;
    },
    async remove(name: string) {
      const before = await inner.get(name);
      const done = await inner.remove(name);
      if (done) changed('group.delete', { type: 'group', id: name, team: null }, before && groupView(before), null);
      return done;
    },
    close: () => inner.close(),
  };
}

/** Sums rows of the same group (a team-scoped reader's usage is the sum over its keys). */
function sumRows(rows: UsageRow[], field: 'model' | 'day'): UsageRow[] {
  const groups = new Map<string, Record<string, unknown>>();
  for (const row of rows) {
    const group = String(row[field]);
    const sum = groups.get(group);
    if (!sum) groups.set(group, { ...row });
    else
      for (const [name, value] of Object.entries(row))
        if (typeof value === 'number') sum[name] = (sum[name] as number) + value;
  }
  return [...groups.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, row]) => row as UsageRow);
}

/** The usage store as the management routes see it: a team-scoped reader reads its teams' keys only. */
export function accessUsageStore(
  inner: UsageStore,
  keys: Pick<KeyStore, 'list'>,
  teams?: Pick<TeamStore, 'get'>,
): UsageStore {
  return {
    get healthy() {
      return inner.healthy;
    },
    record: (record) => inner.record(record),
    flush: () => inner.flush(),
    close: () => inner.close(),
    async query(query: UsageQuery) {
      const { scope } = scopeNow('usage.read');
      if (scope === 'all') return inner.query(query);
      const scoped = (await keys.list()).filter((record) => covers(scope, record.team));
      const mine = (await ofTeamsNow(scoped, teams)).map((record) => record.id);
      if (query.keyId !== undefined) return mine.includes(query.keyId) ? inner.query(query) : [];
      if (query.groupBy === 'key' || query.groupBy === 'end_user') {
        return (await inner.query(query)).filter((row) => mine.includes(row.key_id!));
      }
      const rows = await Promise.all(mine.map((keyId) => inner.query({ ...query, keyId })));
      return sumRows(rows.flat(), query.groupBy);
    },
  };
}

/** The guardrail action log as the management routes see it: a team-scoped reader sees its teams' actions. */
export function accessGuardrailActions(inner: Pick<GuardrailActionLog, 'recent'>): Pick<GuardrailActionLog, 'recent'> {
  return {
    async recent(limit) {
      const { scope } = scopeNow('guardrails.read');
      const kept = await inner.recent(limit);
      return scope === 'all' ? kept : kept.filter((entry) => covers(scope, entry.team));
    },
  };
}

/** The alert log as the management routes read it: a team role sees the alerts of its teams' keys and teams only. */
export function accessAlertLog(
  inner: Pick<AlertLog, 'lastFirings' | 'deliveries'>,
): Pick<AlertLog, 'lastFirings' | 'deliveries'> {
  const visible = <T extends { readonly team: string | null }>(entries: T[]): T[] => {
    const { scope } = scopeNow('limits.read');
    return scope === 'all' ? entries : entries.filter((entry) => covers(scope, entry.team));
  };
  return {
    lastFirings: async () => visible(await inner.lastFirings()),
    deliveries: async (limit) => visible(await inner.deliveries(limit)),
  };
}

/**
 * The response cache as the management routes see it: each clear is published, naming whose entries went
 * as the caller names them (`team:<name>`, `key:<id>`; a team's tenant holds its id, not its name).
 */
export function accessResponseCache(inner: ResponseCache): ResponseCache & EmptiedCache {
  return {
    get: (tenant, key) => inner.get(tenant, key),
    set: (tenant, key, answer, ttlMs) => inner.set(tenant, key, answer, ttlMs),
    delete: (tenant, key) => inner.delete(tenant, key),
    close: () => inner.close(),
    async clear(tenant?: CacheTenant, whose?: string) {
      const deleted = await inner.clear(tenant);
      const owner = whose ?? tenant;
      const team = owner?.startsWith('team:') ? owner.slice('team:'.length) : null;
      changed('cache.clear', { type: 'cache', id: owner ?? '*', team }, null, { tenant: owner ?? null, deleted });
      return deleted;
    },
  };
}
