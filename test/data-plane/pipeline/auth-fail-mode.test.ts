import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { request } from 'undici';
import { loadConfig } from '../../../src/config/gateway-config.ts';
import { TestRedisServer } from '../../helpers/redis-server.ts';
import { startTestGateway, TEST_KEY, type TestGateway } from '../../helpers/test-gateway.ts';
import { eventually, sleep } from '../../helpers/eventually.ts';

const GRACE_MS = 2000;

async function chat(url: string, key: string): Promise<{ status: number; retryAfter?: string; body: any }> {
  const response = await request(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'alpha-latest', messages: [{ role: 'user', content: 'x' }] }),
  });
  return {
    status: response.statusCode,
    retryAfter: response.headers['retry-after'] as string | undefined,
    body: await response.body.json(),
  };
}

describe('managed keys while Redis cannot be read (GATEWAY_AUTH_FAIL_MODE)', function () {
  this.timeout(60_000);
  let redis: TestRedisServer;
  let test: TestGateway | undefined;

  before(async () => {
    redis = await TestRedisServer.start();
  });
  afterEach(async () => {
    redis.resume();
    if (!redis.running) await redis.restart();
    await test?.close();
    test = undefined;
  });
  after(async () => redis.close());

  /** A gateway on the test's Redis with one managed key, read once from Redis (so its state is known). */
  async function gatewayWithKey(env: NodeJS.ProcessEnv): Promise<string> {
    test = await startTestGateway({ env: { REDIS_URL: redis.url, GATEWAY_AUTH_GRACE_MS: String(GRACE_MS), ...env } });
    const { key } = await test.gateway.keys.create({ name: 'managed' });
    expect((await chat(test.url, key)).status).to.equal(200);
    return key;
  }

  for (const [fault, cut] of [
    ['frozen (SIGSTOP)', () => redis.pause()],
    ['stopped', () => redis.stop()],
  ] as const) {
    it(`closed (the default), Redis ${fault}: a managed key is accepted during the grace, then refused with a JSON 503; static keys keep working`, async () => {
      const key = await gatewayWithKey({});
      const cutAt = Date.now();
      await cut();
      // Redis cannot be read, so a 200 comes from the key's state last read; in closed mode the store
      // answers from it only while that read is under GRACE_MS old (it throws past it, whenever the
      // request is decided), so the 200 is the acceptance during the grace.
      expect((await chat(test!.url, key)).status).to.equal(200);
      // The key was last read from Redis before the cut: past cutAt + GRACE_MS its grace is over.
      await sleep(GRACE_MS - (Date.now() - cutAt) + 200);
      const refused = await chat(test!.url, key);
      expect(refused.status).to.equal(503);
      expect(refused.retryAfter).to.equal('1');
      expect(refused.body.error).to.deep.include({ type: 'server_error', code: 'GW_ERR_UNAVAILABLE' });
      expect(refused.body.detail).to.equal('The key store is unavailable; please retry shortly');
      expect((await chat(test!.url, TEST_KEY)).status).to.equal(200);
      if (fault === 'frozen (SIGSTOP)') {
        redis.resume();
        await eventually(
          async () => (await chat(test!.url, key)).status === 200,
          'the key to be accepted once Redis answers again',
          10_000,
        );
      }
    });
  }

  it('open: a managed key is still accepted long after the grace while Redis is frozen, as static keys are', async () => {
    const key = await gatewayWithKey({ GATEWAY_AUTH_FAIL_MODE: 'open' });
    redis.pause();
    await sleep(GRACE_MS + 500);
    expect((await chat(test!.url, key)).status).to.equal(200);
    expect((await chat(test!.url, TEST_KEY)).status).to.equal(200);
  });
});

describe('GATEWAY_AUTH_FAIL_MODE and GATEWAY_AUTH_GRACE_MS', () => {
  it('default to closed after 30 s, are read from the file and env, and refuse anything else', async () => {
    const config = loadConfig({}, '/nonexistent');
    expect([config.authFailMode, config.authGraceMs]).to.deep.equal(['closed', 30_000]);
    const dir = await mkdtemp(join(tmpdir(), 'auth-fail-mode-'));
    try {
      const path = join(dir, 'gateway.yaml');
      await writeFile(path, 'server:\n  authFailMode: open\n  authGraceMs: 5000\n');
      const fromFile = loadConfig({ GATEWAY_CONFIG: path });
      expect([fromFile.authFailMode, fromFile.authGraceMs]).to.deep.equal(['open', 5000]);
      expect(loadConfig({ GATEWAY_CONFIG: path, GATEWAY_AUTH_FAIL_MODE: 'closed' }).authFailMode).to.equal('closed');
      await writeFile(path, 'server:\n  authFailMode: ajar\n');
      expect(() => loadConfig({ GATEWAY_CONFIG: path })).to.throw(
        /server\.authFailMode must be one of the following values: open, closed/,
      );
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
    const fromEnv = loadConfig({ GATEWAY_AUTH_FAIL_MODE: 'open', GATEWAY_AUTH_GRACE_MS: '0' }, '/nonexistent');
    expect([fromEnv.authFailMode, fromEnv.authGraceMs]).to.deep.equal(['open', 0]);
    expect(() => loadConfig({ GATEWAY_AUTH_FAIL_MODE: 'sometimes' }, '/nonexistent')).to.throw(
      "GATEWAY_AUTH_FAIL_MODE must be open or closed, got 'sometimes'",
    );
    expect(() => loadConfig({ GATEWAY_AUTH_GRACE_MS: '-1' }, '/nonexistent')).to.throw(
      /GATEWAY_AUTH_GRACE_MS must be an integer >= 0/,
    );
  });
});
