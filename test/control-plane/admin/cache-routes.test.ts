import { expect } from 'chai';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { adminRouter } from '../../../src/control-plane/admin/admin-routes.ts';
import type { CacheTenant, ResponseCache } from '../../../src/core/response-cache.ts';
import { FileKeyStore } from '../../../src/stores/keys/file-key-store.ts';
import { FileTeamStore } from '../../../src/stores/teams/file-team-store.ts';
import { captureLogs, send, startGuardedApp, type GuardedApp } from '../../data-plane/pipeline/guarded-app.ts';

const TOKEN = 'admin-token-for-tests-0001-0123456789abcdef';
const admin = { authorization: `Bearer ${TOKEN}` };

/** A response cache that records what `clear` was asked for and answers a count per tenant. */
class FakeResponseCache implements ResponseCache {
  readonly cleared: (CacheTenant | undefined)[] = [];
  failure: Error | undefined;

  constructor(private readonly held: Record<string, number>) {}

  get(): undefined {
    return undefined;
  }

  set(): void {}

  delete(): void {}

  async clear(tenant?: CacheTenant): Promise<number> {
    this.cleared.push(tenant);
    if (this.failure) throw this.failure;
    return tenant === undefined
      ? Object.values(this.held).reduce((sum, count) => sum + count, 0)
      : (this.held[tenant] ?? 0);
  }

  async close(): Promise<void> {}
}

describe('admin API: DELETE /admin/cache', () => {
  let dataDir: string;
  let keys: FileKeyStore;
  let teams: FileTeamStore;
  let cache: FakeResponseCache;
  let app: GuardedApp;
  let loner: string;
  let member: string;
  let research: string;
  const logs = captureLogs();

  beforeEach(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'gateway-admin-cache-'));
    keys = new FileKeyStore(dataDir);
    teams = new FileTeamStore(dataDir);
    research = (await teams.create({ name: 'research' })).id;
    loner = (await keys.create({ name: 'loner' })).record.id;
    member = (await keys.create({ name: 'member', team: 'research' })).record.id;
    cache = new FakeResponseCache({ [`key:${loner}`]: 2, [`team:${research}`]: 5 });
    app = await startGuardedApp({
      routers: { '/admin': adminRouter({ token: TOKEN, keys, teams, responseCache: cache }) },
      logger: logs.logger,
    });
  });
  afterEach(async () => {
    await app.close();
    await rm(dataDir, { recursive: true, force: true });
  });

  it('wants the admin token', async () => {
    expect(await send(app.url, '/admin/cache', { method: 'DELETE' })).to.deep.include({ status: 401 });
    expect(await send(app.url, '/admin/cache', { method: 'DELETE', authorization: 'Bearer wrong' })).to.deep.include({
      status: 401,
    });
    expect(cache.cleared).to.deep.equal([]);
  });

  it('empties every entry without a query', async () => {
    expect(await send(app.url, '/admin/cache', { method: 'DELETE', ...admin })).to.deep.include({
      status: 200,
      body: { deleted: 7, tenant: null },
    });
    expect(cache.cleared).to.deep.equal([undefined]);
  });

  it("empties a key's own tenant, or its team's when the key names one", async () => {
    expect(await send(app.url, `/admin/cache?key_id=${loner}`, { method: 'DELETE', ...admin })).to.deep.include({
      status: 200,
      body: { deleted: 2, tenant: `key:${loner}` },
    });
    expect(await send(app.url, `/admin/cache?key_id=${member}`, { method: 'DELETE', ...admin })).to.deep.include({
      status: 200,
      body: { deleted: 5, tenant: 'team:research' },
    });
    expect(cache.cleared).to.deep.equal([`key:${loner}`, `team:${research}`]);
  });

  it("empties a team's tenant", async () => {
    expect(await send(app.url, '/admin/cache?team=research', { method: 'DELETE', ...admin })).to.deep.include({
      status: 200,
      body: { deleted: 5, tenant: 'team:research' },
    });
    expect(cache.cleared).to.deep.equal([`team:${research}`]);
  });

  it("empties a key's own tenant when the team it names no longer exists (the data plane serves it without one)", async () => {
    const orphan = (await keys.create({ name: 'orphan', team: 'research' })).record.id;
    await keys.revoke(orphan);
    await keys.revoke(member);
    await teams.remove('research');
    expect(await send(app.url, `/admin/cache?key_id=${orphan}`, { method: 'DELETE', ...admin })).to.deep.include({
      status: 200,
      body: { deleted: 0, tenant: `key:${orphan}` },
    });
    expect(cache.cleared).to.deep.equal([`key:${orphan}`]);
  });

  it('answers 404 in the admin envelope for an unknown key id or team, emptying nothing', async () => {
    const unknownKey = await send(app.url, '/admin/cache?key_id=key_nobody', { method: 'DELETE', ...admin });
    expect(unknownKey).to.deep.include({ status: 404, body: { detail: "No API key with id 'key_nobody'" } });
    expect(unknownKey.headers.get('content-type')).to.contain('application/json');
    expect(await send(app.url, '/admin/cache?team=nobody', { method: 'DELETE', ...admin })).to.deep.include({
      status: 404,
      body: { detail: "No team named 'nobody'" },
    });
    expect(cache.cleared).to.deep.equal([]);
  });

  it('answers 400 for both parameters, an unknown one, or one repeated or empty, emptying nothing', async () => {
    expect(
      await send(app.url, `/admin/cache?key_id=${loner}&team=research`, { method: 'DELETE', ...admin }),
    ).to.deep.include({
      status: 400,
      body: { detail: 'Give key_id or team, not both (neither empties every entry)' },
    });
    expect(await send(app.url, '/admin/cache?tenant=team:research', { method: 'DELETE', ...admin })).to.deep.include({
      status: 400,
      body: {
        detail: "Unknown query parameter 'tenant': give key_id=KEY_ID or team=NAME, or neither to empty every entry",
      },
    });
    for (const query of ['team=research&team=other', 'team=', 'key_id']) {
      const answer = await send(app.url, `/admin/cache?${query}`, { method: 'DELETE', ...admin });
      expect(answer.status, query).to.equal(400);
      expect(answer.body.detail, query).to.match(
        /^The query parameter '(team|key_id)' must be given once, with a value$/,
      );
    }
    expect(cache.cleared).to.deep.equal([]);
  });

  it('answers 503 when the cache store fails, without its error text', async () => {
    cache.failure = new Error('connect ECONNREFUSED 10.0.0.7:6379');
    const answer = await send(app.url, '/admin/cache?team=research', { method: 'DELETE', ...admin });
    expect(answer).to.deep.include({
      status: 503,
      body: {
        detail: 'The response cache cannot be emptied right now (its store is unavailable); please retry shortly',
      },
    });
    expect(JSON.stringify(answer.body)).not.to.contain('ECONNREFUSED');
  });

  it('answers 0 deleted without a cache configured, after the same checks', async () => {
    const bare = await startGuardedApp({
      routers: { '/admin': adminRouter({ token: TOKEN, keys, teams }) },
      logger: logs.logger,
    });
    try {
      expect(await send(bare.url, '/admin/cache', { method: 'DELETE', ...admin })).to.deep.include({
        status: 200,
        body: { deleted: 0, tenant: null },
      });
      expect(await send(bare.url, `/admin/cache?key_id=${member}`, { method: 'DELETE', ...admin })).to.deep.include({
        status: 200,
        body: { deleted: 0, tenant: 'team:research' },
      });
      expect(await send(bare.url, '/admin/cache?team=nobody', { method: 'DELETE', ...admin })).to.deep.include({
        status: 404,
      });
    } finally {
      await bare.close();
    }
  });
});
