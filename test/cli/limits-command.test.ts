import { expect } from 'chai';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runCli } from '../../src/cli/main.ts';
import { FileKeyStore } from '../../src/stores/keys/file-key-store.ts';
import { RedisKeyStore } from '../../src/stores/keys/redis-key-store.ts';
import { FileTeamStore } from '../../src/stores/teams/file-team-store.ts';
import { RedisTeamStore } from '../../src/stores/teams/redis-team-store.ts';
import { EmbeddedLedger } from '../../src/stores/limits/embedded-ledger.ts';
import { RedisLedger } from '../../src/stores/limits/redis-ledger.ts';
import { createRedisClient, waitUntilReady } from '../../src/stores/redis/redis-client.ts';
import { createLogger } from '../../src/core/logger.ts';
import { metersOfLimits, requestMeter } from '../../src/usage/limit-meters.ts';
import type { Limits } from '../../src/core/limits.ts';
import type { LimitLedger } from '../../src/usage/limit-ledger.ts';
import { TestRedisServer } from '../helpers/redis-server.ts';

async function cli(argv: string[], env: NodeJS.ProcessEnv): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await runCli(argv, { out: (text) => (out += text), err: (text) => (err += text) }, env);
  return { code, out, err };
}

/** Uses `amount` of each of an owner's limits, as admitted requests would. */
async function use(
  ledger: LimitLedger,
  scope: 'key' | 'team',
  owner: string,
  limits: Limits,
  amounts: number[],
): Promise<void> {
  const meters = metersOfLimits(scope, owner, limits, Date.now());
  await ledger.reserve(
    meters.map((meter, index) => ({
      counter: meter.counter,
      limit: meter.limit,
      want: amounts[index]!,
      need: 0,
      resetAt: meter.resetAt,
    })),
  );
  await ledger.flush();
}

describe('CLI: limits', function () {
  this.timeout(30_000);
  const logger = createLogger('silent');

  it("prints every key's and team's limits and use from the data directory, requests and tokens per minute left to the server", async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'gateway-cli-limits-'));
    try {
      const teams = new FileTeamStore(dataDir);
      const research = await teams.create({ name: 'research', budget: { daily_usd: 2 } });
      const keys = new FileKeyStore(dataDir);
      const { record } = await keys.create({
        name: 'svc',
        tpm: 5000,
        quota: { daily: 1000 },
        team: 'research',
        rpm: 30,
      });
      await keys.create({ name: 'plain' });
      const ledger = await EmbeddedLedger.open(dataDir, logger);
      await use(ledger, 'key', record.id, { tpm: 5000, quota: { daily: 1000 } }, [100, 250]);
      await use(ledger, 'team', research.id, { budget: { daily_usd: 2 } }, [500_000_000]);
      await ledger.close();

      const table = await cli(['limits'], { GATEWAY_DATA_DIR: dataDir });
      expect(table.code, table.err).to.equal(0);
      const lines = table.out.split('\n');
      expect(lines[0]).to.match(/^owner\s+limit\s+used\s+of\s+left\s+percent\s+resets$/);
      expect(lines.find((line) => line.startsWith('key svc') && line.includes('requests per minute'))).to.match(
        /key svc \(key_[0-9a-f]{16}\), team research\s+requests per minute\s+not counted here\s+30$/,
      );
      // A key without an rpm of its own has the gateway's default (RATE_LIMIT_MAX).
      expect(lines.find((line) => line.startsWith('key plain'))).to.match(
        /key plain \(key_[0-9a-f]{16}\)\s+requests per minute\s+not counted here\s+100$/,
      );
      expect(lines.find((line) => line.includes('tokens per minute'))).to.include('not counted here');
      expect(lines.find((line) => line.includes('charged tokens today'))).to.match(
        /charged tokens today \(UTC\)\s+250\s+1000\s+750\s+25 %\s+\d{4}-\d{2}-\d{2}T00:00:00\.000Z/,
      );
      expect(lines.find((line) => line.startsWith('team research'))).to.match(
        /USD today \(UTC\)\s+0\.5\s+2\s+1\.5\s+25 %/,
      );
      expect(lines.filter((line) => line.includes('plain'))).to.have.length(1);

      const json = await cli(['limits', '--json'], { GATEWAY_DATA_DIR: dataDir });
      const view = JSON.parse(json.out) as { teams: { name: string; use: { used: number }[] }[] };
      expect(view.teams[0]).to.deep.include({ name: 'research' });
      expect(view.teams[0]!.use[0]!.used).to.equal(0.5);
      expect((await cli(['limits', 'extra'], { GATEWAY_DATA_DIR: dataDir })).code).to.equal(2);
    } finally {
      await rm(dataDir, { recursive: true, force: true });
    }
  });

  it('reads the shared counters on Redis, tokens per minute included', async () => {
    const server = await TestRedisServer.start();
    const dataDir = await mkdtemp(join(tmpdir(), 'gateway-cli-limits-'));
    const redis = createRedisClient(server.url, logger);
    try {
      await waitUntilReady(redis, 3000);
      const keys = new RedisKeyStore(redis);
      const ops = await new RedisTeamStore(redis).create({ name: 'ops', tpm: 900 });
      const { record } = await keys.create({ name: 'svc', tpm: 400, team: 'ops' });
      const ledger = new RedisLedger(redis, { logger });
      await use(ledger, 'key', record.id, { tpm: 400 }, [100]);
      await use(ledger, 'team', ops.id, { tpm: 900 }, [300]);
      // Three requests counted by the rate limiter on the key's request counter, against the default of 40.
      const rpm = requestMeter('key', record.id, 40, 60_000, Date.now());
      for (let i = 0; i < 3; i++)
        await ledger.reserve([{ counter: rpm.counter, limit: rpm.limit, want: 1, need: 1, resetAt: rpm.resetAt }]);
      const table = await cli(['limits'], { REDIS_URL: server.url, GATEWAY_DATA_DIR: dataDir, RATE_LIMIT_MAX: '40' });
      expect(table.code, table.err).to.equal(0);
      expect(table.out).to.match(/key svc \(key_[0-9a-f]{16}\), team ops\s+tokens per minute\s+100\s+400\s+300\s+25 %/);
      expect(table.out).to.match(/team ops\s+tokens per minute\s+300\s+900\s+600\s+33 %/);
      expect(table.out).to.match(/key svc \(key_[0-9a-f]{16}\), team ops\s+requests per minute\s+3\s+40\s+37\s+7 %/);
      expect(table.out).not.to.match(/^team ops\s+requests per minute/m);
    } finally {
      redis.disconnect();
      await server.close();
      await rm(dataDir, { recursive: true, force: true });
    }
  });
});
