import { ROLES, type Grant, type RoleMapping } from '../core/access.ts';
import { TEAM_NAME } from '../core/team-name.ts';
import { fieldName, type FieldPath } from './config-problems.ts';
import { envFlag, isHttpUrl, type Problem } from './config-values.ts';

/** Single sign-on with an OpenID Connect issuer (authorization code flow with PKCE). */
export interface OidcSettings {
  /** The issuer URL; its discovery document is read from `/.well-known/openid-configuration` below it. */
  readonly issuer: string;
  readonly clientId: string;
  /** `GATEWAY_OIDC_CLIENT_SECRET` (or `_FILE`); none for a public client. */
  readonly clientSecret?: string;
  /** The claim (ID token, else userinfo) that lists a person's groups. */
  readonly groupsClaim: string;
  /** Scopes asked for besides `openid` (default `profile`, `email`; many issuers want `groups` too). */
  readonly scopes: readonly string[];
  /**
   * Where the issuer sends people back; default: this gateway's `/account/api/sso/callback` as the browser reached it.
   */
  readonly redirectUri?: string;
}

/** Who may sign in to the account page and the admin API, and with which role. */
export interface AccessSettings {
  /** Whether the admin token is accepted (break-glass); applies live on a reload. */
  readonly adminToken: boolean;
  readonly oidc?: OidcSettings;
  /** IdP groups → roles; applies live on a reload. */
  readonly roles: readonly RoleMapping[];
}

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);
const GROUPS_CLAIM = /^[A-Za-z0-9_:/.#-]{1,200}$/;

function roleMapping(raw: unknown, problem: Problem): RoleMapping[] {
  if (raw === undefined || raw === null) return [];
  if (!Array.isArray(raw)) {
    problem('access.roles must be a list of { group, role, teams? } entries', ['access', 'roles']);
    return [];
  }
  const entries: RoleMapping[] = [];
  raw.forEach((item: unknown, index) => {
    const at: FieldPath = ['access', 'roles', index];
    const invalid = (field: string | undefined, text: string) =>
      problem(`${fieldName(field ? [...at, field] : at)} ${text}`, field ? [...at, field] : at);
    if (!isRecord(item)) return invalid(undefined, 'must be a mapping: { group, role, teams? }');
    const unknown = Object.keys(item).filter((field) => !['group', 'role', 'teams'].includes(field));
    if (unknown.length) return invalid(unknown[0], 'is not a known setting (group, role, teams)');
    const { group, role, teams } = item;
    if (typeof group !== 'string' || group === '' || group.length > 256)
      return invalid('group', 'must be the name of a group, 1 to 256 characters');
    if (typeof role !== 'string' || !ROLES.includes(role as Grant['role']))
      return invalid('role', `must be one of ${ROLES.join(', ')}`);
    if (
      teams !== undefined &&
      (!Array.isArray(teams) ||
        teams.length === 0 ||
        !teams.every((team) => typeof team === 'string' && TEAM_NAME.test(team)))
    ) {
      return invalid('teams', 'must be a non-empty list of team names');
    }
    if (role === 'admin' && teams !== undefined)
      return invalid('teams', 'must be left out for admin (an admin holds every team)');
    if (role === 'team-admin' && teams === undefined)
      return invalid('teams', 'is required for team-admin: the teams it manages');
    entries.push(
      teams ? { group, role: role as Grant['role'], teams: teams as string[] } : { group, role: role as Grant['role'] },
    );
  });
  return entries;
}

function oidcSettings(env: NodeJS.ProcessEnv, raw: unknown, problem: Problem): OidcSettings | undefined {
  const file = oidcFile(raw, problem);
  const text = (name: string, field: string) => oidcText(env, file, problem, name, field);
  const issuer = text('GATEWAY_OIDC_ISSUER', 'issuer');
  const clientId = text('GATEWAY_OIDC_CLIENT_ID', 'clientId');
  const redirectUri = text('GATEWAY_OIDC_REDIRECT_URI', 'redirectUri');
  const groupsClaim = text('GATEWAY_OIDC_GROUPS_CLAIM', 'groupsClaim') ?? 'groups';
  const clientSecret = env.GATEWAY_OIDC_CLIENT_SECRET || undefined;
  if (issuer === undefined && clientId === undefined) {
    if (clientSecret)
      problem(
        'GATEWAY_OIDC_CLIENT_SECRET is set but no issuer and client id (GATEWAY_OIDC_ISSUER, GATEWAY_OIDC_CLIENT_ID or access.oidc)',
      );
    return undefined;
  }
  checkIssuer(env, issuer, problem);
  if (clientId === undefined)
    problem('single sign-on needs a client id: GATEWAY_OIDC_CLIENT_ID or access.oidc.clientId', ['access', 'oidc']);
  if (redirectUri !== undefined && !isHttpUrl(redirectUri))
    badSetting(env, problem, 'GATEWAY_OIDC_REDIRECT_URI', 'redirectUri', 'must be an http:// or https:// URL');
  if (!GROUPS_CLAIM.test(groupsClaim))
    badSetting(env, problem, 'GATEWAY_OIDC_GROUPS_CLAIM', 'groupsClaim', 'must be a claim name');
  const scopes = oidcScopes(file.scopes, problem);
  if (issuer === undefined || clientId === undefined) return undefined;
  return { issuer, clientId, clientSecret, groupsClaim, scopes, redirectUri };
}

/** The file's `access.oidc` mapping (empty when absent or not one); refuses a field it does not know. */
function oidcFile(raw: unknown, problem: Problem): Record<string, unknown> {
  const file = isRecord(raw) ? raw : {};
  if (raw !== undefined && raw !== null && !isRecord(raw))
    problem('access.oidc must be a mapping: { issuer, clientId, groupsClaim, … }', ['access', 'oidc']);
  for (const field of Object.keys(file)) {
    if (!['issuer', 'clientId', 'groupsClaim', 'scopes', 'redirectUri'].includes(field)) {
      const text =
        field === 'clientSecret'
          ? 'is not read from the file: give it as GATEWAY_OIDC_CLIENT_SECRET (or GATEWAY_OIDC_CLIENT_SECRET_FILE)'
          : 'is not a known setting (issuer, clientId, groupsClaim, scopes, redirectUri)';
      problem(`access.oidc.${field} ${text}`, ['access', 'oidc', field]);
    }
  }
  return file;
}

/** A text setting of single sign-on: the environment variable `name` over the file's `field`; empty is unset. */
function oidcText(
  env: NodeJS.ProcessEnv,
  file: Record<string, unknown>,
  problem: Problem,
  name: string,
  field: string,
): string | undefined {
  const value = env[name] || file[field];
  if (value === undefined || value === '') return undefined;
  if (typeof value !== 'string')
    return void problem(`access.oidc.${field} must be a string`, ['access', 'oidc', field]);
  return value;
}

/** Reports a bad single sign-on setting where it was given: the environment variable `name` when set, else `field`. */
function badSetting(env: NodeJS.ProcessEnv, problem: Problem, name: string, field: string, text: string): void {
  problem(`${env[name] ? name : `access.oidc.${field}`} ${text}`, env[name] ? undefined : ['access', 'oidc', field]);
}

/** Refuses a missing issuer, and one that is not https (plain http only on a loopback host). */
function checkIssuer(env: NodeJS.ProcessEnv, issuer: string | undefined, problem: Problem): void {
  if (issuer === undefined)
    problem('single sign-on needs an issuer: GATEWAY_OIDC_ISSUER or access.oidc.issuer', ['access', 'oidc']);
  else if (!isHttpUrl(issuer))
    badSetting(env, problem, 'GATEWAY_OIDC_ISSUER', 'issuer', 'must be an http:// or https:// URL');
  else if (new URL(issuer).protocol === 'http:' && !isLoopback(new URL(issuer).hostname)) {
    badSetting(
      env,
      problem,
      'GATEWAY_OIDC_ISSUER',
      'issuer',
      'must be https:// (plain http is accepted for a loopback issuer only)',
    );
  }
}

/** The scopes asked for besides `openid` (default `profile`, `email`); refuses a list that is not of scope names. */
function oidcScopes(raw: unknown, problem: Problem): string[] {
  const scopes = raw ?? ['profile', 'email'];
  if (
    !Array.isArray(scopes) ||
    !scopes.every((scope) => typeof scope === 'string' && /^[\x21\x23-\x5B\x5D-\x7E]+$/.test(scope))
  ) {
    problem('access.oidc.scopes must be a list of scope names', ['access', 'oidc', 'scopes']);
  }
  return Array.isArray(scopes) ? (scopes as string[]).filter((scope) => scope !== 'openid') : [];
}

/** A loopback host name or address (a test or a sidecar issuer may use plain http there). */
export function isLoopback(hostname: string): boolean {
  return hostname === 'localhost' || hostname === '[::1]' || /^127\.\d+\.\d+\.\d+$/.test(hostname);
}

/**
 * The config file's `access:` section with its environment overrides: `adminToken` (`GATEWAY_ADMIN_TOKEN_ENABLED`),
 * `oidc` (`GATEWAY_OIDC_ISSUER`, `GATEWAY_OIDC_CLIENT_ID`, `GATEWAY_OIDC_CLIENT_SECRET`, `GATEWAY_OIDC_GROUPS_CLAIM`,
 * `GATEWAY_OIDC_REDIRECT_URI`) and the `roles` mapping. Every problem is reported at its field, never quoting a value.
 */
export function accessSettings(env: NodeJS.ProcessEnv, raw: unknown, problem: Problem): AccessSettings {
  const file = isRecord(raw) ? raw : {};
  if (raw !== undefined && raw !== null && !isRecord(raw))
    problem('access must be a mapping: { adminToken, oidc, roles }', ['access']);
  for (const field of Object.keys(file))
    if (!['adminToken', 'oidc', 'roles'].includes(field))
      problem(`access.${field} is not a known setting (adminToken, oidc, roles)`, ['access', field]);
  if (file.adminToken !== undefined && typeof file.adminToken !== 'boolean')
    problem('access.adminToken must be true or false', ['access', 'adminToken']);
  const adminToken =
    envFlag(env, 'GATEWAY_ADMIN_TOKEN_ENABLED', problem) ??
    (typeof file.adminToken === 'boolean' ? file.adminToken : true);
  return { adminToken, oidc: oidcSettings(env, file.oidc, problem), roles: roleMapping(file.roles, problem) };
}
