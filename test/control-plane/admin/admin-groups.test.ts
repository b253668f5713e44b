import { expect } from 'chai';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { adminRouter } from '../../../src/control-plane/admin/admin-routes.ts';
import { FileGroupStore } from '../../../src/stores/groups/file-group-store.ts';
import { FileKeyStore } from '../../../src/stores/keys/file-key-store.ts';
import { FileTeamStore } from '../../../src/stores/teams/file-team-store.ts';
import { captureLogs, send, startGuardedApp, type GuardedApp } from '../../data-plane/pipeline/guarded-app.ts';
import { callAs, startAccessFixture, type AccessFixture } from '../access/access-fixture.ts';

const TOKEN = 'admin-token-for-group-tests-0123456789abcdef';
const admin = { authorization: `Bearer ${TOKEN}` };
const NOW = Date.UTC(2030, 0, 15, 12);

describe('admin budget group API', () => {
  let dataDir: string;
  let keys: FileKeyStore;
  let teams: FileTeamStore;
  let groups: FileGroupStore;
  let app: GuardedApp;
  // What the counters hold: each counter peeked is answered from here (0 when absent).
  const counters = new Map<string, number>();

  beforeEach(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'gateway-admin-groups-'));
    keys = new FileKeyStore(dataDir);
    teams = new FileTeamStore(dataDir);
    groups = new FileGroupStore(dataDir);
    counters.clear();
    const limits = { peek: async (names: readonly string[]) => names.map((name) => counters.get(name) ?? 0) };
    const router = adminRouter({ token: TOKEN, keys, teams, groups, limits, now: () => NOW } as Parameters<
      typeof adminRouter
    >[0]);
    app = await startGuardedApp({ routers: { '/admin': router }, logger: captureLogs().logger });
  });
  afterEach(async () => {
    await app.close();
    await rm(dataDir, { recursive: true, force: true });
  });

  it('wants the admin token on every group route', async () => {
    const routes = [
      ['GET', '/admin/groups'],
      ['POST', '/admin/groups'],
      ['GET', '/admin/groups/a'],
      ['PATCH', '/admin/groups/a'],
      ['DELETE', '/admin/groups/a'],
    ] as const;
    for (const [method, path] of routes) {
      expect(await send(app.url, path, { method, body: { name: 'a' } }), `${method} ${path}`).to.deep.include({
        status: 401,
      });
    }
    expect(await groups.list()).to.deep.equal([]);
  });

  it('creates (201), lists, shows with members and use, patches and deletes a group', async () => {
    const created = await send(app.url, '/admin/groups', {
      ...admin,
      body: { name: 'dept', budget: { daily_usd: 100, monthly_usd: 2000 }, quota: { daily: 5000 } },
    });
    expect(created.status).to.equal(201);
    expect(created.body).to.deep.include({
      name: 'dept',
      tpm: null,
      quota: { daily: 5000 },
      budget: { daily_usd: 100, monthly_usd: 2000 },
      alerts: null,
      metered: true,
    });
    expect(created.body.members).to.deep.equal({ teams: [], keys: [] });
    const { id } = (await groups.get('dept'))!;
    counters.set(`group:${id}:budget:d:2030-01-15`, 12.5e9);
    counters.set(`group:${id}:quota:d:2030-01-15`, 4000);

    expect((await send(app.url, '/admin/teams', { ...admin, body: { name: 'sales', group: 'dept' } })).status).to.equal(
      201,
    );
    expect((await send(app.url, '/admin/teams', { ...admin, body: { name: 'support' } })).body.group).to.equal(null);
    expect(
      (await send(app.url, '/admin/teams/support', { method: 'PATCH', ...admin, body: { group: 'dept' } })).body.group,
    ).to.equal('dept');
    const key = await send(app.url, '/admin/keys', {
      ...admin,
      body: { name: 'analyst', team: 'sales', group: 'dept' },
    });
    expect(key.body).to.include({ group: 'dept', team: 'sales' });
    const revoked = await send(app.url, '/admin/keys', { ...admin, body: { name: 'gone', group: 'dept' } });
    await send(app.url, `/admin/keys/${revoked.body.id}/revoke`, { ...admin, method: 'POST' });

    const shown = await send(app.url, '/admin/groups/dept', { method: 'GET', ...admin });
    expect(shown.status).to.equal(200);
    expect(shown.body.members).to.deep.equal({
      teams: ['sales', 'support'],
      keys: [{ id: key.body.id, name: 'analyst', team: 'sales' }],
    });
    expect(shown.body.use).to.deep.equal([
      {
        kind: 'quota',
        period: 'day',
        unit: 'tokens',
        limit: 5000,
        used: 4000,
        remaining: 1000,
        resets_at: '2030-01-16T00:00:00.000Z',
      },
      {
        kind: 'budget',
        period: 'day',
        unit: 'usd',
        limit: 100,
        used: 12.5,
        remaining: 87.5,
        resets_at: '2030-01-16T00:00:00.000Z',
      },
      {
        kind: 'budget',
        period: 'month',
        unit: 'usd',
        limit: 2000,
        used: 0,
        remaining: 2000,
        resets_at: '2030-02-01T00:00:00.000Z',
      },
    ]);
    const listed = await send(app.url, '/admin/groups', { method: 'GET', ...admin });
    expect(listed.body).to.deep.equal({ object: 'list', data: [shown.body] });

    const patched = await send(app.url, '/admin/groups/dept', {
      method: 'PATCH',
      ...admin,
      body: { quota: null, tpm: 9000, alerts: [50, 100] },
    });
    expect(patched.body).to.deep.include({
      quota: null,
      tpm: 9000,
      alerts: [50, 100],
      budget: { daily_usd: 100, monthly_usd: 2000 },
    });
    expect(patched.body.use.map((use: { kind: string }) => use.kind)).to.deep.equal(['tpm', 'budget', 'budget']);

    const refused = await send(app.url, '/admin/groups/dept', { method: 'DELETE', ...admin });
    expect(refused.status).to.equal(409);
    expect(refused.body.detail).to.equal(
      `Group 'dept' is named by team 'sales', team 'support', key '${key.body.id}'; remove the group from them first`,
    );
    expect(await groups.get('dept')).to.not.equal(undefined);
    await send(app.url, '/admin/teams/sales', { method: 'PATCH', ...admin, body: { group: null } });
    await send(app.url, '/admin/teams/support', { method: 'PATCH', ...admin, body: { group: null } });
    const lastOne = await send(app.url, '/admin/groups/dept', { method: 'DELETE', ...admin });
    expect(lastOne.body.detail).to.equal(
      `Group 'dept' is named by key '${key.body.id}'; remove the group from it first`,
    );
    expect(
      (await send(app.url, `/admin/keys/${key.body.id}`, { method: 'PATCH', ...admin, body: { group: null } })).body
        .group,
    ).to.equal(null);
    expect((await send(app.url, '/admin/groups/dept', { method: 'DELETE', ...admin })).body).to.deep.equal({
      name: 'dept',
      deleted: true,
    });
    expect((await send(app.url, '/admin/groups/dept', { method: 'DELETE', ...admin })).status).to.equal(404);
    expect((await send(app.url, '/admin/groups/dept', { method: 'GET', ...admin })).body.detail).to.equal(
      "No budget group named 'dept'",
    );
  });

  it('answers 400 listing every bad field of a group, 409 for a name taken, and 400 for an empty change', async () => {
    const bad = await send(app.url, '/admin/groups', {
      ...admin,
      body: { name: 'no spaces', tpm: 0, budget: {}, alerts: [90, 50], rpm: 5 },
    });
    expect(bad.status).to.equal(400);
    expect(bad.body.errors).to.have.members([
      "Field 'name': must be 1 to 64 characters of letters, digits, ., _ and -",
      "Field 'tpm': must be a positive integer",
      "Field 'budget': must give daily_usd and/or monthly_usd",
      "Field 'alerts': must be a list of whole percents from 1 to 100 in ascending order, each once ([] for none)",
      "Field 'rpm': unknown field (the fields are name, tpm, quota, budget, alerts)",
    ]);
    expect((await send(app.url, '/admin/groups', { ...admin, body: { name: 'dept' } })).status).to.equal(201);
    expect((await send(app.url, '/admin/groups', { ...admin, body: { name: 'dept' } })).status).to.equal(409);
    const empty = await send(app.url, '/admin/groups/dept', { method: 'PATCH', ...admin, body: {} });
    expect(empty.body.errors).to.deep.equal(["Field 'body': must change at least one of tpm, quota, budget, alerts"]);
    const renamed = await send(app.url, '/admin/groups/dept', { method: 'PATCH', ...admin, body: { name: 'other' } });
    expect(renamed.body.errors[0]).to.match(/^Field 'name': cannot be changed: a group keeps its name/);
  });

  it('refuses a key or a team naming a group that does not exist (400), and clears one with null', async () => {
    const key = await send(app.url, '/admin/keys', { ...admin, body: { name: 'k', group: 'nowhere' } });
    expect(key.status).to.equal(400);
    expect(key.body.errors).to.deep.equal(["Field 'group': no group is named 'nowhere' (create it first)"]);
    const team = await send(app.url, '/admin/teams', { ...admin, body: { name: 't', group: 'nowhere' } });
    expect(team.body.errors).to.deep.equal(["Field 'group': no group is named 'nowhere' (create it first)"]);
    expect(
      (await send(app.url, '/admin/teams', { ...admin, body: { name: 't', group: 'bad name' } })).body.errors,
    ).to.deep.equal(["Field 'group': must be 1 to 64 characters of letters, digits, ., _ and -"]);
    expect((await send(app.url, '/admin/teams', { ...admin, body: { name: 't' } })).status).to.equal(201);
    expect(
      (await send(app.url, '/admin/teams/t', { method: 'PATCH', ...admin, body: { group: 'nowhere' } })).status,
    ).to.equal(400);
    expect(await keys.list()).to.deep.equal([]);
    expect((await teams.get('t'))!.group).to.equal(undefined);
  });
});

describe('admin budget group API: roles scoped to teams', function () {
  this.timeout(30_000);
  let fixture: AccessFixture;
  before(async () => {
    fixture = await startAccessFixture();
    await fixture.groups.create({ name: 'blues', budget: { daily_usd: 5 } });
    await fixture.groups.create({ name: 'greens' });
    await fixture.teams.update('blue', { group: 'blues' });
    await fixture.teams.update('green', { group: 'greens' });
  });
  after(async () => fixture.close());

  it('shows a team role only the groups its teams draw from, their members within its teams', async () => {
    for (const role of ['team-admin:blue', 'viewer:blue'] as const) {
      const listed = await callAs(fixture, '/admin', 'GET', '/groups', fixture.roles[role]);
      expect(
        listed.json.data.map((group: { name: string }) => group.name),
        role,
      ).to.deep.equal(['blues']);
      expect((await callAs(fixture, '/admin', 'GET', '/groups/greens', fixture.roles[role])).status, role).to.equal(
        403,
      );
    }
    const everything = await callAs(fixture, '/admin', 'GET', '/groups', fixture.roles.viewer);
    expect(everything.json.data.map((group: { name: string }) => group.name)).to.deep.equal(['blues', 'greens']);
  });

  it("leaves a key's group to an admin: a team admin may neither set nor clear it", async () => {
    const lead = fixture.roles['team-admin:blue']!;
    const made = await callAs(fixture, '/admin', 'POST', '/keys', lead, {
      name: 'grouped',
      team: 'blue',
      group: 'blues',
    });
    expect(made.status).to.equal(403);
    expect(made.json.detail).to.equal("Only an admin may set a key's group");
    const own = (await fixture.keys.list()).find((key) => key.team === 'blue')!;
    expect(
      (await callAs(fixture, '/admin', 'PATCH', `/keys/${own.id}`, fixture.roles.admin, { group: 'blues' })).status,
    ).to.equal(200);
    expect((await callAs(fixture, '/admin', 'PATCH', `/keys/${own.id}`, lead, { group: null })).status).to.equal(403);
    expect((await callAs(fixture, '/admin', 'PATCH', `/keys/${own.id}`, lead, { name: 'renamed' })).status).to.equal(
      200,
    );
    expect((await fixture.keys.list()).find((key) => key.id === own.id)).to.include({
      name: 'renamed',
      group: 'blues',
    });
    expect((await callAs(fixture, '/admin', 'POST', '/groups', lead, { name: 'mine' })).status).to.equal(403);
  });
});
