import { expect } from 'chai';
import { request } from 'undici';
import { createLogger } from '../../../src/core/logger.ts';
import { createRedisClient, waitUntilReady, type RedisConnection } from '../../../src/stores/redis/redis-client.ts';
import { EndpointPool, PooledEndpoint } from '../../../src/data-plane/upstream/endpoint-pool.ts';
import { SharedBreakerState } from '../../../src/data-plane/upstream/shared-breaker.ts';
import { upstreamEndpoint } from '../../../src/data-plane/upstream/upstream-client.ts';
import { eventually } from '../../helpers/eventually.ts';
import { TestRedisServer } from '../../helpers/redis-server.ts';
import { ScriptedUpstream } from '../../helpers/scripted-upstream.ts';
import { samplePlugins } from '../../plugins/sample-plugins.ts';
import { startRouteTestApp, type RouteTestApp } from '../routes/route-test-app.ts';

async function chat(app: RouteTestApp) {
  const response = await request(`${app.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'acme/one', messages: [{ role: 'user', content: 'hi' }] }),
  });
  await response.body.text();
  return response.statusCode;
}

describe('breaker state shared on Redis', function () {
  this.timeout(20_000);
  let server: TestRedisServer;
  let a: ScriptedUpstream;
  let b: ScriptedUpstream;
  const apps: RouteTestApp[] = [];
  const clients: RedisConnection[] = [];
  const shared: SharedBreakerState[] = [];

  beforeEach(async () => {
    server = await TestRedisServer.start();
    a = await ScriptedUpstream.start();
    b = await ScriptedUpstream.start();
  });
  afterEach(async () => {
    for (const state of shared.splice(0)) state.stop();
    for (const client of clients.splice(0)) client.disconnect();
    for (const app of apps.splice(0)) await app.close();
    await a.close();
    await b.close();
    await server.close();
  });

  /** One gateway instance: its own pools and Redis connection, on the shared Redis. */
  const instance = async () => {
    const app = await startRouteTestApp(
      samplePlugins(),
      { acme: [a.url, b.url] },
      { breaker: { failureThreshold: 1, cooldownMs: 30_000 } },
    );
    const client = createRedisClient(server.url, createLogger('silent'));
    expect(await waitUntilReady(client, 5000)).to.equal(true);
    apps.push(app);
    clients.push(client);
    shared.push(new SharedBreakerState(client, app.services.endpoints.pools(), createLogger('silent'), 50).start());
    return app;
  };

  it('rests an endpoint on every instance once one instance opened its breaker, and goes on per instance without Redis', async () => {
    const first = await instance();
    const second = await instance();
    a.script = (_req, res) => res.writeHead(500, { 'content-type': 'application/json' }).end('{}');
    b.script = (_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end('{"usage":{"n":1}}');

    expect(await chat(first)).to.equal(200);
    expect(a.requests).to.have.length(1);
    const secondPool = second.services.endpoints.pool('acme')!;
    await eventually(() => secondPool.state()[0]!.status === 'resting', 'the second instance to learn of the rest');
    expect(secondPool.state()[0]!.consecutiveFailures).to.equal(0);
    expect(await chat(second)).to.equal(200);
    expect(a.requests, 'the second instance never tried the resting endpoint').to.have.length(1);
    expect(b.requests).to.have.length(2);

    // Redis goes away: each instance keeps its own state and answers at once.
    await server.stop();
    b.script = (_req, res) => res.writeHead(502, { 'content-type': 'application/json' }).end('{}');
    expect(await chat(second)).to.equal(502);
    expect(await chat(second)).to.equal(503);
    expect(secondPool.state().map((endpoint) => endpoint.status)).to.deep.equal(['resting', 'resting']);
  });

  it('shares the rests of the pools a config reload built, once attached', async () => {
    const client = createRedisClient(server.url, createLogger('silent'));
    expect(await waitUntilReady(client, 5000)).to.equal(true);
    clients.push(client);
    const pool = () =>
      new EndpointPool(
        [
          new PooledEndpoint(upstreamEndpoint('acme', a.url), 'primary', 1),
          new PooledEndpoint(upstreamEndpoint('acme', b.url), 'second', 1),
        ],
        {
          failureThreshold: 1,
          cooldownMs: 30_000,
        },
      );
    const before = pool();
    const here = new SharedBreakerState(client, new Map([['acme', before]]), createLogger('silent'), 50).start();
    const elsewhere = pool();
    const there = new SharedBreakerState(client, new Map([['acme', elsewhere]]), createLogger('silent'), 50).start();
    shared.push(here, there);

    // This instance reloads its config: new pools replace the old ones.
    const reloaded = pool();
    here.attach(new Map([['acme', reloaded]]));
    reloaded.failed(reloaded.endpoints[1]!);
    await eventually(
      () => elsewhere.state()[1]!.status === 'resting',
      "the other instance to learn of the reloaded pool's rest",
    );
    elsewhere.failed(elsewhere.endpoints[0]!);
    await eventually(
      () => reloaded.state()[0]!.status === 'resting',
      "the reloaded pool to learn of the other instance's rest",
    );
    expect(
      before.state().map((endpoint) => endpoint.status),
      'the replaced pool is no longer read',
    ).to.deep.equal(['up', 'up']);
  });
});
