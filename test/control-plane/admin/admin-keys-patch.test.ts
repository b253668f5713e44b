import { expect } from 'chai';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { adminRouter } from '../../../src/control-plane/admin/admin-routes.ts';
import { FileKeyStore } from '../../../src/stores/keys/file-key-store.ts';
import { FileTeamStore } from '../../../src/stores/teams/file-team-store.ts';
import { captureLogs, send, startGuardedApp, type GuardedApp } from '../../data-plane/pipeline/guarded-app.ts';
import { piiGuardrail } from '../../helpers/guardrail-fixtures.ts';

const TOKEN = 'admin-token-for-tests-0001-0123456789abcdef';
const admin = { authorization: `Bearer ${TOKEN}` };

describe('admin API: PATCH /admin/keys/{id}', () => {
  let dataDir: string;
  let keys: FileKeyStore;
  let teams: FileTeamStore;
  let app: GuardedApp;
  const logs = captureLogs();

  beforeEach(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'gateway-admin-keys-patch-'));
    keys = new FileKeyStore(dataDir);
    teams = new FileTeamStore(dataDir);
    app = await startGuardedApp({
      routers: {
        '/admin': adminRouter({
          token: TOKEN,
          keys,
          teams,
          guardrailSettings: () => ['no-emails', 'moderation'].map(piiGuardrail),
        }),
      },
      logger: logs.logger,
    });
  });
  afterEach(async () => {
    await app.close();
    await rm(dataDir, { recursive: true, force: true });
  });

  const patch = (id: string, body: unknown, headers: Record<string, string> = admin) =>
    send(app.url, `/admin/keys/${id}`, { method: 'PATCH', ...headers, body });

  it('wants the admin token', async () => {
    const created = await send(app.url, '/admin/keys', { ...admin, body: { name: 'svc', rpm: 5 } });
    expect(await patch(created.body.id, { rpm: 1 }, {})).to.deep.include({ status: 401 });
    expect(
      await patch(created.body.id, { rpm: 1 }, { authorization: 'Bearer wrong-token-0000000000' }),
    ).to.deep.include({ status: 401 });
    expect((await keys.list())[0]).to.include({ rpm: 5 });
  });

  it('sets, replaces, removes (null) and keeps (absent) each field, answering the key as GET /admin/keys shows it', async () => {
    await send(app.url, '/admin/teams', { ...admin, body: { name: 'research' } });
    const created = await send(app.url, '/admin/keys', {
      ...admin,
      body: {
        name: 'svc',
        rpm: 60,
        quota: { daily: 1000, monthly: 20_000 },
        budget: { daily_usd: 2 },
        models: ['alpha/gen-5.5'],
        expires_at: '2031-01-01T00:00:00Z',
      },
    });
    expect(created.status).to.equal(201);
    const { key: _key, ...view } = created.body;
    const id = view.id as string;

    // Set fields unset so far, replace an object limit whole, keep the rest.
    const first = await patch(id, {
      tpm: 5000,
      concurrency: 3,
      quota: { monthly: 9 },
      team: 'research',
      cache: false,
      guardrails: ['moderation'],
    });
    expect(first.status).to.equal(200);
    expect(first.body).to.deep.equal({
      ...view,
      tpm: 5000,
      concurrency: 3,
      quota: { monthly: 9 },
      team: 'research',
      cache: false,
      guardrails: ['moderation'],
    });
    expect(first.body).not.to.have.property('key');
    expect(first.body).not.to.have.property('hash');
    const listed = await send(app.url, '/admin/keys', { method: 'GET', ...admin });
    expect(listed.body.data).to.deep.equal([first.body]);

    // Remove with null: the stored record no longer carries the fields.
    const second = await patch(id, {
      rpm: null,
      quota: null,
      budget: null,
      models: null,
      expires_at: null,
      team: null,
      cache: null,
      guardrails: null,
      concurrency: null,
    });
    expect(second.body).to.deep.equal({
      ...view,
      rpm: null,
      quota: null,
      budget: null,
      models: null,
      expires_at: null,
      team: null,
      cache: null,
      guardrails: null,
      concurrency: null,
      tpm: 5000,
    });
    const stored = (await keys.list())[0]!;
    for (const field of ['rpm', 'quota', 'budget', 'models', 'expiresAt', 'team', 'cache', 'guardrails', 'concurrency'])
      expect(stored, field).not.to.have.property(field);
    expect(stored).to.include({ tpm: 5000, name: 'svc', id, revoked: false });

    // The name and the expiry can be changed too; the expiry is stored as an ISO date-time.
    const third = await patch(id, {
      name: 'renamed',
      expires_at: '2032-02-03T04:05:06+01:00',
      budget: { monthly_usd: 12.5 },
    });
    expect(third.body).to.deep.include({
      name: 'renamed',
      expires_at: '2032-02-03T03:05:06.000Z',
      budget: { monthly_usd: 12.5 },
      status: 'active',
      created_at: view.created_at,
    });
  });

  it('answers 404 for an unknown id and 409 for a revoked key, changing nothing', async () => {
    expect(await patch('key_nobody', { rpm: 1 })).to.deep.include({
      status: 404,
      body: { detail: "No API key with id 'key_nobody'" },
    });
    const created = await send(app.url, '/admin/keys', { ...admin, body: { name: 'gone', rpm: 5 } });
    await send(app.url, `/admin/keys/${created.body.id}/revoke`, admin);
    expect(await patch(created.body.id, { rpm: 1 })).to.deep.include({
      status: 409,
      body: { detail: `API key '${created.body.id}' is revoked; a revoked key cannot be changed (create a new one)` },
    });
    expect((await keys.list())[0]).to.include({ rpm: 5, revoked: true });
  });

  it('answers 400 listing every bad field, with the messages of POST /admin/keys', async () => {
    const created = await send(app.url, '/admin/keys', { ...admin, body: { name: 'svc', rpm: 5 } });
    const id = created.body.id as string;
    const body = {
      rpm: 0,
      tpm: 1.5,
      quota: { daily: -1, weekly: 3 },
      budget: { daily_usd: 0.0000001, monthly_usd: '5' },
      cache: 'false',
      models: [],
      expires_at: '2001-01-01T00:00:00Z',
      owner: 'x',
    };
    const bad = await patch(id, body);
    expect(bad.status).to.equal(400);
    const posted = await send(app.url, '/admin/keys', { ...admin, body: { name: 'x', ...body } });
    expect(bad.body.errors).to.have.members([...posted.body.errors]);
    expect(bad.body.errors).to.include.members([
      "Field 'rpm': must be a positive integer",
      "Field 'tpm': must be a positive integer",
      "Field 'owner': unknown field (the fields are name, rpm, concurrency, models, expires_at, quota, tpm, budget, team, group, cache, guardrails, end_user, alerts)",
      "Field 'quota.weekly': unknown field (the fields are daily, monthly)",
      "Field 'quota.daily': must be a positive integer",
      "Field 'budget.daily_usd': must have at most 6 decimals",
      "Field 'budget.monthly_usd': must be a positive number of USD",
      "Field 'cache': must be true or false",
      "Field 'models': must name at least one model (leave it out to allow every model)",
      "Field 'expires_at': must be in the future",
    ]);
    expect((await patch(id, {})).body.errors).to.deep.equal([
      "Field 'body': must change at least one of name, rpm, concurrency, models, expires_at, quota, tpm, budget, team, group, cache, guardrails, end_user, alerts",
    ]);
    expect((await patch(id, { name: null, budget: {} })).body.errors).to.have.members([
      "Field 'name': must be a string (a key keeps a name)",
      "Field 'budget': must give daily_usd and/or monthly_usd",
    ]);
    expect((await keys.list())[0]).to.include({ rpm: 5 });
    const notJson = await fetch(`${app.url}/admin/keys/${id}`, {
      method: 'PATCH',
      headers: { ...admin, 'content-type': 'application/json' },
      body: '[1]',
    });
    expect(notJson.status).to.equal(400);
  });

  it('checks a team and guardrails as POST /admin/keys does', async () => {
    const created = await send(app.url, '/admin/keys', { ...admin, body: { name: 'svc' } });
    const id = created.body.id as string;
    const bad = await patch(id, { team: 'nobody', guardrails: ['moderation', 'nope'] });
    const posted = await send(app.url, '/admin/keys', {
      ...admin,
      body: { name: 'x', team: 'nobody', guardrails: ['moderation', 'nope'] },
    });
    expect(bad.status).to.equal(400);
    expect(bad.body.errors).to.have.members(posted.body.errors);
    expect(bad.body.errors).to.include("Field 'team': no team is named 'nobody' (create it first)");
    expect(
      bad.body.errors.some((error: string) => error.startsWith("Field 'guardrails': no guardrail is named 'nope'")),
    ).to.equal(true);
    expect((await patch(id, { team: 'bad name' })).body.errors).to.deep.equal([
      "Field 'team': must be 1 to 64 characters of letters, digits, ., _ and -",
    ]);
    await send(app.url, '/admin/teams', { ...admin, body: { name: 'later' } });
    expect(await patch(id, { team: 'later', guardrails: [] })).to.deep.include({ status: 200 });
    expect((await keys.list())[0]).to.deep.include({ team: 'later', guardrails: [] });
    // A key naming the team keeps it from being deleted; removing the key's team frees it.
    expect((await send(app.url, '/admin/teams/later', { method: 'DELETE', ...admin })).status).to.equal(409);
    expect((await patch(id, { team: null })).body).to.include({ team: null });
    expect((await send(app.url, '/admin/teams/later', { method: 'DELETE', ...admin })).status).to.equal(200);
  });
});
