import { expect } from 'chai';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { accountRouter, type AccountRouterOptions } from '../../../src/control-plane/account/account-router.ts';
import { adminRouter } from '../../../src/control-plane/admin/admin-routes.ts';
import { createLogger } from '../../../src/core/logger.ts';
import { ModelRegistry } from '../../../src/core/model-registry.ts';
import { endpointsOf } from '../../../src/data-plane/upstream/endpoint-pool.ts';
import type { GuardrailSettings } from '../../../src/guardrails/guardrail-settings.ts';
import { loadPlugins } from '../../../src/plugins/load-plugins.ts';
import { FileKeyStore } from '../../../src/stores/keys/file-key-store.ts';
import { MemorySessionStore } from '../../../src/stores/session-store.ts';
import { FileTeamStore } from '../../../src/stores/teams/file-team-store.ts';
import { EmbeddedUsageStore } from '../../../src/stores/usage/embedded-usage-store.ts';
import { buildUsageRecord } from '../../../src/usage/usage-accounting.ts';
import { startGuardedApp, type GuardedApp } from '../../data-plane/pipeline/guarded-app.ts';
import { call, signIn as signInWith } from './account-api-client.ts';

const TOKEN = 'account-teams-admin-token-0123456789abcdef';
const WEBHOOK_SECRET = 'webhook-bearer-never-shown';

const GUARDRAILS: GuardrailSettings[] = [
  { name: 'no-emails', use: 'pii', on: 'both', action: 'redact', entities: ['email'] },
  { name: 'no-codes', use: 'regex', on: 'request', action: 'block', patterns: ['CODE-\\d+'], ignoreCase: false },
  {
    name: 'moderation',
    use: 'webhook',
    on: 'response',
    url: 'https://moderation.internal.example/check',
    timeoutMs: 500,
    failMode: 'closed',
    headers: { authorization: `Bearer ${WEBHOOK_SECRET}` },
  },
];

describe('account page: teams, configured guardrails and usage per key and team', () => {
  let dataDir: string;
  let keys: FileKeyStore;
  let teams: FileTeamStore;
  let usage: EmbeddedUsageStore;
  let registry: ModelRegistry;
  let configured: GuardrailSettings[];
  const clock = Date.parse('2026-11-23T12:00:00Z');
  const apps: GuardedApp[] = [];

  async function start(overrides: Partial<AccountRouterOptions> = {}): Promise<GuardedApp> {
    const router = accountRouter({
      token: TOKEN,
      keys,
      teams,
      usage,
      registry: () => registry,
      endpoints: endpointsOf(new Map()),
      readiness: async () => ({ status: 'ok' }),
      sessions: new MemorySessionStore(() => clock),
      now: () => clock,
      guardrailSettings: () => configured,
      ...overrides,
    });
    const app = await startGuardedApp({ routers: { '/account': router } });
    apps.push(app);
    return app;
  }

  const signIn = (app: GuardedApp) => signInWith(app, TOKEN);

  before(async () => {
    registry = new ModelRegistry(await loadPlugins(resolve('providers/manifest.json')));
  });
  beforeEach(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'gateway-account-teams-'));
    keys = new FileKeyStore(dataDir);
    teams = new FileTeamStore(dataDir);
    usage = await EmbeddedUsageStore.open(dataDir, createLogger('silent'));
    configured = [...GUARDRAILS];
  });
  afterEach(async () => {
    await Promise.all(apps.splice(0).map((app) => app.close()));
    await usage.close();
    await keys.close();
    await teams.close();
    await rm(dataDir, { recursive: true, force: true });
  });

  it("runs the admin API's team operations behind the session, writes only with the CSRF token", async () => {
    const app = await start();
    expect((await call(app, '/account/api/teams')).status).to.equal(401);
    const { cookie, csrf } = await signIn(app);
    const body = { name: 'support', rpm: 60, budget: { daily_usd: 5 }, cache: false, guardrails: ['no-emails'] };
    expect((await call(app, '/account/api/teams', { method: 'POST', body, cookie })).status).to.equal(403);
    expect(await teams.list()).to.deep.equal([]);

    const created = await call(app, '/account/api/teams', { method: 'POST', body, cookie, csrf });
    expect(created.status, created.text).to.equal(201);
    expect(created.json.created_at).to.equal((await teams.get('support'))!.createdAt);
    expect(created.json).to.deep.equal({
      name: 'support',
      created_at: created.json.created_at,
      rpm: 60,
      tpm: null,
      quota: null,
      budget: { daily_usd: 5 },
      concurrency: null,
      cache: false,
      guardrails: ['no-emails'],
      group: null,
      end_user: null,
      alerts: null,
    });
    expect(
      (await call(app, '/account/api/teams', { method: 'POST', body: { name: 'support' }, cookie, csrf })).status,
    ).to.equal(409);
    const invalid = await call(app, '/account/api/teams', {
      method: 'POST',
      body: { name: 'other', budget: { daily_usd: -1 }, guardrails: ['no-email'] },
      cookie,
      csrf,
    });
    expect(invalid.status).to.equal(400);
    expect(invalid.json.errors).to.include(
      "Field 'guardrails': no guardrail is named 'no-email' in the configuration (configured: no-emails, no-codes, moderation)",
    );
    expect(invalid.json.errors.some((error: string) => error.startsWith("Field 'budget.daily_usd': "))).to.equal(true);

    const listed = await call(app, '/account/api/teams', { cookie });
    expect(listed.json).to.deep.equal({ object: 'list', data: [created.json] });
    expect((await call(app, '/account/api/teams/support', { cookie })).json).to.deep.equal(created.json);
    expect((await call(app, '/account/api/teams/nobody', { cookie })).status).to.equal(404);

    expect(
      (await call(app, '/account/api/teams/support', { method: 'PATCH', body: { rpm: null }, cookie })).status,
    ).to.equal(403);
    const patched = await call(app, '/account/api/teams/support', {
      method: 'PATCH',
      body: { rpm: null, tpm: 9000, guardrails: null },
      cookie,
      csrf,
    });
    expect(patched.json).to.deep.include({ rpm: null, tpm: 9000, guardrails: null, cache: false });
    expect((await teams.get('support'))!.tpm).to.equal(9000);

    // Two keys name the team: it stays until both are revoked.
    const ids: string[] = [];
    for (const name of ['first', 'second']) {
      const key = await call(app, '/account/api/keys', {
        method: 'POST',
        body: { name, team: 'support', guardrails: ['no-codes'] },
        cookie,
        csrf,
      });
      expect(key.status, key.text).to.equal(201);
      expect(key.json).to.deep.include({ team: 'support', guardrails: ['no-codes'] });
      ids.push(key.json.id);
    }
    expect((await call(app, '/account/api/teams/support', { method: 'DELETE', cookie })).status).to.equal(403);
    const inUse = await call(app, '/account/api/teams/support', { method: 'DELETE', cookie, csrf });
    expect(inUse.status).to.equal(409);
    expect(inUse.json.detail).to.equal("Team 'support' is named by 2 keys that are not revoked; revoke them first");
    for (const id of ids)
      expect((await call(app, `/account/api/keys/${id}/revoke`, { method: 'POST', cookie, csrf })).status).to.equal(
        200,
      );
    expect((await call(app, '/account/api/teams/support', { method: 'DELETE', cookie, csrf })).json).to.deep.equal({
      name: 'support',
      deleted: true,
    });
    expect((await call(app, '/account/api/teams/support', { method: 'DELETE', cookie, csrf })).status).to.equal(404);
    expect(await teams.list()).to.deep.equal([]);
  });

  it("checks a key's guardrails against the configured ones, as the admin API does", async () => {
    const app = await start();
    const { cookie, csrf } = await signIn(app);
    const refused = await call(app, '/account/api/keys', {
      method: 'POST',
      body: { name: 'typo', guardrails: ['moderaton'] },
      cookie,
      csrf,
    });
    expect(refused.status).to.equal(400);
    expect(refused.json.errors).to.deep.equal([
      "Field 'guardrails': no guardrail is named 'moderaton' in the configuration (configured: no-emails, no-codes, moderation)",
    ]);
    const created = await call(app, '/account/api/keys', {
      method: 'POST',
      body: { name: 'watched', guardrails: ['moderation'] },
      cookie,
      csrf,
    });
    expect(created.status).to.equal(201);
    configured = [];
    const patched = await call(app, `/account/api/keys/${created.json.id}`, {
      method: 'PATCH',
      body: { guardrails: ['moderation'] },
      cookie,
      csrf,
    });
    expect(patched.json.errors).to.deep.equal([
      "Field 'guardrails': no guardrail is named 'moderation' in the configuration (configured: none)",
    ]);
  });

  it('lists the configured guardrails from the configuration in force, never a webhook url or header', async () => {
    const app = await start();
    expect((await call(app, '/account/api/guardrails')).status).to.equal(401);
    const { cookie } = await signIn(app);
    const listed = await call(app, '/account/api/guardrails', { cookie });
    expect(listed.status).to.equal(200);
    expect(listed.json).to.deep.equal({
      object: 'list',
      data: [
        { name: 'no-emails', use: 'pii', on: 'both', action: 'redact' },
        { name: 'no-codes', use: 'regex', on: 'request', action: 'block' },
        { name: 'moderation', use: 'webhook', on: 'response', action: null },
      ],
    });
    expect(listed.text)
      .not.to.include(WEBHOOK_SECRET)
      .and.not.to.include('moderation.internal')
      .and.not.to.include('CODE-');
    configured = [GUARDRAILS[1]!];
    expect(
      (await call(app, '/account/api/guardrails', { cookie })).json.data.map((entry: { name: string }) => entry.name),
    ).to.deep.equal(['no-codes']);
    const none = await start({ guardrailSettings: undefined });
    expect((await call(none, '/account/api/guardrails', { cookie: (await signIn(none)).cookie })).json).to.deep.equal({
      object: 'list',
      data: [],
    });
  });

  it('lists them on the admin API too, behind the admin token', async () => {
    const adminToken = 'admin-guardrail-list-token-0123456789abcdef';
    const app = await startGuardedApp({
      routers: { '/admin': adminRouter({ token: adminToken, keys, teams, guardrailSettings: () => configured }) },
    });
    apps.push(app);
    expect((await call(app, '/admin/guardrails')).status).to.equal(401);
    const listed = await call(app, '/admin/guardrails', { headers: { authorization: `Bearer ${adminToken}` } });
    expect(listed.status).to.equal(200);
    expect(listed.json.data).to.deep.equal([
      { name: 'no-emails', use: 'pii', on: 'both', action: 'redact' },
      { name: 'no-codes', use: 'regex', on: 'request', action: 'block' },
      { name: 'moderation', use: 'webhook', on: 'response', action: null },
    ]);
    expect(listed.text).not.to.include(WEBHOOK_SECRET);
    // The names come from the same settings when only they are given: a team's guardrails are checked.
    const refused = await call(app, '/admin/teams', {
      method: 'POST',
      body: { name: 'x', guardrails: ['nope'] },
      headers: { authorization: `Bearer ${adminToken}` },
    });
    expect(refused.json.errors).to.deep.equal([
      "Field 'guardrails': no guardrail is named 'nope' in the configuration (configured: no-emails, no-codes, moderation)",
    ]);
  });

  it('reads usage per key id and per team, as JSON and as CSV', async () => {
    await teams.create({ name: 'red' });
    const { record: first } = await keys.create({ name: 'first', team: 'red' });
    const { record: second } = await keys.create({ name: 'second', team: 'red' });
    const { record: loner } = await keys.create({ name: 'loner' });
    const record = (keyId: string, inputTokens: number) =>
      buildUsageRecord({
        keyId,
        route: 'chat-completions',
        requestedModel: 'alpha/gen-5.5',
        model: 'alpha/gen-5.5',
        upstream: 'alpha',
        status: 200,
        stream: false,
        latencyMs: 5,
        usage: { inputTokens, outputTokens: 10, cachedTokens: 0 },
        pricing: { input: 2, cachedInput: 0.5, output: 8 },
        time: new Date('2026-11-21T10:00:00Z'),
      });
    usage.record(record(first.id, 100));
    usage.record(record(second.id, 200));
    usage.record(record(loner.id, 400));
    await usage.flush();
    const app = await start();
    const { cookie } = await signIn(app);

    const perKey = await call(app, '/account/api/usage?group_by=key', { cookie });
    expect(
      perKey.json.data.map((row: { key_id: string; input_tokens: number }) => [row.key_id, row.input_tokens]),
    ).to.deep.equal(
      [
        [first.id, 100],
        [second.id, 200],
        [loner.id, 400],
      ].sort(([a], [b]) => (String(a) < String(b) ? -1 : 1)),
    );
    const perTeam = await call(app, '/account/api/usage?group_by=team', { cookie });
    expect(
      perTeam.json.data.map((row: { team: string | null; requests: number; input_tokens: number }) => [
        row.team,
        row.requests,
        row.input_tokens,
      ]),
    ).to.deep.equal([
      ['red', 2, 300],
      [null, 1, 400],
    ]);

    const csv = await call(app, '/account/api/usage.csv?group_by=team', { cookie });
    expect(csv.headers.get('content-disposition')).to.equal('attachment; filename="usage-by-team-start-to-now.csv"');
    expect(csv.text).to.equal(
      'team,requests,input_tokens,output_tokens,cached_tokens,total_tokens,charged_tokens,cost_usd,cache_hits,saved_usd\r\n' +
        'red,2,300,20,0,320,320,0.00076,0,0\r\n' +
        ',1,400,10,0,410,410,0.00088,0,0\r\n',
    );
    const byKey = await call(app, `/account/api/usage.csv?group_by=key&key_id=${loner.id}`, { cookie });
    expect(byKey.text).to.equal(
      'key_id,requests,input_tokens,output_tokens,cached_tokens,total_tokens,charged_tokens,cost_usd,cache_hits,saved_usd\r\n' +
        `${loner.id},1,400,10,0,410,410,0.00088,0,0\r\n`,
    );
  });
});
