import { expect } from 'chai';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { runCli } from '../../../src/cli/main.ts';
import { verifyChain, type AuditEntry, type AuditStore } from '../../../src/stores/audit/audit-store.ts';
import { FileAuditStore } from '../../../src/stores/audit/file-audit-store.ts';
import { RedisAuditStore } from '../../../src/stores/audit/redis-audit-store.ts';
import { TestRedisServer } from '../../helpers/redis-server.ts';

const entry = (action: string, team: string | null = null): AuditEntry => ({
  time: new Date().toISOString(),
  actor: { kind: 'cli', id: 'ops', roles: ['admin'] },
  via: 'cli',
  address: null,
  action,
  outcome: 'ok',
  target: { type: 'key', id: `key_${action}`, team },
  before: null,
  after: { name: action },
  reason: null,
});

describe('audit stores: an append-only hash chain, shared by concurrent writers', function () {
  this.timeout(30_000);
  let redisServer: TestRedisServer;
  let redis: Redis;
  let dataDir: string;

  before(async () => {
    redisServer = await TestRedisServer.start();
    redis = new Redis(redisServer.url);
  });
  after(async () => {
    redis.disconnect();
    await redisServer.stop();
  });
  beforeEach(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'gateway-audit-'));
    await redis.flushall();
  });
  afterEach(async () => rm(dataDir, { recursive: true, force: true }));

  const stores: Record<string, () => AuditStore[]> = {
    file: () => [new FileAuditStore(dataDir), new FileAuditStore(dataDir)],
    redis: () => [new RedisAuditStore(redis), new RedisAuditStore(redis)],
  };

  for (const [name, make] of Object.entries(stores)) {
    it(`${name}: two writers appending at once make one unbroken chain, paged newest first with a filter`, async () => {
      const [one, two] = make();
      await Promise.all(
        Array.from({ length: 40 }, (_, index) =>
          (index % 2 ? one! : two!).append(entry(`a${index}`, index % 4 === 0 ? 'blue' : null)),
        ),
      );
      const all = await one!.all();
      expect(all.map((record) => record.seq)).to.deep.equal(Array.from({ length: 40 }, (_, index) => index + 1));
      expect(verifyChain(all, await two!.head())).to.deep.equal({ ok: true, records: 40 });
      const page = await one!.page((record) => record.target.team === 'blue', 3);
      expect(page.map((record) => record.target.team)).to.deep.equal(['blue', 'blue', 'blue']);
      expect(page[0]!.seq).to.be.greaterThan(page[1]!.seq);
      const next = await one!.page((record) => record.target.team === 'blue', 100, page[2]!.seq);
      expect(next).to.have.length(7);
    });
  }

  it('redis: audit verify in the CLI passes an intact log and names a record changed, removed or cut in Redis', async () => {
    const store = new RedisAuditStore(redis);
    for (const action of ['one', 'two', 'three', 'four']) await store.append(entry(action));
    const out: string[] = [];
    const io = { out: (text: string) => void out.push(text), err: (text: string) => void out.push(text) };
    const env = {
      REDIS_URL: redisServer.url,
      GATEWAY_CONFIG: join(dataDir, 'gateway.yaml'),
      GATEWAY_DATA_DIR: dataDir,
    };
    await writeFile(env.GATEWAY_CONFIG, 'logLevel: silent\n');
    expect(await runCli(['audit', 'verify'], io, env)).to.equal(0);
    expect(out.join('')).to.equal('Audit log intact: 4 records, every hash in the chain checked.\n');

    const second = await redis.lindex('{gateway-audit}:log', 1);
    await redis.lset('{gateway-audit}:log', 1, second!.replace('"name":"two"', '"name":"2"'));
    out.length = 0;
    expect(await runCli(['audit', 'verify'], io, env)).to.equal(1);
    expect(out.join('')).to.equal(
      'Audit log broken: record 2 was changed (its content does not give its hash). Records before 2 are intact.\n',
    );

    await redis.lset('{gateway-audit}:log', 1, second!);
    await redis.lrem('{gateway-audit}:log', 1, (await redis.lindex('{gateway-audit}:log', 2))!);
    out.length = 0;
    expect(await runCli(['audit', 'verify'], io, env)).to.equal(1);
    expect(out.join('')).to.equal(
      'Audit log broken: record 3 is missing (found 4 next). Records before 3 are intact.\n',
    );

    await redis.del('{gateway-audit}:log', '{gateway-audit}:head');
    for (const action of ['one', 'two']) await new RedisAuditStore(redis).append(entry(action));
    await redis.rpop('{gateway-audit}:log');
    out.length = 0;
    expect(await runCli(['audit', 'verify'], io, env)).to.equal(1);
    expect(out.join('')).to.equal(
      'Audit log broken: the log ends at record 1 but its head says 2: records were cut or the head changed. Records before 2 are intact.\n',
    );
  });
});
