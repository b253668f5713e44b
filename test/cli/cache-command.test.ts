import { expect } from 'chai';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EMBEDDED_CACHE_HINT } from '../../src/cli/cache-command.ts';
import { runCli } from '../../src/cli/main.ts';
import { createLogger } from '../../src/core/logger.ts';
import type { CachedAnswer, CacheTenant } from '../../src/core/response-cache.ts';
import { RedisResponseCache } from '../../src/stores/cache/redis-response-cache.ts';
import { RedisKeyStore } from '../../src/stores/keys/redis-key-store.ts';
import { createRedisClient, waitUntilReady, type RedisConnection } from '../../src/stores/redis/redis-client.ts';
import { RedisTeamStore } from '../../src/stores/teams/redis-team-store.ts';
import { eventually } from '../helpers/eventually.ts';
import { TestRedisServer } from '../helpers/redis-server.ts';

async function cli(argv: string[], env: NodeJS.ProcessEnv): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await runCli(argv, { out: (text) => (out += text), err: (text) => (err += text) }, env);
  return { code, out, err };
}

const ANSWER: CachedAnswer = {
  storedAt: Date.now(),
  status: 200,
  contentType: 'application/json',
  stream: false,
  model: 'alpha/gen-5.5',
  usage: { inputTokens: 3, outputTokens: 2, cachedTokens: 0 },
  body: Buffer.from('{"ok":true}'),
};

describe('CLI cache clear', function () {
  this.timeout(30_000);
  let dataDir: string;
  let env: NodeJS.ProcessEnv;

  beforeEach(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'gateway-cli-cache-'));
    env = { GATEWAY_DATA_DIR: dataDir };
  });
  afterEach(async () => rm(dataDir, { recursive: true, force: true }));

  it('says the embedded cache is out of its reach without REDIS_URL (exit 1), and refuses bad usage (exit 2)', async () => {
    expect(await cli(['cache', 'clear'], env)).to.deep.include({ code: 1, out: '', err: EMBEDDED_CACHE_HINT });
    expect(EMBEDDED_CACHE_HINT).to.contain('DELETE /admin/cache');
    for (const argv of [
      ['cache'],
      ['cache', 'purge'],
      ['cache', 'clear', '--key', 'key_a', '--team', 'ops'],
      ['cache', 'clear', 'everything'],
      ['cache', 'clear', '--tenant', 'x'],
      ['cache', 'clear', '--team='],
    ]) {
      const refused = await cli(argv, env);
      expect(refused.code, argv.join(' ')).to.equal(2);
      expect(refused.err, argv.join(' ')).to.contain('Usage:\n  cache clear [--key KEY_ID | --team NAME]');
    }
    expect((await cli(['cache', 'clear', '--key', 'key_a', '--team', 'ops'], env)).err).to.match(
      /^cache clear takes --key or --team, not both/,
    );
  });

  describe('on Redis', () => {
    let server: TestRedisServer;
    let client: RedisConnection;
    let cache: RedisResponseCache;
    let redisEnv: NodeJS.ProcessEnv;

    before(async () => {
      server = await TestRedisServer.start();
    });
    after(async () => server.close());
    beforeEach(async () => {
      client = createRedisClient(server.url);
      expect(await waitUntilReady(client, 5000)).to.equal(true);
      await client.flushall();
      cache = new RedisResponseCache(client, { logger: createLogger('silent') });
      redisEnv = { ...env, REDIS_URL: server.url };
    });
    afterEach(() => client.disconnect());

    /** Stores `count` entries for the tenant and waits until they can be read (a set is fire and forget). */
    async function store(tenant: CacheTenant, count: number): Promise<void> {
      for (let index = 0; index < count; index += 1) cache.set(tenant, `${'0'.repeat(63)}${index}`, ANSWER, 60_000);
      await eventually(
        async () => (await cache.get(tenant, `${'0'.repeat(63)}${count - 1}`)) !== undefined,
        `${tenant}'s entries`,
      );
    }

    it("empties a key's tenant (its team's when it names one), a team's, then every entry, and says whose", async () => {
      const teams = new RedisTeamStore(client);
      const keys = new RedisKeyStore(client);
      const research = (await teams.create({ name: 'research' })).id;
      const loner = (await keys.create({ name: 'loner' })).record.id;
      const member = (await keys.create({ name: 'member', team: 'research' })).record.id;
      await store(`key:${loner}`, 2);
      await store(`team:${research}`, 3);
      await store('key:key_static', 1);

      expect(await cli(['cache', 'clear', '--key', member], redisEnv)).to.deep.include({
        code: 0,
        err: '',
        out: `Deleted 3 response cache entries of team research, whose entries key ${member} shares.\n`,
      });
      expect(await cache.get(`team:${research}`, `${'0'.repeat(63)}0`)).to.equal(undefined);
      expect(await cache.get(`key:${loner}`, `${'0'.repeat(63)}0`)).not.to.equal(undefined);
      expect(await cli(['cache', 'clear', '--team', 'research'], redisEnv)).to.deep.include({
        code: 0,
        out: 'Deleted 0 response cache entries of team research.\n',
      });
      expect(await cli(['cache', 'clear', '--key', loner], redisEnv)).to.deep.include({
        code: 0,
        out: `Deleted 2 response cache entries of key ${loner}.\n`,
      });
      expect(await cache.get('key:key_static', `${'0'.repeat(63)}0`)).not.to.equal(undefined);
      expect(await cli(['cache', 'clear'], redisEnv)).to.deep.include({
        code: 0,
        out: 'Deleted 1 response cache entry of every key and team.\n',
      });
      expect(await cache.get('key:key_static', `${'0'.repeat(63)}0`)).to.equal(undefined);
      // The stores are untouched.
      expect((await keys.list()).map((record) => record.id)).to.have.members([loner, member]);
      expect(await teams.get('research')).not.to.equal(undefined);
    });

    it("empties a revoked key's and a deleted team's entries, and clears what a deleted team left by its name", async () => {
      const teams = new RedisTeamStore(client);
      const keys = new RedisKeyStore(client);
      const team = await teams.create({ name: 'gone' });
      const member = (await keys.create({ name: 'member', team: 'gone' })).record.id;
      const loner = (await keys.create({ name: 'loner' })).record.id;
      await store(`team:${team.id}`, 2);
      await store(`key:${loner}`, 1);
      await store('key:key_static', 1);
      expect(await cli(['keys', 'revoke', loner], redisEnv)).to.deep.include({
        code: 0,
        out:
          `Revoked ${loner}; every gateway instance refuses it within a second ` +
          '(1 entry of its response cache emptied).\n',
      });
      const revoked = await cli(['keys', 'revoke', member], redisEnv);
      expect(revoked.out).to.contain('(0 entries of its response cache emptied)');
      const deleted = await cli(['teams', 'delete', 'gone'], redisEnv);
      expect(deleted).to.deep.include({
        code: 0,
        out: 'Deleted team gone (2 entries of its response cache emptied).\n',
      });
      expect(await cache.get(`team:${team.id}`, `${'0'.repeat(63)}0`)).to.equal(undefined);
      // What a request still in flight at the delete stored afterwards.
      await store(`team:${team.id}`, 1);
      const left = await cli(['cache', 'clear', '--team', 'gone'], redisEnv);
      expect(left).to.deep.include({ code: 0, out: 'Deleted 1 response cache entry of team gone.\n' });
      const rest = await cli(['cache', 'clear'], redisEnv);
      expect(rest).to.deep.include({ code: 0, out: 'Deleted 1 response cache entry of every key and team.\n' });
    });

    it('fails (exit 1) for an unknown key id or team, emptying nothing', async () => {
      await store('team:research', 1);
      expect(await cli(['cache', 'clear', '--key', 'key_nobody'], redisEnv)).to.deep.include({
        code: 1,
        out: '',
        err: "No API key with id 'key_nobody'\n",
      });
      expect(await cli(['cache', 'clear', '--team', 'research'], redisEnv)).to.deep.include({
        code: 1,
        out: '',
        err: "No team named 'research'\n",
      });
      expect(await cache.get('team:research', `${'0'.repeat(63)}0`)).not.to.equal(undefined);
    });
  });
});
