/**
 * Who acts on the control plane and what they may do: roles scoped to teams, held by people signed in
 * through the identity provider, by service tokens, by the admin token (break-glass) and by the CLI.
 */

/** The roles, from the most to the least power. */
export const ROLES = ['admin', 'team-admin', 'viewer'] as const;
export type Role = (typeof ROLES)[number];

/**
 * One role over some teams: `admin` always over every team; `team-admin` over the teams named; `viewer`
 * over the teams named, or every team when `teams` is absent.
 */
export interface Grant {
  readonly role: Role;
  /** The team names the role holds over; absent: every team (only `admin` and `viewer`). */
  readonly teams?: readonly string[];
}

/** How an actor proved who it is (`gateway`: the gateway itself, as a limit alert firing). */
export type ActorKind = 'user' | 'service-token' | 'admin-token' | 'cli' | 'config' | 'gateway';

/** Who did something, as the audit log names it: ids and names, never a secret. */
export interface Actor {
  readonly kind: ActorKind;
  /** A user's subject at the issuer, a token's id, `admin-token`, the CLI's operating-system user, `config`. */
  readonly id: string;
  /** A person's e-mail or name, a token's name. */
  readonly name?: string;
  /** The roles held at the time, as `role` or `role:team,team`. */
  readonly roles: readonly string[];
}

/** An actor and the grants it holds now. */
export interface Principal {
  readonly actor: Omit<Actor, 'roles'>;
  readonly grants: readonly Grant[];
}

/** `admin`, `team-admin:blue,green`, `viewer` (every team). */
export function grantText(grant: Grant): string {
  return grant.teams === undefined ? grant.role : `${grant.role}:${grant.teams.join(',')}`;
}

/** The actor of a principal, its roles written out. */
export function actorOf(principal: Principal): Actor {
  return { ...principal.actor, roles: principal.grants.map(grantText) };
}

export const ADMIN_GRANT: Grant = { role: 'admin' };

/** One entry of the role mapping: the members of an identity-provider group hold a grant. */
export interface RoleMapping extends Grant {
  readonly group: string;
}

/** The grants a person's groups give under a mapping (each grant once); none: no role on this gateway. */
export function grantsOfGroups(mapping: readonly RoleMapping[], groups: readonly string[]): Grant[] {
  const member = new Set(groups);
  const grants = new Map<string, Grant>();
  for (const { group, ...grant } of mapping)
    if (member.has(group))
      grants.set(grantText(grant), grant.teams ? { role: grant.role, teams: grant.teams } : { role: grant.role });
  return [...grants.values()];
}
