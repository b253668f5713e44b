import { expect } from 'chai';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { accountRouter, type AccountRouterOptions } from '../../../src/control-plane/account/account-router.ts';
import { createLogger } from '../../../src/core/logger.ts';
import { ModelRegistry } from '../../../src/core/model-registry.ts';
import { endpointsOf } from '../../../src/data-plane/upstream/endpoint-pool.ts';
import { loadPlugins } from '../../../src/plugins/load-plugins.ts';
import { FileKeyStore } from '../../../src/stores/keys/file-key-store.ts';
import { MemoryLedger } from '../../../src/stores/limits/embedded-ledger.ts';
import { MemorySessionStore } from '../../../src/stores/session-store.ts';
import { EmbeddedUsageStore } from '../../../src/stores/usage/embedded-usage-store.ts';
import { metersOfLimits, requestMeter } from '../../../src/usage/limit-meters.ts';
import { startGuardedApp, type GuardedApp } from '../../data-plane/pipeline/guarded-app.ts';
import { MemoryTeamStore } from '../../helpers/memory-team-store.ts';

const TOKEN = 'account-limits-admin-token-0123456789abcdef';

describe('account page limits route', () => {
  let dataDir: string;
  let keys: FileKeyStore;
  let usage: EmbeddedUsageStore;
  let registry: ModelRegistry;
  let ledger: MemoryLedger;
  let teams: MemoryTeamStore;
  const clock = Date.parse('2026-11-23T12:00:00Z');
  const apps: GuardedApp[] = [];

  async function start(overrides: Partial<AccountRouterOptions> = {}): Promise<GuardedApp> {
    const router = accountRouter({
      token: TOKEN,
      keys,
      usage,
      registry: () => registry,
      endpoints: endpointsOf(new Map()),
      readiness: async () => ({ status: 'ok' }),
      sessions: new MemorySessionStore(() => clock),
      now: () => clock,
      teams,
      limits: ledger,
      ...overrides,
    });
    const app = await startGuardedApp({ routers: { '/account': router } });
    apps.push(app);
    return app;
  }

  async function signIn(app: GuardedApp): Promise<string> {
    const reply = await fetch(`${app.url}/account/api/session`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ token: TOKEN }),
    });
    expect(reply.status).to.equal(201);
    return reply.headers.get('set-cookie')!.split(';')[0]!;
  }

  async function limits(
    app: GuardedApp,
    cookie?: string,
  ): Promise<{ status: number; headers: Headers; text: string; json: any }> {
    const reply = await fetch(`${app.url}/account/api/limits`, { headers: cookie ? { cookie } : {} });
    const text = await reply.text();
    return { status: reply.status, headers: reply.headers, text, json: JSON.parse(text) };
  }

  before(async () => {
    registry = new ModelRegistry(await loadPlugins(resolve('providers/manifest.json')));
  });
  beforeEach(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'gateway-account-limits-'));
    keys = new FileKeyStore(dataDir);
    usage = await EmbeddedUsageStore.open(dataDir, createLogger('silent'));
    ledger = new MemoryLedger(() => clock);
    teams = new MemoryTeamStore([{ name: 'research', tpm: 20_000, quota: { monthly: 1_000_000 } }], () => clock);
  });
  afterEach(async () => {
    await Promise.all(apps.splice(0).map((app) => app.close()));
    await usage.close();
    await keys.close();
    await rm(dataDir, { recursive: true, force: true });
  });

  it('answers 401 without a session, as JSON', async () => {
    const app = await start();
    const reply = await limits(app);
    expect(reply.status).to.equal(401);
    expect(reply.headers.get('content-type')).to.match(/^application\/json/);
    expect(reply.json.detail).to.match(/^Not signed in/);
    expect(reply.json).not.to.have.property('keys');
  });

  it('shows every key and team with its limits and the use counted now', async () => {
    const { record: capped } = await keys.create({
      name: 'capped',
      tpm: 1000,
      budget: { daily_usd: 2.5 },
      team: 'research',
    });
    const { record: revoked } = await keys.create({ name: 'revoked', tpm: 5 });
    await keys.revoke(revoked.id);
    const [tpm, budget] = metersOfLimits('key', capped.id, capped, clock);
    ledger.add(tpm!.counter, 250, tpm!.resetAt);
    ledger.add(budget!.counter, 500_000_000, budget!.resetAt);
    const [teamQuota] = metersOfLimits('team', 'research', { quota: { monthly: 1_000_000 } }, clock);
    ledger.add(teamQuota!.counter, 12_345, teamQuota!.resetAt);
    // Four requests counted by the rate limiter against the rate settings in force (30 per minute).
    const rpm = requestMeter('key', capped.id, 30, 60_000, clock);
    for (let i = 0; i < 4; i++)
      ledger.reserve([{ counter: rpm.counter, limit: rpm.limit, want: 1, need: 1, resetAt: rpm.resetAt }]);

    const app = await start({ rate: () => ({ max: 30, windowMs: 60_000 }) });
    const reply = await limits(app, await signIn(app));
    expect(reply.status).to.equal(200);
    expect(reply.headers.get('cache-control')).to.equal('no-store');
    expect(reply.text).not.to.include(capped.hash);
    expect(reply.json).to.deep.include({ object: 'limits', metered: true, generated_at: '2026-11-23T12:00:00.000Z' });
    expect(reply.json.keys).to.have.length(1);
    expect(reply.json.keys[0]).to.deep.equal({
      id: capped.id,
      name: 'capped',
      status: 'active',
      team: 'research',
      rpm: null,
      tpm: 1000,
      quota: null,
      budget: { daily_usd: 2.5 },
      use: [
        {
          kind: 'rpm',
          period: 'minute',
          unit: 'requests',
          limit: 30,
          used: 4,
          remaining: 26,
          resets_at: '2026-11-23T12:01:00.000Z',
        },
        {
          kind: 'tpm',
          period: 'minute',
          unit: 'tokens',
          limit: 1000,
          used: 250,
          remaining: 750,
          resets_at: '2026-11-23T12:01:00.000Z',
        },
        {
          kind: 'budget',
          period: 'day',
          unit: 'usd',
          limit: 2.5,
          used: 0.5,
          remaining: 2,
          resets_at: '2026-11-24T00:00:00.000Z',
        },
      ],
    });
    expect(reply.json.teams).to.have.length(1);
    expect(reply.json.teams[0]).to.deep.include({ name: 'research', key_ids: [capped.id] });
    expect(reply.json.teams[0].use.map((entry: { used: number }) => entry.used)).to.deep.equal([0, 12_345]);
  });

  it('lists the keys with no use figures and no teams when neither store is given', async () => {
    await keys.create({ name: 'capped', quota: { daily: 10 } });
    const app = await start({ teams: undefined, limits: undefined });
    const reply = await limits(app, await signIn(app));
    expect(reply.status).to.equal(200);
    expect(reply.json).to.deep.include({ metered: false, teams: [] });
    expect(reply.json.keys[0].use).to.deep.equal([
      // Without rate settings given, the gateway's default.
      {
        kind: 'rpm',
        period: 'minute',
        unit: 'requests',
        limit: 100,
        used: null,
        remaining: null,
        resets_at: '2026-11-23T12:01:00.000Z',
      },
      {
        kind: 'quota',
        period: 'day',
        unit: 'tokens',
        limit: 10,
        used: null,
        remaining: null,
        resets_at: '2026-11-24T00:00:00.000Z',
      },
    ]);
  });

  it('answers 503 as JSON, with no stack, when the teams or the counters cannot be read', async () => {
    await keys.create({ name: 'capped', tpm: 10 });
    teams.failing = true;
    let app = await start();
    let reply = await limits(app, await signIn(app));
    expect(reply.status).to.equal(503);
    expect(reply.headers.get('retry-after')).to.equal('1');
    expect(reply.json.detail).to.match(/^Limits cannot be read right now/);
    expect(reply.text).not.to.match(/team store unreachable|at .*\.ts/);
    teams.failing = false;
    app = await start({ limits: { peek: async () => Promise.reject(new Error('redis down')) } });
    reply = await limits(app, await signIn(app));
    expect(reply.status).to.equal(503);
    expect(reply.text).not.to.include('redis down');
  });
});
