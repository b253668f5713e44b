import { expect } from 'chai';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { runCli } from '../../src/cli/main.ts';
import { FileKeyStore } from '../../src/stores/keys/file-key-store.ts';
import { RedisAlertLog } from '../../src/stores/alerts/redis-alert-log.ts';
import { FileTeamStore } from '../../src/stores/teams/file-team-store.ts';
import { createRedisClient, waitUntilReady } from '../../src/stores/redis/redis-client.ts';
import { TestRedisServer } from '../helpers/redis-server.ts';

async function cli(argv: string[], env: NodeJS.ProcessEnv): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await runCli(argv, { out: (text) => (out += text), err: (text) => (err += text) }, env);
  return { code, out, err };
}

const firing = {
  id: 'alrt_0123456789abcdef',
  scope: 'key' as const,
  owner: 'key_ab',
  team: 'eng',
  kind: 'budget' as const,
  period: 'day' as const,
  threshold: 80,
  used: 8.5,
  limit: 10,
  unit: 'usd' as const,
  window_end: '2026-01-02T00:00:00.000Z',
  fired_at: '2026-01-01T12:00:00.000Z',
};
const attempt = (number: number, outcome: 'retrying' | 'failed') => ({
  delivery: 'dlv_0123456789abcdef',
  alert: firing.id,
  owner: 'key_ab',
  team: 'eng',
  attempt: number,
  at: `2026-01-01T12:00:0${number}.000Z`,
  outcome,
  status: null,
  error: 'connection refused',
  next_attempt_at: outcome === 'retrying' ? '2026-01-01T12:00:09.000Z' : null,
});

describe('CLI alerts and the --alerts flags', function () {
  this.timeout(30_000);
  let dataDir: string;

  beforeEach(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'gateway-cli-alerts-'));
  });
  afterEach(async () => rm(dataDir, { recursive: true, force: true }));

  it('lists the last firings and the deliveries kept in Redis, as a table or JSON lines', async () => {
    const redis = await TestRedisServer.start();
    const connection = createRedisClient(redis.url, pino({ level: 'silent' }));
    try {
      expect(await waitUntilReady(connection, 3000)).to.equal(true);
      const env = { GATEWAY_DATA_DIR: dataDir, REDIS_URL: redis.url };
      expect(await cli(['alerts', 'list'], env)).to.deep.include({ code: 0, out: 'No limit alert has fired yet.\n' });
      const log = new RedisAlertLog(connection, pino({ level: 'silent' }));
      log.fired(firing);
      log.delivered(attempt(1, 'retrying'));
      log.delivered(attempt(2, 'failed'));
      await connection.ping();
      const listed = await cli(['alerts', 'list'], env);
      expect(listed.code).to.equal(0);
      const [header, row] = listed.out.trimEnd().split('\n');
      expect(header!.split(/\s+/)).to.deep.equal([
        'fired_at',
        'scope',
        'owner',
        'team',
        'kind',
        'period',
        'threshold',
        'used',
        'limit',
        'unit',
        'window_end',
        'id',
      ]);
      expect(row).to.match(/^2026-01-01T12:00:00.000Z\s+key\s+key_ab\s+eng\s+budget\s+day\s+80\s+8\.5\s+10\s+usd\s/);
      expect((await cli(['alerts', 'list', '--json'], env)).out).to.equal(`${JSON.stringify(firing)}\n`);
      const newest = await cli(['alerts', 'deliveries', '--limit', '1', '--json'], env);
      expect(
        newest.out
          .trimEnd()
          .split('\n')
          .map((line) => JSON.parse(line).outcome),
      ).to.deep.equal(['failed']);
      const both = await cli(['alerts', 'deliveries'], env);
      expect(
        both.out
          .trimEnd()
          .split('\n')
          .slice(1)
          .map((line) => line.split(/\s+/)[5]),
      ).to.deep.equal(['failed', 'retrying']);
      expect(await cli(['alerts', 'deliveries', '--limit', '0'], env)).to.deep.include({ code: 1 });
      expect(await cli(['alerts', 'list', '--limit', '3'], env)).to.deep.include({ code: 2 });
      expect(await cli(['alerts', 'forget'], env)).to.deep.include({ code: 2 });
    } finally {
      connection.disconnect();
      await redis.close();
    }
  });

  it('says where alerts are read without Redis (in the gateway process)', async () => {
    const answer = await cli(['alerts', 'list'], { GATEWAY_DATA_DIR: dataDir });
    expect(answer).to.deep.include({ code: 1, out: '' });
    expect(answer.err).to.contain('GET /admin/alerts');
  });

  it('sets, checks and clears the alerts of keys and teams', async () => {
    const env = { GATEWAY_DATA_DIR: dataDir };
    const created = await cli(['keys', 'create', '--name', 'alerted', '--daily-usd', '5', '--alerts', '25,75'], env);
    expect(created.code, created.err).to.equal(0);
    const [key] = await new FileKeyStore(dataDir).list();
    expect(key!.alerts).to.deep.equal([25, 75]);
    const refused = await cli(['keys', 'update', key!.id, '--alerts', '75,25'], env);
    expect(refused).to.deep.include({ code: 1 });
    expect(refused.err).to.contain(
      "Field '--alerts': must be a list of whole percents from 1 to 100 in ascending order",
    );
    expect((await cli(['keys', 'update', key!.id, '--alerts', ''], env)).code).to.equal(0);
    expect((await new FileKeyStore(dataDir).list())[0]!.alerts).to.deep.equal([]);
    expect((await cli(['keys', 'update', key!.id, '--clear', 'alerts'], env)).code).to.equal(0);
    expect((await new FileKeyStore(dataDir).list())[0]!.alerts).to.equal(undefined);
    expect(await cli(['teams', 'create', 'eng', '--monthly-usd', '100', '--alerts', '90'], env)).to.deep.include({
      code: 0,
      out: 'Created team eng ($100 a month, alerts at 90 %).\n',
    });
    expect((await cli(['teams', 'update', 'eng', '--alerts', 'x'], env)).err).to.contain("Field '--alerts[0]'");
    expect((await cli(['teams', 'update', 'eng', '--clear', 'alerts'], env)).code).to.equal(0);
    expect((await new FileTeamStore(dataDir).get('eng'))!.alerts).to.equal(undefined);
  });
});
