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
const FIELDS = '(the fields are rpm, tpm, quota, budget)';

describe('admin API: end_user limits of keys and teams', () => {
  let dataDir: string;
  let keys: FileKeyStore;
  let teams: FileTeamStore;
  let app: GuardedApp;
  const logs = captureLogs();

  beforeEach(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'gateway-admin-end-user-'));
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

  it('creates a key with end_user limits, shows them, replaces them with a PATCH and removes them with null', async () => {
    const endUser = { rpm: 5, tpm: 2000, quota: { daily: 10_000 }, budget: { daily_usd: 0.5, monthly_usd: 5 } };
    const created = await send(app.url, '/admin/keys', { ...admin, body: { name: 'product', end_user: endUser } });
    expect(created.status).to.equal(201);
    expect(created.body.end_user).to.deep.equal(endUser);
    expect((await keys.list())[0]!.end_user).to.deep.equal(endUser);
    const id = created.body.id as string;
    const patched = await send(app.url, `/admin/keys/${id}`, {
      method: 'PATCH',
      ...admin,
      body: { end_user: { budget: { daily_usd: 1 } } },
    });
    expect(patched.status).to.equal(200);
    expect(patched.body.end_user).to.deep.equal({ budget: { daily_usd: 1 } });
    const removed = await send(app.url, `/admin/keys/${id}`, { method: 'PATCH', ...admin, body: { end_user: null } });
    expect(removed.body.end_user).to.equal(null);
    expect((await keys.list())[0]).to.not.have.property('end_user');
  });

  it('creates and patches a team with end_user limits', async () => {
    const created = await send(app.url, '/admin/teams', { ...admin, body: { name: 'product', end_user: { rpm: 3 } } });
    expect(created.status).to.equal(201);
    expect(created.body.end_user).to.deep.equal({ rpm: 3 });
    const patched = await send(app.url, '/admin/teams/product', {
      method: 'PATCH',
      ...admin,
      body: { end_user: { quota: { monthly: 900 } } },
    });
    expect(patched.body.end_user).to.deep.equal({ quota: { monthly: 900 } });
    expect((await teams.get('product'))!.end_user).to.deep.equal({ quota: { monthly: 900 } });
    const removed = await send(app.url, '/admin/teams/product', {
      method: 'PATCH',
      ...admin,
      body: { end_user: null },
    });
    expect(removed.body.end_user).to.equal(null);
  });

  it('answers 400 naming every bad end_user field, unknown ones included, for keys and teams alike', async () => {
    const bad = { rmp: 5, tpm: 0, quota: { daily: 1.5, weekly: 3 }, budget: { daily_usd: 0.0000001 } };
    const expected = [
      `Field 'end_user.rmp': unknown field ${FIELDS}`,
      "Field 'end_user.tpm': must be a positive integer",
      "Field 'end_user.quota.daily': must be a positive integer",
      "Field 'end_user.quota.weekly': unknown field (the fields are daily, monthly)",
      "Field 'end_user.budget.daily_usd': must have at most 6 decimals",
    ];
    const key = await send(app.url, '/admin/keys', { ...admin, body: { name: 'k', end_user: bad } });
    expect(key.status).to.equal(400);
    expect(key.body.errors).to.have.members(expected);
    const team = await send(app.url, '/admin/teams', { ...admin, body: { name: 't', end_user: bad } });
    expect(team.status).to.equal(400);
    expect(team.body.errors).to.have.members(expected);
    for (const [value, message] of [
      [{}, 'must give rpm, tpm, quota and/or budget'],
      [5, 'must be an object with rpm, tpm, quota and/or budget'],
      [[], 'must be an object with rpm, tpm, quota and/or budget'],
    ] as const) {
      const answer = await send(app.url, '/admin/keys', { ...admin, body: { name: 'k', end_user: value } });
      expect(answer.status, JSON.stringify(value)).to.equal(400);
      expect(answer.body.errors).to.deep.equal([`Field 'end_user': ${message}`]);
    }
    const created = await send(app.url, '/admin/keys', { ...admin, body: { name: 'k' } });
    const patched = await send(app.url, `/admin/keys/${created.body.id}`, {
      method: 'PATCH',
      ...admin,
      body: { end_user: { rpm: -1, x: 1 } },
    });
    expect(patched.status).to.equal(400);
    expect(patched.body.errors).to.have.members([
      "Field 'end_user.rpm': must be a positive integer",
      `Field 'end_user.x': unknown field ${FIELDS}`,
    ]);
    expect(await keys.list()).to.have.length(1);
    expect(await teams.list()).to.deep.equal([]);
  });
});
