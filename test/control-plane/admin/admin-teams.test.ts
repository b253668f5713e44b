import { expect } from 'chai';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { adminRouter } from '../../../src/control-plane/admin/admin-routes.ts';
import { FileKeyStore } from '../../../src/stores/keys/file-key-store.ts';
import { FileTeamStore } from '../../../src/stores/teams/file-team-store.ts';
import { captureLogs, send, startGuardedApp, type GuardedApp } from '../../data-plane/pipeline/guarded-app.ts';

const TOKEN = 'admin-token-for-tests-0001-0123456789abcdef';
const admin = { authorization: `Bearer ${TOKEN}` };

describe("admin team API and the keys' budget fields", () => {
  let dataDir: string;
  let keys: FileKeyStore;
  let teams: FileTeamStore;
  let app: GuardedApp;
  const logs = captureLogs();

  beforeEach(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'gateway-admin-teams-'));
    keys = new FileKeyStore(dataDir);
    teams = new FileTeamStore(dataDir);
    app = await startGuardedApp({
      routers: { '/admin': adminRouter({ token: TOKEN, keys, teams }) },
      logger: logs.logger,
    });
  });
  afterEach(async () => {
    await app.close();
    await rm(dataDir, { recursive: true, force: true });
  });

  it('wants the admin token on every team route', async () => {
    for (const [method, path] of [
      ['GET', '/admin/teams'],
      ['POST', '/admin/teams'],
      ['GET', '/admin/teams/a'],
      ['PATCH', '/admin/teams/a'],
      ['DELETE', '/admin/teams/a'],
    ] as const) {
      expect(await send(app.url, path, { method, body: { name: 'a' } }), `${method} ${path}`).to.deep.include({
        status: 401,
      });
    }
    expect(await teams.list()).to.deep.equal([]);
  });

  it('creates (201), lists, gets, patches and deletes a team', async () => {
    const created = await send(app.url, '/admin/teams', {
      ...admin,
      body: {
        name: 'research',
        rpm: 60,
        tpm: 20_000,
        quota: { daily: 100_000 },
        budget: { daily_usd: 5, monthly_usd: 80.125 },
        concurrency: 40,
        cache: false,
      },
    });
    expect(created.status).to.equal(201);
    expect(created.body).to.deep.equal({
      name: 'research',
      created_at: created.body.created_at,
      rpm: 60,
      tpm: 20_000,
      quota: { daily: 100_000 },
      budget: { daily_usd: 5, monthly_usd: 80.125 },
      concurrency: 40,
      cache: false,
      guardrails: null,
      group: null,
      end_user: null,
      alerts: null,
    });
    expect(await send(app.url, '/admin/teams', { ...admin, body: { name: 'bare' } })).to.deep.include({ status: 201 });

    const listed = await send(app.url, '/admin/teams', { method: 'GET', ...admin });
    expect(listed.body).to.deep.equal({
      object: 'list',
      data: [
        created.body,
        {
          name: 'bare',
          created_at: listed.body.data[1].created_at,
          rpm: null,
          tpm: null,
          quota: null,
          budget: null,
          concurrency: null,
          cache: null,
          guardrails: null,
          group: null,
          end_user: null,
          alerts: null,
        },
      ],
    });
    expect(await send(app.url, '/admin/teams/research', { method: 'GET', ...admin })).to.deep.include({
      status: 200,
      body: created.body,
    });

    const patched = await send(app.url, '/admin/teams/research', {
      method: 'PATCH',
      ...admin,
      body: { rpm: null, tpm: 30_000, quota: { monthly: 9 } },
    });
    expect(patched).to.deep.include({
      status: 200,
      body: { ...created.body, rpm: null, tpm: 30_000, quota: { monthly: 9 } },
    });
    expect(await teams.get('research')).not.to.have.property('rpm');
    expect(await send(app.url, '/admin/teams/research', { method: 'PATCH', ...admin, body: {} })).to.deep.include({
      status: 200,
      body: patched.body,
    });

    // The cache setting: set to true (kept as set), then removed with null (the gateway's setting again).
    expect(
      await send(app.url, '/admin/teams/research', { method: 'PATCH', ...admin, body: { cache: true } }),
    ).to.deep.include({ status: 200, body: { ...patched.body, cache: true } });
    expect(await teams.get('research')).to.include({ cache: true });
    expect(
      await send(app.url, '/admin/teams/research', { method: 'PATCH', ...admin, body: { cache: null } }),
    ).to.deep.include({ status: 200, body: { ...patched.body, cache: null } });
    expect(await teams.get('research')).not.to.have.property('cache');

    expect(await send(app.url, '/admin/teams/bare', { method: 'DELETE', ...admin })).to.deep.include({
      status: 200,
      body: { name: 'bare', deleted: true },
    });
    expect(await teams.get('bare')).to.equal(undefined);
  });

  it('answers 409 for a name taken, and 404 for a team that does not exist', async () => {
    await send(app.url, '/admin/teams', { ...admin, body: { name: 'dup' } });
    expect(await send(app.url, '/admin/teams', { ...admin, body: { name: 'dup', rpm: 1 } })).to.deep.include({
      status: 409,
      body: { detail: "A team named 'dup' exists already" },
    });
    expect((await teams.get('dup'))?.rpm).to.equal(undefined);
    for (const method of ['GET', 'PATCH', 'DELETE']) {
      expect(
        await send(app.url, '/admin/teams/nobody', { method, ...admin, body: { rpm: 1 } }),
        method,
      ).to.deep.include({ status: 404, body: { detail: "No team named 'nobody'" } });
    }
  });

  it('answers 400, not 500, for a team or key name in the path that does not percent-decode', async () => {
    for (const [method, path] of [
      ['GET', '/admin/teams/%E0%A4%A'],
      ['PATCH', '/admin/teams/%ZZ'],
      ['DELETE', '/admin/teams/%E0%A4%A'],
      ['PATCH', '/admin/keys/%ZZ'],
      ['POST', '/admin/keys/%E0%A4%A/revoke'],
    ] as const) {
      const answer = await send(app.url, path, { method, ...admin, body: { rpm: 1 } });
      expect(answer.status, `${method} ${path}`).to.equal(400);
      expect(answer.body.detail, `${method} ${path}`).to.match(/^The request is not valid: Failed to decode param/);
    }
    expect(logs.text(), 'a client mistake is not logged as a gateway error').not.to.include('"level":50');
  });

  it('answers 400 listing every bad field, unknown fields included', async () => {
    const bad = await send(app.url, '/admin/teams', {
      ...admin,
      body: {
        name: 'has space',
        rpm: 0,
        tpm: 1.5,
        quota: { daily: -1, weekly: 3 },
        budget: { daily_usd: 0.0000001, monthly_usd: '5' },
        cache: 'false',
        owner: 'x',
      },
    });
    expect(bad.status).to.equal(400);
    expect(bad.body.errors).to.have.members([
      "Field 'owner': unknown field (the fields are name, rpm, tpm, quota, budget, concurrency, cache, guardrails, group, end_user, alerts)",
      "Field 'name': must be 1 to 64 characters of letters, digits, ., _ and -",
      "Field 'rpm': must be a positive integer",
      "Field 'tpm': must be a positive integer",
      "Field 'quota.weekly': unknown field (the fields are daily, monthly)",
      "Field 'quota.daily': must be a positive integer",
      "Field 'budget.daily_usd': must have at most 6 decimals",
      "Field 'budget.monthly_usd': must be a positive number of USD",
      "Field 'cache': must be true or false",
    ]);
    expect(
      (await send(app.url, '/admin/teams', { ...admin, body: { name: 'nulled', cache: null } })).body.errors,
    ).to.deep.equal(["Field 'cache': must be true or false"]);
    expect(
      (await send(app.url, '/admin/teams', { ...admin, body: { rpm: 5, budget: {} } })).body.errors,
    ).to.have.members(["Field 'name': is required", "Field 'budget': must give daily_usd and/or monthly_usd"]);
    expect((await send(app.url, '/admin/teams', { ...admin, body: { name: 'x'.repeat(65) } })).status).to.equal(400);
    // Past the largest budget, that alone is said (1e21 is no decimal number to count places of).
    expect(
      (await send(app.url, '/admin/teams', { ...admin, body: { name: 'rich', budget: { daily_usd: 1e21 } } })).body
        .errors,
    ).to.deep.equal(["Field 'budget.daily_usd': must be at most 1000000000 USD"]);
    await send(app.url, '/admin/teams', { ...admin, body: { name: 'ok' } });
    const patch = await send(app.url, '/admin/teams/ok', {
      method: 'PATCH',
      ...admin,
      body: { name: 'renamed', rpm: 'many', budget: { daily_usd: -2 }, cache: 0 },
    });
    expect(patch.status).to.equal(400);
    expect(patch.body.errors).to.have.members([
      "Field 'name': cannot be changed: a team keeps its name (the fields a change sets are rpm, tpm, quota, budget, concurrency, cache, guardrails, group, end_user, alerts)",
      "Field 'rpm': must be a positive integer",
      "Field 'budget.daily_usd': must be a positive number of USD",
      "Field 'cache': must be true or false",
    ]);
    expect(
      await send(app.url, '/admin/teams/ok', { method: 'PATCH', ...admin, body: { rpm: 2, quota: 'lots' } }),
    ).to.deep.include({ status: 400 });
    expect(
      await send(app.url, '/admin/teams/ok', { method: 'PATCH', ...admin, body: { cache: 'off' } }),
    ).to.deep.include({ status: 400 });
    expect((await teams.get('ok'))?.rpm).to.equal(undefined);
    expect(await teams.get('ok')).not.to.have.property('cache');
    const notJson = await fetch(`${app.url}/admin/teams`, {
      method: 'POST',
      headers: { ...admin, 'content-type': 'application/json' },
      body: '{"name":',
    });
    expect(notJson.status).to.equal(400);
    expect(notJson.headers.get('content-type')).to.contain('application/json');
  });

  it('names the field a PATCH does not know, and says a limit out of range once', async () => {
    await send(app.url, '/admin/teams', { ...admin, body: { name: 'ops' } });
    const key = await send(app.url, '/admin/keys', { ...admin, body: { name: 'svc' } });
    const team = await send(app.url, '/admin/teams/ops', { method: 'PATCH', ...admin, body: { rmp: 60 } });
    expect(team.body.errors).to.deep.equal([
      "Field 'rmp': unknown field (the fields are rpm, tpm, quota, budget, concurrency, cache, guardrails, group, end_user, alerts)",
    ]);
    const patchKey = (body: unknown) =>
      send(app.url, `/admin/keys/${key.body.id}`, { method: 'PATCH', ...admin, body });
    const keyPatch = await patchKey({ rmp: 60, quota: { dayly: 5 } });
    expect(keyPatch.body.errors).to.have.members([
      "Field 'rmp': unknown field " +
        '(the fields are name, rpm, concurrency, models, expires_at, quota, tpm, budget, team, group, cache, guardrails, end_user, alerts)',
      "Field 'quota.dayly': unknown field (the fields are daily, monthly)",
    ]);
    for (const rpm of [-1.5, 0.5, 0, -3, 2 ** 60]) {
      const refused = await send(app.url, '/admin/teams/ops', { method: 'PATCH', ...admin, body: { rpm } });
      expect(refused.body.errors, String(rpm)).to.deep.equal(["Field 'rpm': must be a positive integer"]);
      const refusedKey = await patchKey({ rpm });
      expect(refusedKey.body.errors, String(rpm)).to.deep.equal(["Field 'rpm': must be a positive integer"]);
    }
  });

  it('gives keys tpm, budget and a team that must exist, shown null when absent', async () => {
    await send(app.url, '/admin/teams', { ...admin, body: { name: 'research' } });
    const created = await send(app.url, '/admin/keys', {
      ...admin,
      body: { name: 'svc', tpm: 5000, budget: { daily_usd: 1.5 }, team: 'research' },
    });
    expect(created.status).to.equal(201);
    expect(created.body).to.deep.include({ tpm: 5000, budget: { daily_usd: 1.5 }, team: 'research', quota: null });
    expect((await keys.list())[0]).to.deep.include({ tpm: 5000, budget: { daily_usd: 1.5 }, team: 'research' });
    const listed = await send(app.url, '/admin/keys', { method: 'GET', ...admin });
    expect(listed.body.data[0]).to.deep.include({ tpm: 5000, budget: { daily_usd: 1.5 }, team: 'research' });
    const plain = await send(app.url, '/admin/keys', { ...admin, body: { name: 'plain' } });
    expect(plain.body).to.deep.include({ tpm: null, budget: null, team: null });

    const bad = await send(app.url, '/admin/keys', {
      ...admin,
      body: { name: 'x', tpm: 0, budget: { daily_usd: 'a lot' }, team: 'nobody' },
    });
    expect(bad.status).to.equal(400);
    expect(bad.body.errors).to.have.members([
      "Field 'tpm': must be a positive integer",
      "Field 'budget.daily_usd': must be a positive number of USD",
      "Field 'team': no team is named 'nobody' (create it first)",
    ]);
    expect(
      (await send(app.url, '/admin/keys', { ...admin, body: { name: 'x', team: 'bad name' } })).body.errors,
    ).to.deep.equal(["Field 'team': must be 1 to 64 characters of letters, digits, ., _ and -"]);
    expect(await keys.list()).to.have.length(2);
  });

  it('refuses to delete a team while keys that are not revoked name it (409 saying how many)', async () => {
    await send(app.url, '/admin/teams', { ...admin, body: { name: 'busy' } });
    const one = await send(app.url, '/admin/keys', { ...admin, body: { name: 'one', team: 'busy' } });
    const two = await send(app.url, '/admin/keys', { ...admin, body: { name: 'two', team: 'busy' } });
    await send(app.url, '/admin/keys', { ...admin, body: { name: 'elsewhere' } });
    expect(await send(app.url, '/admin/teams/busy', { method: 'DELETE', ...admin })).to.deep.include({
      status: 409,
      body: { detail: "Team 'busy' is named by 2 keys that are not revoked; revoke them first" },
    });
    await send(app.url, `/admin/keys/${one.body.id}/revoke`, admin);
    expect((await send(app.url, '/admin/teams/busy', { method: 'DELETE', ...admin })).body.detail).to.equal(
      "Team 'busy' is named by 1 key that is not revoked; revoke it first",
    );
    expect(await teams.get('busy')).not.to.equal(undefined);
    await send(app.url, `/admin/keys/${two.body.id}`, { method: 'DELETE', ...admin });
    expect(await send(app.url, '/admin/teams/busy', { method: 'DELETE', ...admin })).to.deep.include({
      status: 200,
      body: { name: 'busy', deleted: true },
    });
  });
});
