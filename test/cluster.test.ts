import { expect } from 'chai';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import { startMockUpstream, type MockUpstream } from '../mock-upstream/mock-upstream-server.ts';
import { assertWorkersShareState, workerCount } from '../src/cluster.ts';
import { ConfigError, loadConfig } from '../src/config/gateway-config.ts';
import { eventually } from './helpers/eventually.ts';
import { GatewayProcess } from './helpers/gateway-process.ts';
import { TestRedisServer } from './helpers/redis-server.ts';

const KEY = 'sk-cluster-test-key-0001';

describe('GATEWAY_WORKERS', () => {
  it('reads a count or auto, and refuses anything else', () => {
    expect(workerCount(undefined)).to.equal(1);
    expect(workerCount('3')).to.equal(3);
    expect(workerCount('auto', 6)).to.equal(6);
    for (const bad of ['0', '-1', 'two', '1.5']) expect(() => workerCount(bad), bad).to.throw(ConfigError, 'GATEWAY_WORKERS');
  });

  it('refuses more than one worker without Redis, saying why', () => {
    const config = loadConfig({ GATEWAY_CONFIG: undefined });
    expect(() => assertWorkersShareState(1, config)).not.to.throw();
    expect(() => assertWorkersShareState(2, config)).to.throw(ConfigError, /needs Redis.*rate limits, usage and keys/);
    expect(() => assertWorkersShareState(2, { ...config, redis: { url: 'redis://127.0.0.1:6379' } })).not.to.throw();
  });
});

describe('a gateway with two workers', function () {
  this.timeout(120_000);
  let redis: TestRedisServer;
  let upstream: MockUpstream;
  let dataDir: string;
  let gateway: GatewayProcess | undefined;

  before(async () => {
    redis = await TestRedisServer.start();
    upstream = await startMockUpstream();
    dataDir = await mkdtemp(join(tmpdir(), 'gateway-cluster-'));
  });
  after(async () => {
    await gateway?.kill();
    await upstream.close();
    await redis.stop();
    await rm(dataDir, { recursive: true, force: true });
  });

  const ask = async (url: string) => {
    // A new connection each time, so the primary hands requests to the workers in turn.
    const response = await request(`${url}/v1/chat/completions`, {
      method: 'POST',
      reset: true,
      headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'zeta/zeta-k3', messages: [{ role: 'user', content: 'hi' }] }),
    });
    await response.body.dump();
    return response.statusCode;
  };
  const started = () => [...gateway!.logs.join('').matchAll(/"worker":(\d+),"pid":(\d+),"msg":"worker started"/g)].map((match) => Number(match[2]));

  it('refuses to start two workers without Redis', async () => {
    let failure = '';
    await GatewayProcess.start({ GATEWAY_WORKERS: '2', GATEWAY_API_KEYS: KEY, GATEWAY_DATA_DIR: dataDir }).then(
      async (unexpected) => unexpected.kill(),
      (error: Error) => (failure = error.message),
    );
    expect(failure).to.contain('exited with 1').and.to.contain('needs Redis');
  });

  it('shares one rate limit through Redis, and replaces a killed worker', async () => {
    gateway = await GatewayProcess.start({ GATEWAY_WORKERS: '2', REDIS_URL: redis.url, RATE_LIMIT_MAX: '4', ZETA_BASE_URL: upstream.url, GATEWAY_API_KEYS: KEY, GATEWAY_DATA_DIR: dataDir });
    await eventually(() => started().length === 2, 'two workers');
    await eventually(() => (gateway!.logs.join('').match(/listening on/g) ?? []).length === 2, 'both workers listening');
    const statuses: number[] = [];
    for (let i = 0; i < 8; i += 1) statuses.push(await ask(gateway.url));
    expect(statuses.filter((status) => status === 200)).to.have.length(4);
    expect(statuses.filter((status) => status === 429)).to.have.length(4);
    // Both workers served: the limit was shared, not counted per worker.
    const servedBy = () => new Set([...gateway!.logs.join('').matchAll(/"worker":(\d+),"request_id"/g)].map((match) => match[1]));
    await eventually(() => servedBy().size === 2, 'access-log lines of both workers');

    const [victim] = started();
    process.kill(victim!, 'SIGKILL');
    await eventually(() => started().length === 3, 'a replacement worker');
    expect(started()[2]).not.to.equal(victim);
    await eventually(() => (gateway!.logs.join('').match(/listening on/g) ?? []).length === 3, 'the replacement listening');
    expect(gateway.logs.join('')).to.contain('worker died; starting a replacement');
    // Still served, and still over the shared limit.
    expect(await ask(gateway.url)).to.equal(429);
    expect(await gateway.stop()).to.equal(0);
    gateway = undefined;
  });
});
