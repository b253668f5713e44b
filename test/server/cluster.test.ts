import { expect } from 'chai';
import { withinOneWindow } from '../helpers/limit-window.ts';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import { startMockUpstream, type MockUpstream } from '../../mock-upstream/mock-upstream-server.ts';
import { assertWorkersShareState, workerCount } from '../../src/server/cluster.ts';
import { ConfigError, loadConfig } from '../../src/config/gateway-config.ts';
import { eventually } from '../helpers/eventually.ts';
import { GatewayProcess } from '../helpers/gateway-process.ts';
import { TestRedisServer } from '../helpers/redis-server.ts';

const KEY = 'sk-cluster-test-key-0001-0123456789abcdef';

describe('GATEWAY_WORKERS', () => {
  it('reads a count or auto, and refuses anything else', () => {
    expect(workerCount(undefined)).to.equal(1);
    expect(workerCount('3')).to.equal(3);
    expect(workerCount('auto', 6)).to.equal(6);
    for (const bad of ['0', '-1', 'two', '1.5'])
      expect(() => workerCount(bad), bad).to.throw(ConfigError, 'GATEWAY_WORKERS');
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
  const started = () =>
    [...gateway!.logs.join('').matchAll(/"worker":(\d+),"pid":(\d+),"msg":"worker started"/g)].map((match) =>
      Number(match[2]),
    );

  it('refuses to start two workers without Redis', async () => {
    let failure = '';
    await GatewayProcess.start({ GATEWAY_WORKERS: '2', GATEWAY_API_KEYS: KEY, GATEWAY_DATA_DIR: dataDir }).then(
      async (unexpected) => unexpected.kill(),
      (error: Error) => (failure = error.message),
    );
    expect(failure).to.contain('exited with 1').and.to.contain('needs Redis');
  });

  it('shares one rate limit through Redis, and replaces a killed worker', async () => {
    gateway = await GatewayProcess.start({
      GATEWAY_WORKERS: '2',
      REDIS_URL: redis.url,
      RATE_LIMIT_MAX: '4',
      ZETA_BASE_URL: upstream.url,
      GATEWAY_API_KEYS: KEY,
      GATEWAY_DATA_DIR: dataDir,
    });
    await eventually(() => started().length === 2, 'two workers');
    await eventually(
      () => (gateway!.logs.join('').match(/listening on/g) ?? []).length === 2,
      'both workers listening',
    );
    const statuses: number[] = [];
    // The last request below must fall in the window of these: the replacement takes a few seconds.
    await withinOneWindow(40_000);
    for (let i = 0; i < 8; i += 1) statuses.push(await ask(gateway.url));
    expect(statuses.filter((status) => status === 200)).to.have.length(4);
    expect(statuses.filter((status) => status === 429)).to.have.length(4);
    // Both workers served: the limit was shared, not counted per worker.
    const servedBy = () =>
      new Set([...gateway!.logs.join('').matchAll(/"worker":(\d+),"request_id"/g)].map((match) => match[1]));
    await eventually(() => servedBy().size === 2, 'access-log lines of both workers');

    const [victim] = started();
    process.kill(victim!, 'SIGKILL');
    await eventually(() => started().length === 3, 'a replacement worker');
    expect(started()[2]).not.to.equal(victim);
    await eventually(
      () => (gateway!.logs.join('').match(/listening on/g) ?? []).length === 3,
      'the replacement listening',
    );
    expect(gateway.logs.join('')).to.contain('worker died; starting a replacement');
    // Still served, and still over the shared limit.
    expect(await ask(gateway.url)).to.equal(429);
    expect(await gateway.stop()).to.equal(0);
    gateway = undefined;
  });

  /** The sum of every `gateway_requests_total` sample of one route in an exposition text. */
  const requestsOf = (text: string, route: string) =>
    [...text.matchAll(/^gateway_requests_total\{([^}]*)\} (\S+)$/gm)]
      .filter((match) => match[1]!.includes(`route="${route}"`))
      .reduce((sum, match) => sum + Number(match[2]), 0);
  const scrape = async (url: string) => {
    const response = await request(`${url}/metrics`, { reset: true });
    const body = await response.body.text();
    expect(response.statusCode, body).to.equal(200);
    return body;
  };
  /** Worker ids of the access-log lines of one route. */
  const workersOf = (route: string) =>
    new Set(
      [
        ...gateway!.logs
          .join('')
          .matchAll(new RegExp(`"worker":(\\d+),"request_id":"[^"]+","route":"${route.replace(/\//g, '\\/')}"`, 'g')),
      ].map((match) => match[1]),
    );
  const startTwoWorkers = async (env: NodeJS.ProcessEnv = {}) => {
    // A 20 s drain (the default is 120 s, as long as this suite's timeout): a shutdown held by a connection
    // still open ends within the test, and stop() still has to exit 0.
    gateway = await GatewayProcess.start({
      GATEWAY_WORKERS: '2',
      GATEWAY_DRAIN_MS: '20000',
      REDIS_URL: redis.url,
      RATE_LIMIT_MAX: '1000',
      ZETA_BASE_URL: upstream.url,
      GATEWAY_API_KEYS: KEY,
      GATEWAY_DATA_DIR: dataDir,
      ...env,
    });
    await eventually(
      () => (gateway!.logs.join('').match(/listening on/g) ?? []).length === 2,
      'both workers listening',
      30_000,
    );
  };
  const SENT = 9;

  it('answers /metrics on the shared main port for the whole gateway, whichever worker takes the scrape', async () => {
    await startTwoWorkers();
    for (let i = 0; i < SENT; i += 1) expect(await ask(gateway!.url)).to.equal(200);
    await eventually(() => workersOf('chat-completions').size === 2, 'requests served by both workers');
    // New connections, so the scrapes too are taken by both workers in turn; each sees every request.
    const totals: number[] = [];
    for (let i = 0; i < 4; i += 1) totals.push(requestsOf(await scrape(gateway!.url), 'chat-completions'));
    await eventually(() => workersOf('/metrics').size === 2, 'scrapes taken by both workers');
    expect(totals).to.deep.equal([SENT, SENT, SENT, SENT]);
    const text = await scrape(gateway!.url);
    // One series per label set, not one per worker; the defaults are aggregated too.
    expect(text.match(/^gateway_open_streams /gm)).to.have.length(1);
    expect(text.match(/^# TYPE gateway_requests_total counter$/gm)).to.have.length(1);
    expect(text).to.match(/^process_cpu_user_seconds_total \d/m);
    expect(await gateway!.stop()).to.equal(0);
    gateway = undefined;
  });

  it('serves the whole gateway on METRICS_PORT from the primary', async () => {
    await startTwoWorkers({ METRICS_PORT: '0' });
    const metricsUrl = /"metrics_url":"(http:\/\/[^"]+)"/.exec(gateway!.logs.join(''))?.[1];
    expect(metricsUrl, gateway!.logs.join('')).to.be.a('string');
    expect(requestsOf(await scrape(metricsUrl!), 'chat-completions')).to.equal(0);
    for (let i = 0; i < SENT; i += 1) expect(await ask(gateway!.url)).to.equal(200);
    await eventually(() => workersOf('chat-completions').size === 2, 'requests served by both workers');
    expect(requestsOf(await scrape(metricsUrl!), 'chat-completions')).to.equal(SENT);
    // The main port no longer answers /metrics.
    const main = await request(`${gateway!.url}/metrics`, { reset: true });
    expect(main.statusCode).to.equal(404);
    await main.body.dump();
    // A worker that cannot answer fails the scrape, rather than give a partial sum.
    const [frozen] = started();
    process.kill(frozen!, 'SIGSTOP');
    try {
      const refused = await request(`${metricsUrl}/metrics`, { reset: true });
      const body = (await refused.body.json()) as { detail: string };
      expect(refused.statusCode).to.equal(503);
      expect(refused.headers['retry-after']).to.equal('1');
      expect(body.detail).to.match(
        /metrics could not be gathered from every worker \(worker \d+ did not send its metrics within 3000 ms\)/,
      );
    } finally {
      process.kill(frozen!, 'SIGCONT');
    }
    expect(requestsOf(await scrape(metricsUrl!), 'chat-completions')).to.equal(SENT);
    expect(await gateway!.stop()).to.equal(0);
    gateway = undefined;
  });
});
