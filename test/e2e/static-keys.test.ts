import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { Redis } from 'ioredis';
import { staticKeyId } from '../../src/core/static-key-id.ts';
import {
  legacyStaticKeyId,
  LEGACY_SECRET_FILE,
  LEGACY_SECRET_REDIS_KEY,
} from '../../src/stores/keys/legacy-key-ids.ts';
import { EmbeddedUsageStore } from '../../src/stores/usage/embedded-usage-store.ts';
import { buildUsageRecord } from '../../src/usage/usage-accounting.ts';
import { eventually } from '../helpers/eventually.ts';
import { TestRedisServer } from '../helpers/redis-server.ts';
import { startTestGateway, TEST_KEY, type TestGateway } from '../helpers/test-gateway.ts';

const CHAT = { model: 'zeta/zeta-k3', messages: [{ role: 'user', content: 'hi' }] };

async function chat(url: string): Promise<number> {
  const answer = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TEST_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify(CHAT),
  });
  await answer.arrayBuffer();
  return answer.status;
}

/** Requests the static key's own usage read-back counts, through one instance. */
async function requestsSeenBy(url: string): Promise<number> {
  const answer = await fetch(`${url}/v1/usage`, { headers: { authorization: `Bearer ${TEST_KEY}` } });
  expect(answer.status).to.equal(200);
  const body = (await answer.json()) as { data: { requests: number }[] };
  return body.data.reduce((sum, row) => sum + row.requests, 0);
}

/** A gateway whose access log is kept, so the key id each request was served under can be read. */
async function loggedGateway(env: NodeJS.ProcessEnv, dataDir?: string): Promise<TestGateway & { keyIds(): string[] }> {
  let logged = '';
  const log = new PassThrough().on('data', (chunk: Buffer) => (logged += chunk.toString()));
  const test = await startTestGateway({ env: { LOG_LEVEL: 'info', ...env }, logTo: log, dataDir });
  const keyIds = () =>
    logged
      .split('\n')
      .filter((line) => line.includes('"msg":"request"'))
      .map((line) => (JSON.parse(line) as { key_id?: string }).key_id)
      // Lines of requests that carried a key (not /readyz).
      .filter((id): id is string => id !== undefined);
  return Object.assign(test, { keyIds, logged: () => logged });
}

describe('static keys need nothing but their configuration', function () {
  this.timeout(90_000);
  let redis: TestRedisServer;
  const gateways: TestGateway[] = [];

  beforeEach(async () => {
    redis = await TestRedisServer.start();
  });
  afterEach(async () => {
    redis.resume();
    await Promise.all(gateways.splice(0).map((gateway) => gateway.close()));
    await redis.close();
  });

  it('serves a static key while Redis is absent at start, then while it is SIGSTOPped, under one id derived from the key', async () => {
    await redis.stop();
    const gateway = await loggedGateway({ REDIS_URL: redis.url });
    gateways.push(gateway);
    const whileAbsent = await Promise.all(Array.from({ length: 20 }, () => chat(gateway.url)));
    expect(whileAbsent).to.deep.equal(Array(20).fill(200));
    await redis.restart();
    // Back on a Redis that answers the gateway's own connection, before that Redis is stopped.
    await eventually(
      async () => ((await (await fetch(`${gateway.url}/readyz`)).json()) as { redis: string }).redis === 'ready',
      'the gateway to reach Redis',
      60_000,
    );
    expect(await chat(gateway.url)).to.equal(200);
    redis.pause();
    const whileStopped = await Promise.all(Array.from({ length: 20 }, () => chat(gateway.url)));
    expect(whileStopped).to.deep.equal(Array(20).fill(200));
    redis.resume();
    await eventually(() => gateway.keyIds().length >= 41, 'the access-log lines');
    expect(new Set(gateway.keyIds())).to.deep.equal(new Set([staticKeyId(TEST_KEY)]));
  });

  it('gives a static key one id and one usage on every instance, across a Redis restarted empty and an instance started after', async () => {
    const [a, b] = [await loggedGateway({ REDIS_URL: redis.url }), await loggedGateway({ REDIS_URL: redis.url })];
    gateways.push(a, b);
    expect([await chat(a.url), await chat(b.url)]).to.deep.equal([200, 200]);
    // No persistence: the restarted Redis is empty.
    await redis.restart();
    const c = await loggedGateway({ REDIS_URL: redis.url });
    gateways.push(c);
    for (const gateway of [a, b])
      await eventually(
        async () => (await chat(gateway.url)) === 200 && !gateway.gateway.limits.degraded(),
        'the instance back on Redis',
        30_000,
      );
    expect(await chat(c.url)).to.equal(200);
    await Promise.all([a, b, c].map((gateway) => gateway.gateway.flushUsage()));
    const raw = new Redis(redis.url);
    try {
      expect(await raw.exists(LEGACY_SECRET_REDIS_KEY), 'no installation secret is made').to.equal(0);
    } finally {
      raw.disconnect();
    }
    const seen = await Promise.all([a, b, c].map((gateway) => requestsSeenBy(gateway.url)));
    expect(seen[0]).to.be.at.least(3);
    expect(seen, 'the same usage read back through every instance').to.deep.equal([seen[0], seen[0], seen[0]]);
    const ids = new Set([a, b, c].flatMap((gateway) => gateway.keyIds()));
    expect(ids).to.deep.equal(new Set([staticKeyId(TEST_KEY)]));
  });

  it('derives ids under GATEWAY_KEY_ID_SECRET when it is set, the same on every instance', async () => {
    const secret = randomBytes(32).toString('hex');
    const [a, b] = [
      await loggedGateway({ REDIS_URL: redis.url, GATEWAY_KEY_ID_SECRET: secret }),
      await loggedGateway({ GATEWAY_KEY_ID_SECRET: secret }),
    ];
    gateways.push(a, b);
    expect([await chat(a.url), await chat(b.url)]).to.deep.equal([200, 200]);
    await eventually(() => a.keyIds().length === 1 && b.keyIds().length === 1, 'the access-log lines');
    expect([...a.keyIds(), ...b.keyIds()]).to.deep.equal([
      staticKeyId(TEST_KEY, secret),
      staticKeyId(TEST_KEY, secret),
    ]);
    expect(a.keyIds()[0]).not.to.equal(staticKeyId(TEST_KEY));
  });

  it("reads usage recorded under the previous scheme's id (Redis) back under the new one", async () => {
    const secret = randomBytes(32);
    const raw = new Redis(redis.url);
    await raw.set(LEGACY_SECRET_REDIS_KEY, secret.toString('base64url'));
    raw.disconnect();
    const gateway = await loggedGateway({ REDIS_URL: redis.url });
    gateways.push(gateway);
    // What a gateway of the previous release recorded for this key: one request under its old id.
    gateway.gateway.usage.record(oldRecord(legacyStaticKeyId(TEST_KEY, secret)));
    expect(await chat(gateway.url)).to.equal(200);
    await gateway.gateway.flushUsage();
    expect(await requestsSeenBy(gateway.url)).to.equal(2);
  });
});

describe('static key ids of the previous scheme, embedded store', function () {
  this.timeout(30_000);

  it('reads usage recorded under the old id (data directory secret) back under the new one', async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'gateway-legacy-ids-'));
    try {
      const secret = randomBytes(32);
      await writeFile(join(dataDir, LEGACY_SECRET_FILE), `${secret.toString('base64url')}\n`, { mode: 0o600 });
      const before = await EmbeddedUsageStore.open(dataDir);
      before.record(oldRecord(legacyStaticKeyId(TEST_KEY, secret)));
      before.record(oldRecord(legacyStaticKeyId(TEST_KEY, secret)));
      await before.close();
      const gateway = await loggedGateway({}, dataDir);
      try {
        expect(await chat(gateway.url)).to.equal(200);
        await gateway.gateway.flushUsage();
        expect(await requestsSeenBy(gateway.url)).to.equal(3);
      } finally {
        await gateway.close();
      }
    } finally {
      await rm(dataDir, { recursive: true, force: true });
    }
  });
});

function oldRecord(keyId: string) {
  return buildUsageRecord({
    keyId,
    route: 'chat-completions',
    requestedModel: 'zeta/zeta-k3',
    model: 'zeta/zeta-k3',
    upstream: 'zeta',
    status: 200,
    stream: false,
    latencyMs: 5,
    usage: { inputTokens: 3, outputTokens: 4, cachedTokens: 0 },
    pricing: { input: 0, output: 0, cachedInput: 0 },
  });
}
