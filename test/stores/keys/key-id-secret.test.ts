import { expect } from 'chai';
import { createHash } from 'node:crypto';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { Redis } from 'ioredis';
import { fileKeyIdSecret, KEY_ID_SECRET_FILE, KEY_ID_SECRET_REDIS_KEY, redisKeyIdSecret } from '../../../src/stores/keys/key-id-secret.ts';
import { eventually } from '../../helpers/eventually.ts';
import { TestRedisServer } from '../../helpers/redis-server.ts';
import { startTestGateway, TEST_KEY } from '../../helpers/test-gateway.ts';

describe('key-id secret of an installation', function () {
  this.timeout(30_000);
  let dir: string;
  beforeEach(async () => (dir = await mkdtemp(join(tmpdir(), 'gateway-key-id-secret-'))));
  afterEach(async () => rm(dir, { recursive: true, force: true }));

  it('is made once in the data directory (mode 0600), and every reader, even racing ones, gets the same', async () => {
    const dataDir = join(dir, 'not-yet-made');
    const secrets = await Promise.all(Array.from({ length: 8 }, () => fileKeyIdSecret(dataDir)()));
    expect(secrets[0]).to.have.length(32);
    for (const secret of secrets) expect(secret.equals(secrets[0]!)).to.equal(true);
    expect(((await stat(join(dataDir, KEY_ID_SECRET_FILE))).mode & 0o777).toString(8)).to.equal('600');
    expect((await fileKeyIdSecret(dataDir)()).equals(secrets[0]!)).to.equal(true);
    expect((await fileKeyIdSecret(dir)()).equals(secrets[0]!), 'another data directory, another secret').to.equal(false);
  });

  it('refuses a file that holds no secret, naming the file but not its content', async () => {
    await writeFile(join(dir, KEY_ID_SECRET_FILE), 'too-short-to-be-it\n');
    let message = '';
    await fileKeyIdSecret(dir)().catch((error: Error) => (message = error.message));
    expect(message).to.contain(join(dir, KEY_ID_SECRET_FILE)).and.to.contain('does not hold a key-id secret');
    expect(message).not.to.contain('too-short-to-be-it');
  });

  it('with Redis is one for every instance sharing it', async () => {
    const redis = await TestRedisServer.start();
    const [first, second] = [new Redis(redis.url), new Redis(redis.url)];
    try {
      const [a, b] = await Promise.all([redisKeyIdSecret(first)(), redisKeyIdSecret(second)()]);
      expect(a).to.have.length(32);
      expect(a.equals(b)).to.equal(true);
      expect(await first.get(KEY_ID_SECRET_REDIS_KEY)).to.equal(a.toString('base64url'));
    } finally {
      first.disconnect();
      second.disconnect();
      await redis.close();
    }
  });
});

describe('static key ids in a running gateway', function () {
  this.timeout(60_000);

  /** The key_id the access log gives a request made with the static key, and everything logged. */
  async function keyIdOf(dataDir: string): Promise<{ id: string; logged: string }> {
    let logged = '';
    const log = new PassThrough().on('data', (chunk: Buffer) => (logged += chunk.toString()));
    const test = await startTestGateway({ dataDir, env: { LOG_LEVEL: 'info' }, logTo: log });
    try {
      const answer = await fetch(`${test.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TEST_KEY}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'zeta/zeta-k3', messages: [{ role: 'user', content: 'hi' }] }),
      });
      expect(answer.status).to.equal(200);
      await answer.text();
      await eventually(() => logged.includes('"msg":"request"'), 'the access-log line');
    } finally {
      await test.close();
    }
    const line = logged.split('\n').find((entry) => entry.includes('"msg":"request"'))!;
    return { id: (JSON.parse(line) as { key_id: string }).key_id, logged };
  }

  it('differ between installations, stay across a restart, are no SHA-256 prefix of the key, and the key is never logged', async () => {
    const [one, two] = [await mkdtemp(join(tmpdir(), 'gateway-install-')), await mkdtemp(join(tmpdir(), 'gateway-install-'))];
    try {
      const first = await keyIdOf(one);
      const again = await keyIdOf(one);
      const other = await keyIdOf(two);
      expect(first.id).to.match(/^static_[0-9a-f]{16}$/);
      expect(again.id, 'the same installation after a restart').to.equal(first.id);
      expect(other.id, 'another installation').not.to.equal(first.id);
      for (const hashed of [TEST_KEY, `gateway static key id:${TEST_KEY}`]) {
        expect(createHash('sha256').update(hashed).digest('hex')).not.to.contain(first.id.slice('static_'.length));
      }
      const secret = (await readFile(join(one, 'key-id-secret'), 'utf8')).trim();
      for (const { logged } of [first, again, other]) expect(logged).not.to.contain(TEST_KEY).and.not.to.contain(secret);
    } finally {
      await rm(one, { recursive: true, force: true });
      await rm(two, { recursive: true, force: true });
    }
  });
});
