import { expect } from 'chai';
import { readFile } from 'node:fs/promises';
import {
  covers,
  MANAGEMENT_ROUTES,
  PERMISSIONS,
  ROLE_PERMISSIONS,
  scopeOf,
  SESSION_ROUTES,
  type RouteRule,
  type TeamScope,
} from '../../../src/control-plane/access/permissions.ts';
import { routesOf } from '../../../src/control-plane/access/route-list.ts';
import { ROLES, type Grant } from '../../../src/core/access.ts';
import { callAs, ROLE_GRANTS, startAccessFixture, type AccessFixture } from './access-fixture.ts';

type Mount = '/admin' | '/account/api';

/**
 * A route as the walk calls it for a team: the path, the body, and the team the call is about (null: every team;
 * undefined: none).
 */
interface Call {
  readonly path: string;
  readonly body?: unknown;
  readonly team?: string | null;
}

/** The rule the table declares for a route the router serves; undefined when it declares none. */
function declared(mount: Mount, method: string, path: string): RouteRule | undefined {
  const rules = mount === '/admin' ? MANAGEMENT_ROUTES : [...SESSION_ROUTES, ...MANAGEMENT_ROUTES];
  return rules.find((rule) => rule.method === method && rule.path === path);
}

/** The routes a mount serves, read from the router itself (so a route added later is walked too). */
function served(fixture: AccessFixture, mount: Mount): { method: string; path: string }[] {
  if (mount === '/admin') return routesOf(fixture.admin);
  return routesOf(fixture.account)
    .filter((route) => route.path.startsWith('/api/'))
    .map((route) => ({ ...route, path: route.path.slice('/api'.length) }));
}

let unique = 0;

/** Fills a route for a call about `team`: its parameters, a body it takes, and what the call targets. */
async function callFor(fixture: AccessFixture, method: string, path: string, team: 'blue' | 'green'): Promise<Call> {
  unique += 1;
  const keyOf = async () => (await fixture.keys.list()).find((record) => record.team === team)!.id;
  const route = `${method} ${path}`;
  switch (route) {
    case 'POST /keys':
      return { path, body: { name: `walked ${unique}`, team }, team };
    case 'PATCH /keys/:id':
      return { path: `/keys/${await keyOf()}`, body: { name: `renamed ${unique}` }, team };
    case 'DELETE /keys/:id':
    case 'POST /keys/:id/revoke': {
      const { record } = await fixture.keys.create({ name: `to revoke ${unique}`, team });
      return { path: path.replace(':id', record.id), team };
    }
    case 'POST /teams':
      return { path, body: { name: `walked-${unique}` }, team: null };
    case 'PATCH /teams/:name':
      return { path: `/teams/${team}`, body: { rpm: 50 }, team };
    case 'GET /teams/:name':
    case 'DELETE /teams/:name':
      return { path: `/teams/${team}`, team };
    case 'GET /usage':
    case 'GET /usage.csv':
      return { path: `${path}?key_id=${await keyOf()}`, team };
    case 'DELETE /cache':
      return { path: `/cache?team=${team}`, team };
    case 'POST /tokens':
      return { path, body: { name: `walked ${unique}`, role: 'viewer', teams: [team] }, team };
    case 'DELETE /tokens/:id': {
      const { record } = await fixture.tokens.create({
        name: `to revoke ${unique}`,
        grant: { role: 'viewer', teams: [team] },
        expiresAt: new Date(Date.now() + 3_600_000).toISOString(),
        createdBy: 'test',
      });
      return { path: `/tokens/${record.id}`, team };
    }
    default:
      // A route the walk has no fixture for (added later): its parameters filled with the team's name.
      return { path: path.replace(/:[A-Za-z]+/g, team) };
  }
}

/** Whether a role may make a call, by the table: the permission over the call's team. */
function allowed(grant: Grant, rule: RouteRule, call: Call): boolean {
  const scope: TeamScope | undefined = scopeOf({ grants: [grant] }, rule.permission);
  return call.team === undefined ? scope !== undefined : covers(scope, call.team);
}

describe('access: every /admin and /account/api route, with every role and none, against the declared permission table', function () {
  this.timeout(120_000);
  let fixture: AccessFixture;
  let refusals = 0;

  before(async () => {
    fixture = await startAccessFixture();
  });
  after(async () => fixture?.close());

  for (const mount of ['/admin', '/account/api'] as const) {
    it(`declares a permission for every route ${mount} serves`, () => {
      const routes = served(fixture, mount);
      expect(routes.length).to.be.greaterThan(20);
      const undeclared = routes
        .filter((route) => !declared(mount, route.method, route.path))
        .map((route) => `${route.method} ${mount}${route.path}`);
      expect(undeclared, 'routes without a declared permission').to.deep.equal([]);
    });

    it(`answers each ${mount} route as the table says: 401 without credentials, 403 to a role without the permission over the target's team, neither to one with it`, async () => {
      const answers: string[] = [];
      const wrong: string[] = [];
      for (const route of served(fixture, mount)) {
        const rule = declared(mount, route.method, route.path)!;
        if (rule.permission === 'public') continue;
        const anonymous = await callFor(fixture, route.method, route.path, 'blue');
        const bare = await callAs(fixture, mount, route.method, anonymous.path, undefined, anonymous.body);
        if (bare.status !== 401)
          wrong.push(`${route.method} ${mount}${anonymous.path} without credentials: ${bare.status} ${bare.text}`);
        for (const team of ['blue', 'green'] as const) {
          for (const [name, grant] of [
            ...Object.entries(ROLE_GRANTS),
            ['admin-token', { role: 'admin' } as Grant] as const,
          ]) {
            const call = await callFor(fixture, route.method, route.path, team);
            const reply = await callAs(fixture, mount, route.method, call.path, fixture.roles[name], call.body);
            if (route.method === 'DELETE' && route.path === '/session') await fixture.renew(name);
            const expected = allowed(grant, rule, call);
            const refused = reply.status === 403 || reply.status === 401;
            if (reply.status === 403) refusals += 1;
            answers.push(`${route.method} ${call.path} ${name}: ${reply.status}`);
            if (expected === refused || (!expected && reply.status !== 403))
              wrong.push(
                `${route.method} ${mount}${call.path} as ${name} (${rule.permission}): ${reply.status}, expected ${expected ? 'not 401/403' : '403'}: ${reply.text}`,
              );
          }
        }
      }
      expect(wrong).to.deep.equal([]);
      expect(answers.length).to.be.greaterThan(150);
    });
  }

  it('keeps one audit record for each refusal (403) of the walk, naming the role and the permission', async () => {
    await fixture.trail.flush();
    const records = await fixture.audit.all();
    const refused = records.filter((record) => record.outcome === 'refused');
    expect(refused.length).to.equal(refusals);
    expect(
      refused.every((record) => record.actor !== null && record.reason !== null && record.address !== null),
    ).to.equal(true);
    expect(
      refused.some(
        (record) =>
          record.actor!.roles.includes('team-admin:blue') &&
          record.action === 'keys.write' &&
          record.target.team === 'green',
      ),
    ).to.equal(true);
  });

  it('is printed in docs/security.md as the table declares it', async () => {
    const doc = await readFile('docs/security.md', 'utf8');
    const cell = (role: (typeof ROLES)[number], rule: RouteRule) => {
      if (rule.permission === 'public') return 'anyone';
      if (rule.permission === 'signed-in') return 'yes';
      if (!ROLE_PERMISSIONS[role].includes(rule.permission)) return '—';
      return role === 'admin' ? 'yes' : role === 'team-admin' ? 'its teams' : 'its teams (all if none named)';
    };
    const rows = [
      ...MANAGEMENT_ROUTES.map((rule) => ['both', rule] as const),
      ...SESSION_ROUTES.map((rule) => ['account', rule] as const),
    ].map(
      ([where, rule]) =>
        `| \`${rule.method} ${rule.path}\` | ${where === 'both' ? '`/admin`, `/account/api`' : '`/account/api`'} | \`${rule.permission}\` | ${ROLES.map((role) => cell(role, rule)).join(' | ')} |`,
    );
    const table = [
      '| Route | Mounted at | Permission | admin | team-admin | viewer |',
      '|---|---|---|---|---|---|',
      ...rows,
    ].join('\n');
    expect(doc).to.include(table);
    for (const permission of Object.keys(PERMISSIONS)) expect(doc).to.include(`\`${permission}\``);
  });
});
