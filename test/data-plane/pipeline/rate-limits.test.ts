import { expect } from 'chai';
import { describeWindow } from '../../../src/usage/limit-meters.ts';
import { withinOneWindow } from '../../helpers/limit-window.ts';
import { writeFile, mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Cluster } from 'ioredis';
import { request } from 'undici';
import { hashApiKey } from '../../../src/core/api-keys.ts';
import { RedisKeyStore } from '../../../src/stores/keys/redis-key-store.ts';

import { startMockUpstream, type MockUpstream } from '../../../mock-upstream/mock-upstream-server.ts';
import { GatewayProcess } from '../../helpers/gateway-process.ts';
import { TestRedisCluster, TestRedisServer } from '../../helpers/redis-server.ts';
import { startTestGateway, TEST_KEY } from '../../helpers/test-gateway.ts';
import { eventually } from '../../helpers/eventually.ts';

const body = JSON.stringify({ model: 'zeta/zeta-k3', messages: [{ role: 'user', content: 'x' }] });
async function chat(url: string, key = TEST_KEY) {
  const response = await request(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}` },
    body,
  });
  return {
    status: response.statusCode,
    headers: response.headers,
    body: (await response.body.json()) as Record<string, any>,
  };
}

const upstreamEnv = (upstream: MockUpstream) => ({ ZETA_BASE_URL: upstream.url, ZETA_API_KEY: 'k' });

describe('rate limits', () => {
  it('describes the window in the 429 text', () => {
    expect([60_000, 1000, 90_000, 3_600_000, 7_200_000, 1500].map(describeWindow)).to.deep.equal([
      '1 minute',
      '1 second',
      '90 seconds',
      '1 hour',
      '2 hours',
      '1500 milliseconds',
    ]);
  });

  it('answers the 101st request of a minute with 429, RateLimit headers and Retry-After', async function () {
    // It may first wait up to 20 s for a minute with room for its 100 requests.
    this.timeout(60_000);
    const test = await startTestGateway();
    try {
      await withinOneWindow(20_000);
      for (let index = 0; index < 100; index += 1) expect((await chat(test.url)).status).to.equal(200);
      const refused = await chat(test.url);
      expect(refused.status).to.equal(429);
      expect(refused.body.detail).to.equal('Rate limit exceeded: 100 per 1 minute');
      expect(refused.body.error.type).to.equal('rate_limit_error');
      expect(Number(refused.headers['retry-after'])).to.be.within(1, 60);
      expect(refused.headers.ratelimit).to.match(/r=0/);
      expect(refused.headers['ratelimit-policy']).to.match(/q=100; w=60/);
      expect(test.allRequests()).to.have.length(100);
    } finally {
      await test.close();
    }
  });

  it("applies a key's own limit, and counts the catalog per client address", async () => {
    const test = await startTestGateway({ env: { RATE_LIMIT_MAX: '3' } });
    try {
      const { key } = await test.gateway.keys.create({ name: 'small', rpm: 2 });
      await withinOneWindow(10_000);
      expect((await chat(test.url, key)).status).to.equal(200);
      expect((await chat(test.url, key)).status).to.equal(200);
      const refused = await chat(test.url, key);
      expect(refused.body.detail).to.equal('Rate limit exceeded: 2 per 1 minute');
      expect((await chat(test.url)).status).to.equal(200);
      const statuses = [];
      for (let index = 0; index < 4; index += 1) statuses.push((await request(`${test.url}/v1/models`)).statusCode);
      expect(statuses).to.deep.equal([200, 200, 200, 429]);
    } finally {
      await test.close();
    }
  });
});

describe('rate limits: a request refused by any limit counts against none', function () {
  this.timeout(60_000);
  const ADMIN = 'admin-token-for-all-or-none-0123456789';
  const admin = { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' };

  it("does not spend its team's rpm on a key's requests refused by the key's own rpm", async () => {
    const test = await startTestGateway({ env: { GATEWAY_ADMIN_TOKEN: ADMIN } });
    try {
      expect(
        (
          await request(`${test.url}/admin/teams`, {
            method: 'POST',
            headers: admin,
            body: JSON.stringify({ name: 'squad', rpm: 20 }),
          })
        ).statusCode,
      ).to.equal(201);
      const a = await test.gateway.keys.create({ name: 'a', rpm: 2, team: 'squad' });
      const b = await test.gateway.keys.create({ name: 'b', team: 'squad' });
      await withinOneWindow(20_000);
      const fromA = [];
      for (let index = 0; index < 30; index += 1) fromA.push((await chat(test.url, a.key)).status);
      expect(fromA.filter((status) => status === 200)).to.have.length(2);
      const fromB = [];
      for (let index = 0; index < 19; index += 1) fromB.push((await chat(test.url, b.key)).status);
      // The team's 20: A's 2, then 18 of B's; A's 28 refusals took none of them.
      expect(fromB).to.deep.equal([...Array(18).fill(200), 429]);
    } finally {
      await test.close();
    }
  });

  it('gives a request refused by its tokens per minute back to its rpm', async () => {
    const test = await startTestGateway();
    try {
      const { key } = await test.gateway.keys.create({ name: 'small tpm', rpm: 3, tpm: 200 });
      await withinOneWindow(20_000);
      const big = JSON.stringify({ model: 'zeta/zeta-k3', messages: [{ role: 'user', content: 'x'.repeat(4000) }] });
      for (let index = 0; index < 5; index += 1) {
        const refused = await request(`${test.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${key}` },
          body: big,
        });
        expect(refused.statusCode).to.equal(429);
        expect(((await refused.body.json()) as { error: { code: string } }).error.code).to.equal(
          'GW_ERR_TOKEN_RATE_LIMITED',
        );
      }
      const small = await request(`${test.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}` },
        body: JSON.stringify({ model: 'zeta/zeta-k3', max_tokens: 10, messages: [{ role: 'user', content: 'x' }] }),
      });
      expect(small.statusCode).to.equal(200);
      // Only the request served is counted: 2 of the 3 left.
      expect(small.headers['x-ratelimit-remaining-requests']).to.equal('2');
      await small.body.dump();
    } finally {
      await test.close();
    }
  });
});

describe('rate limits and keys shared on Redis across gateway processes', function () {
  this.timeout(60_000);
  let redis: TestRedisServer;
  let upstream: MockUpstream;
  let dataDir: string;

  before(async () => {
    redis = await TestRedisServer.start();
    upstream = await startMockUpstream();
    dataDir = await mkdtemp(join(tmpdir(), 'gateway-procs-'));
  });
  after(async () => {
    await upstream.close();
    await redis.close();
  });

  it('lets exactly the limit through across 3 processes with round-robin clients', async () => {
    const env = {
      REDIS_URL: redis.url,
      RATE_LIMIT_MAX: '30',
      GATEWAY_API_KEYS: TEST_KEY,
      GATEWAY_DATA_DIR: dataDir,
      ...upstreamEnv(upstream),
    };
    const gateways = await Promise.all([1, 2, 3].map(() => GatewayProcess.start(env)));
    try {
      await withinOneWindow(20_000);
      const statuses: number[] = [];
      for (let round = 0; round < 30; round += 1) {
        statuses.push(...(await Promise.all(gateways.map(async (gateway) => (await chat(gateway.url)).status))));
      }
      expect(statuses.filter((status) => status === 200)).to.have.length(30);
      expect(statuses.filter((status) => status === 429)).to.have.length(60);
    } finally {
      await Promise.all(gateways.map((gateway) => gateway.stop()));
    }
  });

  it('keeps serving through a Redis stop and restart, and says so in readiness and logs', async () => {
    const env = {
      REDIS_URL: redis.url,
      RATE_LIMIT_MAX: '1000',
      GATEWAY_API_KEYS: TEST_KEY,
      GATEWAY_DATA_DIR: dataDir,
      ...upstreamEnv(upstream),
    };
    const gateway = await GatewayProcess.start(env);
    try {
      expect((await chat(gateway.url)).status).to.equal(200);
      await redis.stop();
      for (let index = 0; index < 5; index += 1) expect((await chat(gateway.url)).status).to.equal(200);
      const ready = (await (await request(`${gateway.url}/readyz`)).body.json()) as Record<string, string>;
      expect(ready).to.deep.include({ status: 'degraded', redis: 'unavailable', rate_limits: 'per-process' });
      expect(gateway.logs.join('')).to.contain('counting in process memory');
      await redis.restart();
      await eventually(
        async () => {
          await chat(gateway.url);
          return (
            ((await (await request(`${gateway.url}/readyz`)).body.json()) as Record<string, string>).status === 'ok'
          );
        },
        'readiness to recover',
        10_000,
      );
      // Logged before readiness turned ok, but it reaches this process through a pipe, maybe after the answer.
      await eventually(() => gateway.logs.join('').includes('counting in Redis again'), 'the recovery log line');
    } finally {
      await gateway.stop();
    }
  });

  it('refuses a key revoked on one process at another within a second, and never logs a key or hash', async () => {
    const env = {
      REDIS_URL: redis.url,
      GATEWAY_ADMIN_TOKEN: 'admin-secret-0123456789abcdef-0001',
      GATEWAY_DATA_DIR: dataDir,
      ...upstreamEnv(upstream),
    };
    const [first, second] = await Promise.all([GatewayProcess.start(env), GatewayProcess.start(env)]);
    try {
      const created = await request(`${first!.url}/admin/keys`, {
        method: 'POST',
        headers: { authorization: 'Bearer admin-secret-0123456789abcdef-0001' },
        body: JSON.stringify({ name: 'shared' }),
      });
      const { id, key } = (await created.body.json()) as { id: string; key: string };
      expect((await chat(second!.url, key)).status).to.equal(200);
      await request(`${first!.url}/admin/keys/${id}`, {
        method: 'DELETE',
        headers: { authorization: 'Bearer admin-secret-0123456789abcdef-0001' },
      });
      await new Promise((resolve) => setTimeout(resolve, 1000));
      const refused = await chat(second!.url, key);
      expect(refused.status).to.equal(403);
      expect(JSON.stringify(refused.body)).not.to.contain(key);
      for (const logs of [first!.logs.join(''), second!.logs.join('')]) {
        expect(logs).not.to.contain(key);
        expect(logs).not.to.contain(hashApiKey(key));
        expect(logs).not.to.contain('admin-secret-0123456789abcdef-0001');
      }
    } finally {
      await Promise.all([first!.stop(), second!.stop()]);
    }
  });
});

describe('rate limits and keys on a Redis Cluster', function () {
  this.timeout(90_000);

  it('work unchanged on three masters', async () => {
    const cluster = await TestRedisCluster.start();
    const upstream = await startMockUpstream();
    const dir = await mkdtemp(join(tmpdir(), 'gateway-cluster-'));
    const configPath = join(dir, 'gateway.yaml');
    await writeFile(
      configPath,
      `redis:\n  cluster:\n${cluster.startupNodes.map((node) => `    - { host: ${node.host}, port: ${node.port} }`).join('\n')}\n`,
    );
    const client = new Cluster(cluster.startupNodes);
    const gateways: GatewayProcess[] = [];
    try {
      const keys = new RedisKeyStore(client);
      const { key, record } = await keys.create({ name: 'cluster' });
      const env = { GATEWAY_CONFIG: configPath, RATE_LIMIT_MAX: '5', GATEWAY_DATA_DIR: dir, ...upstreamEnv(upstream) };
      gateways.push(await GatewayProcess.start(env), await GatewayProcess.start(env));
      const statuses: number[] = [];
      await withinOneWindow(10_000);
      for (let index = 0; index < 8; index += 1) statuses.push((await chat(gateways[index % 2]!.url, key)).status);
      expect(statuses).to.deep.equal([200, 200, 200, 200, 200, 429, 429, 429]);
      await keys.revoke(record.id);
      await new Promise((resolve) => setTimeout(resolve, 1000));
      expect((await chat(gateways[0]!.url, key)).status).to.equal(403);
      expect((await chat(gateways[0]!.url, 'sk-not-a-known-key-123')).status).to.equal(401);
    } finally {
      await Promise.all(gateways.map((gateway) => gateway.stop()));
      client.disconnect();
      await upstream.close();
      await cluster.close();
    }
  });
});
