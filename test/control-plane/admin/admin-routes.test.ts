import { expect } from 'chai';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { adminRouter, canonicalModelIds } from '../../../src/control-plane/admin/admin-routes.ts';
import { hashApiKey } from '../../../src/core/api-keys.ts';
import { createAuthenticator } from '../../../src/data-plane/pipeline/authenticate.ts';
import { FileKeyStore } from '../../../src/stores/keys/file-key-store.ts';
import { FileTeamStore } from '../../../src/stores/teams/file-team-store.ts';
import { loadPlugins } from '../../../src/plugins/load-plugins.ts';
import { ModelRegistry } from '../../../src/core/model-registry.ts';
import { captureLogs, send, startGuardedApp, type GuardedApp } from '../../data-plane/pipeline/guarded-app.ts';

const TOKEN = 'admin-token-for-tests-0001-0123456789abcdef';
const admin = { authorization: `Bearer ${TOKEN}` };

describe('admin key API', () => {
  let dataDir: string;
  let keys: FileKeyStore;
  let teams: FileTeamStore;
  let registry: ModelRegistry;
  let app: GuardedApp;
  const logs = captureLogs();

  before(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'gateway-admin-'));
    keys = new FileKeyStore(dataDir);
    teams = new FileTeamStore(dataDir);
    registry = new ModelRegistry(await loadPlugins(resolve('providers/manifest.json')));
    app = await startGuardedApp({
      model: [createAuthenticator({ store: keys, logger: logs.logger })],
      routers: { '/admin': adminRouter({ token: TOKEN, keys, teams, registry: () => registry }) },
      logger: logs.logger,
    });
  });
  after(async () => {
    await app.close();
    await rm(dataDir, { recursive: true, force: true });
  });

  it('wants the admin token, compared whole', async () => {
    expect(await send(app.url, '/admin/keys', { method: 'GET' })).to.deep.include({
      status: 401,
      body: { detail: 'Missing admin token: send Authorization: Bearer <GATEWAY_ADMIN_TOKEN>' },
    });
    for (const authorization of [`Bearer ${TOKEN}x`, `Bearer ${TOKEN.slice(0, -1)}`, `Basic ${TOKEN}`, TOKEN]) {
      expect(await send(app.url, '/admin/keys', { method: 'GET', authorization })).to.deep.include({
        status: 401,
        body: { detail: 'Invalid admin token' },
      });
    }
  });

  it('creates a key shown once (201), lists keys without hashes or keys, and revokes by id', async () => {
    const created = await send(app.url, '/admin/keys', {
      ...admin,
      body: {
        name: 'svc',
        rpm: 10,
        concurrency: 4,
        models: ['alpha/gen-5.5'],
        expires_at: '2031-01-01T00:00:00Z',
        quota: { daily: 1000 },
        cache: false,
      },
    });
    expect(created.status).to.equal(201);
    const { key, id } = created.body as { key: string; id: string };
    expect(key).to.match(/^sk-[A-Za-z0-9_-]{43}$/);
    expect(created.body).to.deep.equal({
      id,
      name: 'svc',
      status: 'active',
      created_at: created.body.created_at,
      expires_at: '2031-01-01T00:00:00.000Z',
      revoked: false,
      models: ['alpha/gen-5.5'],
      rpm: 10,
      concurrency: 4,
      quota: { daily: 1000 },
      tpm: null,
      budget: null,
      team: null,
      group: null,
      cache: false,
      guardrails: null,
      end_user: null,
      alerts: null,
      key,
    });
    expect(await send(app.url, '/v1/chat/completions', { key })).to.deep.include({ status: 200 });

    const listed = await send(app.url, '/admin/keys', { method: 'GET', ...admin });
    expect(listed.status).to.equal(200);
    expect(listed.body.object).to.equal('list');
    expect(listed.body.data.map((view: { id: string }) => view.id)).to.include(id);
    expect(listed.body.data.find((view: { id: string }) => view.id === id)).to.include({ cache: false });
    expect(JSON.stringify(listed.body)).not.to.contain(key);
    expect(JSON.stringify(listed.body)).not.to.contain(hashApiKey(key));

    expect(await send(app.url, `/admin/keys/${id}`, { method: 'DELETE', ...admin })).to.deep.include({
      status: 200,
      body: { id, revoked: true },
    });
    expect(await send(app.url, '/v1/chat/completions', { key })).to.deep.include({
      status: 403,
      body: { detail: 'This API key has been revoked' },
    });
    const second = await send(app.url, '/admin/keys', { ...admin, body: { name: 'other' } });
    expect(await send(app.url, `/admin/keys/${second.body.id}/revoke`, { ...admin })).to.deep.include({ status: 200 });
    expect(await send(app.url, '/admin/keys/key_unknown', { method: 'DELETE', ...admin })).to.deep.include({
      status: 404,
      body: { detail: "No API key with id 'key_unknown'" },
    });

    expect(await readFile(keys.path, 'utf8')).not.to.contain(key);
    expect(logs.text()).not.to.contain(key);
    expect(logs.text()).not.to.contain(TOKEN);
  });

  it('answers 400 with every bad field', async () => {
    const answer = await send(app.url, '/admin/keys', {
      ...admin,
      body: {
        rpm: 0,
        concurrency: 2.5,
        models: ['alpha-latest', 'alpha/gen-5.5', 7],
        expires_at: '2020-01-01T00:00:00Z',
        quota: { daily: 1.5 },
        cache: 'no',
        extra: true,
      },
    });
    expect(answer.status).to.equal(400);
    expect(answer.body.detail).to.equal('Invalid input parameters');
    expect(answer.body.errors).to.have.members([
      "Field 'extra': unknown field (the fields are name, rpm, concurrency, models, expires_at, quota, tpm, budget, team, group, cache, guardrails, end_user, alerts)",
      "Field 'name': is required",
      "Field 'rpm': must be a positive integer",
      "Field 'concurrency': must be a positive integer",
      "Field 'cache': must be true or false",
      "Field 'models[2]': must be a model ID",
      "Field 'expires_at': must be in the future",
      "Field 'quota.daily': must be a positive integer",
      "Field 'models': 'alpha-latest' is not a canonical model ID of this gateway (name concrete models such as vendor/model, not aliases)",
    ]);
    expect(
      (await send(app.url, '/admin/keys', { ...admin, body: { name: 'x', expires_at: 'soon' } })).body.errors,
    ).to.deep.equal(["Field 'expires_at': must be an ISO 8601 date-time such as 2030-01-31T00:00:00Z"]);
    expect((await send(app.url, '/admin/keys', { ...admin, body: { name: 'x', rpm: '5' } })).body.errors).to.deep.equal(
      ["Field 'rpm': must be a positive integer"],
    );
    for (const cache of ['false', 0, 1, null, {}]) {
      const refused = await send(app.url, '/admin/keys', { ...admin, body: { name: 'x', cache } });
      expect(refused, JSON.stringify(cache)).to.deep.include({
        status: 400,
        body: { detail: 'Invalid input parameters', errors: ["Field 'cache': must be true or false"] },
      });
      expect(refused.headers.get('content-type')).to.contain('application/json');
    }
  });

  it("keeps a key's cache setting as set: true stays true, absent stays null", async () => {
    const on = await send(app.url, '/admin/keys', { ...admin, body: { name: 'cached', cache: true } });
    expect(on).to.deep.include({ status: 201 });
    expect(on.body.cache).to.equal(true);
    const plain = await send(app.url, '/admin/keys', { ...admin, body: { name: 'plain' } });
    expect(plain.body.cache).to.equal(null);
    const records = await keys.list();
    expect(records.find((record) => record.id === on.body.id)).to.include({ cache: true });
    expect(records.find((record) => record.id === plain.body.id)).not.to.have.property('cache');
  });

  it('knows the canonical model IDs from the registry', () => {
    const ids = canonicalModelIds(registry);
    expect(ids.has('alpha/gen-5.5')).to.equal(true);
    expect(ids.has('alpha-latest')).to.equal(false);
  });

  it('does not exist without a token', async () => {
    const closed = await startGuardedApp({ routers: { '/admin': adminRouter({ token: undefined, keys, teams }) } });
    try {
      expect(await send(closed.url, '/admin/keys', { method: 'GET', ...admin })).to.deep.include({
        status: 404,
        body: { detail: 'No route for GET /admin/keys' },
      });
      expect(await send(closed.url, '/admin/keys', { ...admin, body: { name: 'x' } })).to.deep.include({ status: 404 });
    } finally {
      await closed.close();
    }
  });
});
