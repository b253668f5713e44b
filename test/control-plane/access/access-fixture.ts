import { createHmac, randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { accountRouter } from '../../../src/control-plane/account/account-router.ts';
import { adminRouter, type AccessOptions } from '../../../src/control-plane/admin/admin-routes.ts';
import type { Grant, RoleMapping } from '../../../src/core/access.ts';
import { createLogger } from '../../../src/core/logger.ts';
import { ModelRegistry } from '../../../src/core/model-registry.ts';
import { endpointsOf } from '../../../src/data-plane/upstream/endpoint-pool.ts';
import { startAuditTrail, type AuditTrail } from '../../../src/ops/audit/audit-trail.ts';
import { loadPlugins } from '../../../src/plugins/load-plugins.ts';
import { FileAuditStore } from '../../../src/stores/audit/file-audit-store.ts';
import { EmbeddedGuardrailActionLog } from '../../../src/stores/guardrail-actions/embedded-guardrail-action-log.ts';
import { EmbeddedAlertLog } from '../../../src/stores/alerts/embedded-alert-log.ts';
import { FileKeyStore } from '../../../src/stores/keys/file-key-store.ts';
import { MemorySessionStore } from '../../../src/stores/session-store.ts';
import { FileTeamStore } from '../../../src/stores/teams/file-team-store.ts';
import { FileGroupStore } from '../../../src/stores/groups/file-group-store.ts';
import { FileTokenStore } from '../../../src/stores/tokens/file-token-store.ts';
import { EmbeddedUsageStore } from '../../../src/stores/usage/embedded-usage-store.ts';
import { startGuardedApp, type GuardedApp } from '../../data-plane/pipeline/guarded-app.ts';

export const ADMIN_TOKEN = 'access-fixture-admin-token-0123456789abcdef';

/** The roles a walk tries, each as an IdP group (page) and as a service token (admin API). */
export const ROLE_GRANTS: Readonly<Record<string, Grant>> = {
  admin: { role: 'admin' },
  'team-admin:blue': { role: 'team-admin', teams: ['blue'] },
  viewer: { role: 'viewer' },
  'viewer:blue': { role: 'viewer', teams: ['blue'] },
};

export const ROLE_MAPPING: RoleMapping[] = Object.entries(ROLE_GRANTS).map(([name, grant]) => ({
  group: `group-${name}`,
  ...grant,
}));

/** How one role calls: a bearer for `/admin`, a cookie and CSRF token for `/account/api`. */
export interface RoleCredentials {
  readonly bearer: string;
  readonly cookie: string;
  readonly csrf: string;
}

export interface AccessFixture {
  readonly app: GuardedApp;
  readonly dataDir: string;
  readonly keys: FileKeyStore;
  readonly teams: FileTeamStore;
  readonly groups: FileGroupStore;
  readonly tokens: FileTokenStore;
  readonly audit: FileAuditStore;
  readonly trail: AuditTrail;
  readonly admin: ReturnType<typeof adminRouter>;
  readonly account: ReturnType<typeof accountRouter>;
  /** Each role's credentials, and the admin token's (`admin-token`). */
  readonly roles: Readonly<Record<string, RoleCredentials>>;
  /** Signs a role in again (after a walk signed it out). */
  renew(name: string): Promise<void>;
  close(): Promise<void>;
}

/**
 * The admin API and the account page over one set of stores (teams blue and green, a key in each), with
 * every optional route on, the role mapping of {@link ROLE_MAPPING}, a signed-in session and a service
 * token per role, and an audit trail.
 */
export async function startAccessFixture(): Promise<AccessFixture> {
  const dataDir = await mkdtemp(join(tmpdir(), 'gateway-access-'));
  const keys = new FileKeyStore(dataDir);
  const teams = new FileTeamStore(dataDir);
  const groups = new FileGroupStore(dataDir);
  const tokens = new FileTokenStore(dataDir);
  const audit = new FileAuditStore(dataDir);
  const usage = await EmbeddedUsageStore.open(dataDir, createLogger('silent'));
  const sessions = new MemorySessionStore();
  const registry = new ModelRegistry(await loadPlugins(resolve('providers/manifest.json')));
  const source = {};
  const trail = startAuditTrail({ source, store: audit, logger: createLogger('silent') });
  for (const name of ['blue', 'green']) await teams.create({ name, rpm: 100, budget: { daily_usd: 10 } });
  for (const team of ['blue', 'green']) await keys.create({ name: `${team} key`, team });
  const access: AccessOptions = { tokens, audit, source, adminTokenEnabled: () => true };
  const options = {
    keys,
    teams,
    groups,
    usage,
    registry: () => registry,
    guardrailActions: new EmbeddedGuardrailActionLog(),
    bodyLimitBytes: 1024 * 1024,
    alerts: new EmbeddedAlertLog(),
  };
  const admin = adminRouter({
    token: ADMIN_TOKEN,
    ...options,
    health: async () => ({ readiness: { status: 'ok' }, providers: [], aliases: [] }),
    access,
  });
  const account = accountRouter({
    token: ADMIN_TOKEN,
    ...options,
    endpoints: endpointsOf(new Map()),
    readiness: async () => ({ status: 'ok' }),
    sessions,
    roles: () => ROLE_MAPPING,
    access,
  });
  const app = await startGuardedApp({ routers: { '/admin': admin, '/account': account } });
  const roles: Record<string, RoleCredentials> = {};
  const session = async (user?: { groups: string[] }) => {
    const id = randomBytes(32).toString('base64url');
    const csrf = randomBytes(32).toString('base64url');
    await sessions.put(createHmac('sha256', ADMIN_TOKEN).update(id).digest('hex'), {
      csrfToken: csrf,
      expiresAt: Date.now() + 3_600_000,
      ...(user && {
        user: {
          issuer: 'https://idp.example',
          subject: user.groups[0]!,
          email: `${user.groups[0]}@example.com`,
          groups: user.groups,
        },
      }),
    });
    return { cookie: `gw_account_session=${id}`, csrf };
  };
  for (const [name, grant] of Object.entries(ROLE_GRANTS)) {
    const { token } = await tokens.create({
      name: `walk ${name}`,
      grant,
      expiresAt: new Date(Date.now() + 86_400_000).toISOString(),
      createdBy: 'test',
    });
    roles[name] = { bearer: token, ...(await session({ groups: [`group-${name}`] })) };
  }
  roles['admin-token'] = { bearer: ADMIN_TOKEN, ...(await session()) };
  return {
    app,
    dataDir,
    keys,
    teams,
    groups,
    tokens,
    audit,
    trail,
    admin,
    account,
    roles,
    async renew(name) {
      roles[name] = {
        bearer: roles[name]!.bearer,
        ...(await session(name === 'admin-token' ? undefined : { groups: [`group-${name}`] })),
      };
    },
    async close() {
      await app.close();
      await trail.close();
      await usage.close();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}

export interface Reply {
  readonly status: number;
  readonly json: Record<string, any>;
  readonly text: string;
}

/** One call to `/admin` (bearer) or `/account/api` (cookie, CSRF token and this origin on writes). */
export async function callAs(
  fixture: AccessFixture,
  mount: '/admin' | '/account/api',
  method: string,
  path: string,
  credentials?: RoleCredentials,
  body?: unknown,
): Promise<Reply> {
  const headers: Record<string, string> = {};
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (credentials && mount === '/admin') headers.authorization = `Bearer ${credentials.bearer}`;
  if (credentials && mount === '/account/api') {
    headers.cookie = credentials.cookie;
    if (method !== 'GET') Object.assign(headers, { 'x-csrf-token': credentials.csrf, origin: fixture.app.url });
  }
  const response = await fetch(`${fixture.app.url}${mount}${path}`, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  let json: Record<string, any> = {};
  try {
    json = JSON.parse(text);
  } catch {
    /* a CSV */
  }
  return { status: response.status, json, text };
}
