import type { Grant, Principal, Role } from '../../core/access.ts';

/**
 * What a route needs. `public`: nothing (sign-in); `signed-in`: any principal; the rest are held by
 * roles ({@link ROLE_PERMISSIONS}), over the teams of the grant that holds them.
 */
export const PERMISSIONS = {
  public: 'no credential: signing in',
  'signed-in': 'any signed-in user or token: who am I, sign out',
  'keys.read': 'list keys',
  'keys.write': 'create, change and revoke keys',
  'teams.read': 'list and read teams',
  'teams.write': 'create, change and delete teams',
  'groups.read': 'list and read budget groups, their members and use',
  'groups.write': 'create, change and delete budget groups',
  'limits.read': 'read limits and their use',
  'usage.read': 'read usage (JSON, CSV)',
  'cache.clear': 'empty response cache entries',
  'guardrails.read': 'list the configured guardrails and their recent actions',
  'models.read': 'list the canonical models',
  'health.read': 'read readiness, endpoints and aliases',
  'tokens.read': 'list service tokens',
  'tokens.write': 'create and revoke service tokens',
  'audit.read': 'read the audit log',
} as const;
export type Permission = keyof typeof PERMISSIONS;

const READ: readonly Permission[] = [
  'keys.read',
  'teams.read',
  'groups.read',
  'limits.read',
  'usage.read',
  'guardrails.read',
  'models.read',
  'health.read',
  'tokens.read',
  'audit.read',
];

/** The permissions of each role; `team-admin` and a `viewer` of named teams hold theirs over those teams only. */
export const ROLE_PERMISSIONS: Readonly<Record<Role, readonly Permission[]>> = {
  admin: (Object.keys(PERMISSIONS) as Permission[]).filter(
    (permission) => permission !== 'public' && permission !== 'signed-in',
  ),
  'team-admin': [...READ, 'keys.write', 'cache.clear', 'tokens.write'],
  viewer: READ,
};

/**
 * How a route's target is found, so a team-scoped role is refused outside its teams before the route
 * runs: `key` (the `:id` path parameter's key, by its team), `team` (the `:name` parameter), `usage`
 * (the `key_id` query parameter's key, when given), `cache` (`team` or `key_id` of the query; neither:
 * every team's entries).
 */
export type TargetRule = 'key' | 'team' | 'usage' | 'cache';

export interface RouteRule {
  readonly method: 'GET' | 'POST' | 'PATCH' | 'DELETE';
  /** As mounted, below `/admin` and `/account/api`. */
  readonly path: string;
  readonly permission: Permission;
  readonly target?: TargetRule;
}

/**
 * Every route of the management router, declared once with its permission; the router is mounted at
 * `/admin` (bearer: the admin token or a service token) and at `/account/api` (the session cookie and
 * its CSRF token). A route that is not declared here is refused to everyone.
 */
export const MANAGEMENT_ROUTES: readonly RouteRule[] = [
  { method: 'GET', path: '/whoami', permission: 'signed-in' },
  { method: 'GET', path: '/keys', permission: 'keys.read' },
  { method: 'POST', path: '/keys', permission: 'keys.write' },
  { method: 'PATCH', path: '/keys/:id', permission: 'keys.write', target: 'key' },
  { method: 'DELETE', path: '/keys/:id', permission: 'keys.write', target: 'key' },
  { method: 'POST', path: '/keys/:id/revoke', permission: 'keys.write', target: 'key' },
  { method: 'GET', path: '/teams', permission: 'teams.read' },
  { method: 'POST', path: '/teams', permission: 'teams.write' },
  { method: 'GET', path: '/teams/:name', permission: 'teams.read', target: 'team' },
  { method: 'PATCH', path: '/teams/:name', permission: 'teams.write', target: 'team' },
  { method: 'DELETE', path: '/teams/:name', permission: 'teams.write', target: 'team' },
  { method: 'GET', path: '/groups', permission: 'groups.read' },
  { method: 'POST', path: '/groups', permission: 'groups.write' },
  { method: 'GET', path: '/groups/:name', permission: 'groups.read' },
  { method: 'PATCH', path: '/groups/:name', permission: 'groups.write' },
  { method: 'DELETE', path: '/groups/:name', permission: 'groups.write' },
  { method: 'GET', path: '/limits', permission: 'limits.read' },
  { method: 'GET', path: '/alerts', permission: 'limits.read' },
  { method: 'GET', path: '/alerts/deliveries', permission: 'limits.read' },
  { method: 'GET', path: '/usage', permission: 'usage.read', target: 'usage' },
  { method: 'GET', path: '/usage.csv', permission: 'usage.read', target: 'usage' },
  { method: 'DELETE', path: '/cache', permission: 'cache.clear', target: 'cache' },
  { method: 'GET', path: '/guardrails', permission: 'guardrails.read' },
  { method: 'GET', path: '/guardrails/actions', permission: 'guardrails.read' },
  { method: 'GET', path: '/models', permission: 'models.read' },
  { method: 'GET', path: '/health', permission: 'health.read' },
  { method: 'GET', path: '/tokens', permission: 'tokens.read' },
  { method: 'POST', path: '/tokens', permission: 'tokens.write' },
  { method: 'DELETE', path: '/tokens/:id', permission: 'tokens.write' },
  { method: 'GET', path: '/audit', permission: 'audit.read' },
];

/** The account page's own routes around its session, in front of the management router at `/account/api`. */
export const SESSION_ROUTES: readonly RouteRule[] = [
  { method: 'GET', path: '/session', permission: 'public' },
  { method: 'POST', path: '/session', permission: 'public' },
  { method: 'DELETE', path: '/session', permission: 'signed-in' },
  { method: 'GET', path: '/sso', permission: 'public' },
  { method: 'GET', path: '/sso/callback', permission: 'public' },
];

/** Every team, or the named ones. */
export type TeamScope = 'all' | ReadonlySet<string>;

/**
 * Where a principal holds a permission: every team, the teams of the grants that hold it, or nowhere
 * (undefined). `public` and `signed-in` are held by everyone signed in, over every team.
 */
export function scopeOf(principal: Pick<Principal, 'grants'>, permission: Permission): TeamScope | undefined {
  if (permission === 'public' || permission === 'signed-in') return 'all';
  const teams = new Set<string>();
  let held = false;
  for (const grant of principal.grants) {
    if (!ROLE_PERMISSIONS[grant.role].includes(permission)) continue;
    if (grant.role === 'admin' || grant.teams === undefined) return 'all';
    held = true;
    for (const team of grant.teams) teams.add(team);
  }
  return held ? teams : undefined;
}

/** Whether a scope covers a team (a target in no team is covered only by every team). */
export function covers(scope: TeamScope | undefined, team: string | null | undefined): boolean {
  if (scope === undefined) return false;
  return scope === 'all' || (team !== null && team !== undefined && scope.has(team));
}

/**
 * Whether `held` grants cover a grant: an admin covers everything; a team admin of T covers team admins
 * and viewers of teams within T; a viewer of T (or every team) covers viewers of teams within T.
 */
export function grantCovered(held: readonly Grant[], wanted: Grant): boolean {
  if (held.some((grant) => grant.role === 'admin')) return true;
  if (wanted.role === 'admin') return false;
  const scope = scopeOf({ grants: held }, wanted.role === 'team-admin' ? 'keys.write' : 'keys.read');
  if (wanted.teams === undefined) return scope === 'all';
  return wanted.teams.every((team) => covers(scope, team));
}

/** A declared path as Express matches it (any case, a trailing slash allowed), each `:name` parameter captured. */
export function pathPattern(path: string): RegExp {
  const source = path
    .split('/')
    .map((segment) => (segment.startsWith(':') ? '([^/]+)' : segment.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
    .join('/');
  return new RegExp(`^${source}/?$`, 'i');
}
