import { expect } from 'chai';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import {
  accountRouter,
  ACCOUNT_CSP,
  type AccountRouterOptions,
} from '../../../src/control-plane/account/account-router.ts';
import { MemorySessionStore } from '../../../src/stores/session-store.ts';
import { FileKeyStore } from '../../../src/stores/keys/file-key-store.ts';
import { createLogger } from '../../../src/core/logger.ts';
import { loadPlugins } from '../../../src/plugins/load-plugins.ts';
import { ModelRegistry } from '../../../src/core/model-registry.ts';
import { EndpointPool, PooledEndpoint, endpointsOf } from '../../../src/data-plane/upstream/endpoint-pool.ts';
import { upstreamEndpoint } from '../../../src/data-plane/upstream/upstream-client.ts';
import { EmbeddedUsageStore } from '../../../src/stores/usage/embedded-usage-store.ts';
import { buildUsageRecord } from '../../../src/usage/usage-accounting.ts';
import { startGuardedApp, type GuardedApp } from '../../data-plane/pipeline/guarded-app.ts';
import { call, signIn as signInWith } from './account-api-client.ts';

const TOKEN = 'account-admin-token-0001-0123456789abcdef';
const UPSTREAM_SECRET = 'upstream-secret-never-shown';

/** Signs in with this suite's admin token. */
const signIn = (app: GuardedApp, headers: Record<string, string> = {}) => signInWith(app, TOKEN, headers);

describe('account page routes', () => {
  let dataDir: string;
  let keys: FileKeyStore;
  let usage: EmbeddedUsageStore;
  let registry: ModelRegistry;
  let clock: number;
  const apps: GuardedApp[] = [];
  // Two alpha endpoints; the second has failed twice in a row, which trips its breaker.
  const alphaPool = new EndpointPool(
    [
      new PooledEndpoint(upstreamEndpoint('alpha', 'http://127.0.0.1:9/v1', UPSTREAM_SECRET), 'primary', 1),
      new PooledEndpoint(upstreamEndpoint('alpha', 'http://127.0.0.2:9/v1', UPSTREAM_SECRET), '1', 1),
    ],
    { failureThreshold: 2, cooldownMs: 30_000 },
    () => 1_800_000_000_000,
  );
  alphaPool.failed(alphaPool.endpoints[1]!);
  alphaPool.failed(alphaPool.endpoints[1]!);

  async function start(overrides: Partial<AccountRouterOptions> = {}): Promise<GuardedApp> {
    const app = await startGuardedApp({
      routers: {
        '/account': accountRouter({
          token: TOKEN,
          keys,
          usage,
          registry: () => registry,
          endpoints: endpointsOf(new Map([['alpha', alphaPool]])),
          readiness: async () => ({
            status: 'degraded',
            redis: 'unavailable',
            rate_limits: 'per-process',
            usage: 'stored',
          }),
          sessions: new MemorySessionStore(() => clock),
          now: () => clock,
          ...overrides,
        }),
      },
    });
    apps.push(app);
    return app;
  }

  before(async () => {
    registry = new ModelRegistry(await loadPlugins(resolve('providers/manifest.json')));
  });
  beforeEach(async () => {
    clock = Date.parse('2026-11-23T12:00:00Z');
    dataDir = await mkdtemp(join(tmpdir(), 'gateway-account-'));
    keys = new FileKeyStore(dataDir);
    usage = await EmbeddedUsageStore.open(dataDir, createLogger('silent'));
  });
  afterEach(async () => {
    await Promise.all(apps.splice(0).map((app) => app.close()));
    await usage.close();
    await keys.close();
    await rm(dataDir, { recursive: true, force: true });
  });

  describe('without GATEWAY_ADMIN_TOKEN', () => {
    it('serves the page, which says how to enable it, and exposes nothing else', async () => {
      const app = await start({ token: undefined });
      const page = await call(app, '/account');
      expect(page.status).to.equal(200);
      expect(page.headers.get('content-security-policy')).to.equal(ACCOUNT_CSP);
      expect(await call(app, '/account/api/session')).to.deep.include({ status: 200 });
      const state = (await call(app, '/account/api/session')).json;
      expect(state).to.deep.include({ enabled: false, signed_in: false });
      expect(state.detail).to.include('GATEWAY_ADMIN_TOKEN');
      for (const [method, path] of [
        ['GET', '/account/api/keys'],
        ['POST', '/account/api/keys'],
        ['POST', '/account/api/session'],
        ['GET', '/account/api/health'],
        ['GET', '/account/api/usage.csv'],
        ['GET', '/account/api/limits'],
      ]) {
        const reply = await call(app, path!, { method, body: method === 'POST' ? { token: TOKEN } : undefined });
        expect(reply.status, `${method} ${path}`).to.equal(404);
        expect(reply.json.detail).to.equal(`No route for ${method} ${path}`);
      }
    });
  });

  it('serves the page under a strict CSP, with no inline script, style or secret, and Chart.js from the package', async () => {
    const app = await start();
    for (const path of ['/account', '/account/']) {
      const page = await call(app, path);
      expect(page.status).to.equal(200);
      expect(page.headers.get('content-type')).to.match(/^text\/html/);
      expect(page.headers.get('content-security-policy')).to.equal(ACCOUNT_CSP);
      expect(page.headers.get('x-content-type-options')).to.equal('nosniff');
      expect(page.headers.get('x-frame-options')).to.equal('DENY');
      expect(page.text).not.to.include(TOKEN);
      expect(page.text).not.to.match(/<script(?![^>]*\bsrc=)/);
      expect(page.text).not.to.match(/<style|\sstyle=|\son[a-z]+=/i);
    }
    expect(ACCOUNT_CSP)
      .to.include("script-src 'self'")
      .and.include("style-src 'self'")
      .and.include("frame-ancestors 'none'")
      .and.not.include('unsafe');
    const chart = await call(app, '/account/vendor/chart.umd.min.js');
    expect(chart.status).to.equal(200);
    expect(chart.headers.get('content-type')).to.match(/^text\/javascript/);
    expect(chart.text).to.include('Chart');
    const module = await call(app, '/account/app.js');
    expect(module.headers.get('content-type')).to.match(/javascript/);
    expect((await call(app, '/account/account.css')).headers.get('content-type')).to.match(/^text\/css/);
  });

  it('exchanges the admin token for an HttpOnly, SameSite=Strict session cookie, Secure behind TLS', async () => {
    const app = await start();
    const { setCookie, csrf } = await signIn(app);
    expect(setCookie).to.match(
      /^gw_account_session=[A-Za-z0-9_-]{43}; Max-Age=28800; Path=\/account; Expires=[^;]+; HttpOnly; SameSite=Strict$/,
    );
    expect(csrf).to.match(/^[A-Za-z0-9_-]{43}$/);
    const proxied = await signIn(app, { 'x-forwarded-proto': 'https' });
    expect(proxied.setCookie).to.match(/; Secure/);
    expect(proxied.cookie).not.to.equal((await signIn(app)).cookie);
  });

  it('refuses a wrong or missing token without a cookie', async () => {
    const app = await start();
    const wrong = await call(app, '/account/api/session', { method: 'POST', body: { token: `${TOKEN}x` } });
    expect(wrong.status).to.equal(401);
    expect(wrong.json.detail).to.equal('Invalid admin token');
    expect(wrong.headers.get('set-cookie')).to.equal(null);
    const missing = await call(app, '/account/api/session', { method: 'POST', body: {} });
    expect(missing.status).to.equal(400);
    expect(missing.json.errors).to.deep.equal(["Field 'token': is required: the admin token (GATEWAY_ADMIN_TOKEN)"]);
    const huge = await call(app, '/account/api/session', { method: 'POST', body: { token: 'x'.repeat(20_000) } });
    expect(huge.status).to.equal(413);
    expect(huge.json.detail).to.equal('Request body is larger than the limit of 16384 bytes');
  });

  it('answers 401 to the API without a session, or with a made-up cookie', async () => {
    const app = await start();
    for (const cookie of [
      undefined,
      'gw_account_session=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA',
      'gw_account_session=../../x',
    ]) {
      const reply = await call(app, '/account/api/keys', { cookie });
      expect(reply.status).to.equal(401);
      expect(reply.json.detail).to.match(/^Not signed in/);
    }
    expect((await call(app, '/account/api/session')).json).to.deep.equal({ enabled: true, signed_in: false });
  });

  it('runs the admin API key operations behind the session, writes only with the CSRF token from this origin', async () => {
    const app = await start();
    const { cookie, csrf } = await signIn(app);
    expect((await call(app, '/account/api/session', { cookie })).json).to.deep.include({
      signed_in: true,
      csrf_token: csrf,
      expires_at: '2026-11-23T20:00:00.000Z',
    });
    const body = { name: 'from the page', rpm: 5, models: ['alpha/gen-5.5'], cache: false };

    expect((await call(app, '/account/api/keys', { method: 'POST', body, cookie })).status).to.equal(403);
    expect(
      (await call(app, '/account/api/keys', { method: 'POST', body, cookie, csrf: `${csrf}x` })).json.detail,
    ).to.match(/CSRF token/);
    const evil = await call(app, '/account/api/keys', {
      method: 'POST',
      body,
      cookie,
      csrf,
      headers: { origin: 'https://evil.example' },
    });
    expect(evil).to.deep.include({ status: 403 });
    expect(evil.json.detail).to.equal('Cross-site request refused: Origin does not match this gateway');
    expect(
      (
        await call(app, '/account/api/keys', {
          method: 'POST',
          body,
          cookie,
          csrf,
          headers: { 'sec-fetch-site': 'cross-site' },
        })
      ).status,
    ).to.equal(403);
    expect(await keys.list()).to.deep.equal([]);

    const created = await call(app, '/account/api/keys', {
      method: 'POST',
      body,
      cookie,
      csrf,
      headers: { origin: app.url, 'sec-fetch-site': 'same-origin' },
    });
    expect(created.status).to.equal(201);
    expect(created.json).to.deep.include({
      name: 'from the page',
      status: 'active',
      rpm: 5,
      models: ['alpha/gen-5.5'],
      cache: false,
    });
    expect(created.json.key).to.match(/^sk-/);
    const invalid = await call(app, '/account/api/keys', {
      method: 'POST',
      body: { name: '', models: ['alpha-latest'] },
      cookie,
      csrf,
    });
    expect(invalid.status).to.equal(400);
    expect(invalid.json.errors).to.have.length(2);

    const listed = await call(app, '/account/api/keys', { cookie });
    expect(listed.json.data.map((key: { id: string }) => key.id)).to.deep.equal([created.json.id]);
    expect(listed.text).not.to.include(created.json.key);
    expect(
      (await call(app, `/account/api/keys/${created.json.id}/revoke`, { method: 'POST', cookie })).status,
    ).to.equal(403);
    expect(
      (await call(app, `/account/api/keys/${created.json.id}/revoke`, { method: 'POST', cookie, csrf })).json,
    ).to.deep.equal({ id: created.json.id, revoked: true });
    expect(
      (await call(app, '/account/api/keys/key_nope/revoke', { method: 'POST', cookie, csrf })).json.detail,
    ).to.equal("No API key with id 'key_nope'");
    expect((await keys.list())[0]!.revoked).to.equal(true);
    const models = (await call(app, '/account/api/models', { cookie })).json.data as string[];
    expect(models).to.include('alpha/gen-5.5').and.not.include('alpha-latest');
  });

  it('refuses a sign-in posted from another site', async () => {
    const app = await start();
    const reply = await call(app, '/account/api/session', {
      method: 'POST',
      body: { token: TOKEN },
      headers: { origin: 'http://evil.example' },
    });
    expect(reply.status).to.equal(403);
    expect(reply.headers.get('set-cookie')).to.equal(null);
  });

  it('expires sessions, and signing out ends the session at once', async () => {
    const app = await start({ sessionTtlMs: 60_000 });
    const first = await signIn(app);
    clock += 59_000;
    expect((await call(app, '/account/api/keys', { cookie: first.cookie })).status).to.equal(200);
    clock += 1_000;
    expect((await call(app, '/account/api/keys', { cookie: first.cookie })).status).to.equal(401);

    const second = await signIn(app);
    expect((await call(app, '/account/api/session', { method: 'DELETE', cookie: second.cookie })).status).to.equal(403);
    const out = await call(app, '/account/api/session', { method: 'DELETE', cookie: second.cookie, csrf: second.csrf });
    expect(out.status).to.equal(204);
    expect(out.headers.get('set-cookie')).to.match(/^gw_account_session=; Max-Age=0; Path=\/account;/);
    expect((await call(app, '/account/api/keys', { cookie: second.cookie })).status).to.equal(401);
  });

  it('does not take sessions made under another admin token', async () => {
    const sessions = new MemorySessionStore(() => clock);
    const before = await start({ sessions });
    const { cookie } = await signIn(before);
    const rotated = await start({ sessions, token: 'another-admin-token-0002-0123456789abcdef' });
    expect((await call(rotated, '/account/api/keys', { cookie })).status).to.equal(401);
    expect((await call(before, '/account/api/keys', { cookie })).status).to.equal(200);
  });

  it('throttles failed sign-ins per address; successful ones do not count', async () => {
    const app = await start({ signInLimit: { max: 3, windowMs: 60_000 } });
    for (let attempt = 0; attempt < 5; attempt += 1) await signIn(app);
    for (let attempt = 0; attempt < 3; attempt += 1) {
      expect((await call(app, '/account/api/session', { method: 'POST', body: { token: 'wrong' } })).status).to.equal(
        401,
      );
    }
    for (const token of ['wrong', TOKEN]) {
      const throttled = await call(app, '/account/api/session', { method: 'POST', body: { token } });
      expect(throttled.status).to.equal(429);
      expect(throttled.json.detail).to.equal(
        'Too many failed sign-ins from this address: 3 per 1 minute; wait and retry',
      );
      expect(Number(throttled.headers.get('retry-after'))).to.be.within(1, 60);
      expect(throttled.headers.get('set-cookie')).to.equal(null);
    }
  });

  it('shows readiness, every provider endpoint without its credential, and the aliases in force', async () => {
    const overridden = new ModelRegistry(registry.plugins, { 'alpha-latest': 'alpha/gen-5.5' });
    const app = await start({ registry: () => overridden });
    const { cookie } = await signIn(app);
    const health = await call(app, '/account/api/health', { cookie });
    expect(health.status).to.equal(200);
    expect(health.text).not.to.include(UPSTREAM_SECRET);
    expect(health.json.readiness).to.deep.equal({
      status: 'degraded',
      redis: 'unavailable',
      rate_limits: 'per-process',
      usage: 'stored',
    });
    expect(health.json.providers.map((provider: { vendor: string }) => provider.vendor)).to.deep.equal([
      'alpha',
      'alpha',
      'beta',
      'gamma',
      'delta',
      'epsilon',
      'zeta',
    ]);
    expect(health.json.providers[0]).to.deep.equal({
      vendor: 'alpha',
      env_prefix: 'ALPHA',
      name: 'primary',
      endpoint: 'http://127.0.0.1:9/v1',
      status: 'up',
      consecutive_failures: 0,
      resting_until: null,
    });
    expect(health.json.providers[1]).to.deep.equal({
      vendor: 'alpha',
      env_prefix: 'ALPHA',
      name: '1',
      endpoint: 'http://127.0.0.2:9/v1',
      status: 'resting',
      consecutive_failures: 2,
      resting_until: new Date(1_800_000_000_000 + 30_000).toISOString(),
    });
    expect(health.json.providers[2]).to.deep.equal({
      vendor: 'beta',
      env_prefix: 'BETA',
      name: null,
      endpoint: null,
      status: 'not configured',
      consecutive_failures: 0,
      resting_until: null,
    });
    expect(health.json.aliases).to.deep.include({
      alias: 'alpha-latest',
      vendor: 'alpha',
      target: 'alpha/gen-5.5',
      routes: ['chat', 'chat-completions', 'responses'],
    });
  });

  it('reads usage as the admin API does and downloads it as CSV', async () => {
    const record = (keyId: string, model: string, time: string, inputTokens: number) =>
      buildUsageRecord({
        keyId,
        route: 'chat-completions',
        requestedModel: model,
        model,
        upstream: 'alpha',
        status: 200,
        stream: false,
        latencyMs: 5,
        usage: { inputTokens, outputTokens: 10, cachedTokens: 0 },
        pricing: { input: 2, cachedInput: 0.5, output: 8 },
        time: new Date(time),
      });
    usage.record(record('key_a', 'alpha/gen-5.5', '2026-11-20T10:00:00Z', 100));
    usage.record(record('key_a', 'alpha/gen-6-astra', '2026-11-21T10:00:00Z', 200));
    usage.record(record('key_b', 'alpha/gen-5.5', '2026-11-21T10:00:00Z', 400));
    await usage.flush();
    const app = await start();
    const { cookie } = await signIn(app);
    const json = await call(app, '/account/api/usage?key_id=key_a&group_by=day&from=2026-11-01&to=2026-11-30', {
      cookie,
    });
    expect(json.json.data.map((row: { day: string; requests: number }) => [row.day, row.requests])).to.deep.equal([
      ['2026-11-20', 1],
      ['2026-11-21', 1],
    ]);

    const csv = await call(app, '/account/api/usage.csv?group_by=model&from=2026-11-21&to=2026-11-21', { cookie });
    expect(csv.status).to.equal(200);
    expect(csv.headers.get('content-type')).to.equal('text/csv; charset=utf-8');
    expect(csv.headers.get('content-disposition')).to.equal(
      'attachment; filename="usage-by-model-2026-11-21-to-2026-11-21.csv"',
    );
    expect(csv.text).to.equal(
      'model,requests,input_tokens,output_tokens,cached_tokens,total_tokens,charged_tokens,cost_usd,cache_hits,saved_usd\r\n' +
        'alpha/gen-5.5,1,400,10,0,410,410,0.00088,0,0\r\n' +
        'alpha/gen-6-astra,1,200,10,0,210,210,0.00048,0,0\r\n',
    );
    const bad = await call(app, '/account/api/usage.csv?group_by=hour', { cookie });
    expect(bad.status).to.equal(400);
    expect(bad.json.errors).to.deep.equal([
      "Field 'query.group_by': must be 'model', 'day', 'key', 'team' or 'end_user'",
    ]);
    expect((await call(app, '/account/api/usage.csv')).status).to.equal(401);
  });
});
