import { expect } from 'chai';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { request } from 'undici';
import { loadConfig } from '../../src/config/gateway-config.ts';
import { createLogger } from '../../src/core/logger.ts';
import { ModelRegistry } from '../../src/core/model-registry.ts';
import { providerHealth } from '../../src/control-plane/account/account-health.ts';
import { providerEndpoints } from '../../src/data-plane/upstream/endpoint-pool.ts';
import type { ProviderPlugin } from '../../src/plugins/plugin-contract.ts';
import { startGateway, type Gateway } from '../../src/server/gateway.ts';
import { ScriptedUpstream, type Script, type SeenRequest } from '../helpers/scripted-upstream.ts';

const CLIENT_KEY = 'sk-endpoint-auth-client-0001-0123456789abcdef';
const MAIN_KEY = 'kappa-main-key-0001-abcdefgh';
/** Characters a query parameter must percent-encode, so the encoded form is a different string to look for. */
const REGION_KEY = 'kq-region/0002+abc=def&x';
const KEYS = [MAIN_KEY, REGION_KEY];
/** Every way a key could be written out: raw, percent-encoded (as in the URL), JSON-escaped. */
const writtenForms = (key: string) => [
  key,
  encodeURIComponent(key),
  JSON.stringify(key).slice(1, -1),
  key.replace(/\//g, '\\/'),
];

/**
 * A plugin whose one route declares `bearer`: every endpoint of the config file below says where its
 * key goes instead, so any Authorization header upstream would be the plugin's place leaking through.
 */
const PLUGIN = `export default {
  contract: 1,
  vendor: 'kappa',
  routes: { 'chat-completions': { path: '/chat/completions', format: 'chat-completions', auth: 'bearer' } },
  models: [{ id: 'kappa-1', listed: true, routes: ['chat-completions'], pricing: { input: 1, cachedInput: 0.1, output: 2 } }],
};
`;

type Place = { header: string; prefix?: string } | { query: string };

/**
 * The config file: a main endpoint and a region endpoint of one vendor, each with its own key and credential
 * place. Affinity off: the tests send one same body until both endpoints took requests (random spread).
 */
const configText = (
  main: string,
  region: string,
  places: { main: Place; region: Place },
  failover = { failureThreshold: 1000 },
) =>
  JSON.stringify({
    logLevel: 'info',
    failover,
    routing: { affinity: false },
    providers: {
      kappa: {
        endpoints: [
          { name: 'main', baseUrl: main, apiKey: MAIN_KEY, auth: places.main },
          { name: 'region', baseUrl: region, apiKey: REGION_KEY, auth: places.region },
        ],
      },
    },
  });

const FIRST_PLACES = { main: { header: 'X-Kappa-Key', prefix: '' }, region: { query: 'key' } };
const SWAPPED_PLACES = { main: { query: 'api_key' }, region: { header: 'x-region-key', prefix: 'Key ' } };

const answer =
  (from: string): Script =>
  (_req, res) =>
    res.writeHead(200, { 'content-type': 'application/json' }).end(
      JSON.stringify({
        id: `from-${from}`,
        object: 'chat.completion',
        created: 1,
        model: 'kappa-1',
        choices: [{ index: 0, message: { role: 'assistant', content: `hello from ${from}` }, finish_reason: 'stop' }],
        usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 },
      }),
    );

/** A 503 that echoes what the upstream got (its URL, its headers): some vendors quote the request in their errors. */
const busyEcho: Script = (req, res) =>
  res.writeHead(503, { 'content-type': 'application/json' }).end(
    JSON.stringify({
      error: { message: `overloaded: ${req.url} ${JSON.stringify(req.headers)}`, type: 'overloaded' },
    }),
  );

/** Asserts the key went exactly where `place` says, and nowhere else in the request: no other header, no query. */
function expectKeyOnlyAt(seen: SeenRequest, key: string, place: Place): void {
  const other = KEYS.find((each) => each !== key)!;
  const everything = `${seen.path} ${JSON.stringify(seen.headers)} ${seen.body}`;
  for (const form of writtenForms(other)) expect(everything).not.to.contain(form);
  expect(seen.headers).not.to.have.property('authorization');
  expect(seen.headers).not.to.have.property('x-api-key');
  if ('query' in place) {
    expect(seen.path).to.equal(`/v1/chat/completions?${place.query}=${encodeURIComponent(key)}`);
    for (const header of ['x-kappa-key', 'x-region-key']) expect(seen.headers).not.to.have.property(header);
    expect(JSON.stringify(seen.headers)).not.to.contain(key);
  } else {
    expect(seen.path).to.equal('/v1/chat/completions');
    expect(seen.path).not.to.contain('key=');
    const name = place.header.toLowerCase();
    expect(seen.headers[name]).to.equal(`${place.prefix ?? ''}${key}`);
    const elsewhere = Object.entries(seen.headers).filter(
      ([header, value]) => header !== name && String(value).includes(key),
    );
    expect(elsewhere).to.deep.equal([]);
  }
}

describe('per-endpoint credentials: one vendor, one pool, endpoints that take the key in different places', function () {
  this.timeout(30_000);
  let dir: string;
  let configPath: string;
  let main: ScriptedUpstream;
  let region: ScriptedUpstream;
  let gateway: Gateway;
  let logs = '';
  let sent = 0;

  const chat = async () => {
    const requestId = `ep-auth-${++sent}`;
    const response = await request(`${gateway.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${CLIENT_KEY}`, 'content-type': 'application/json', 'x-request-id': requestId },
      body: JSON.stringify({ model: 'kappa/kappa-1', messages: [{ role: 'user', content: 'hi' }] }),
    });
    return { status: response.statusCode, text: await response.body.text(), requestId };
  };
  const logLines = () =>
    logs
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line) as Record<string, unknown>);
  const expectNoKeyIn = (text: string, where: string) => {
    for (const key of KEYS)
      for (const form of writtenForms(key)) expect(text, `${where} holds a form of a key`).not.to.contain(form);
  };
  const reset = () => {
    main.requests.length = 0;
    region.requests.length = 0;
  };

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'gateway-endpoint-auth-'));
    const plugins = join(dir, 'plugins');
    await mkdir(join(plugins, 'kappa'), { recursive: true });
    await writeFile(join(plugins, 'package.json'), JSON.stringify({ private: true, type: 'module' }));
    await writeFile(join(plugins, 'manifest.json'), JSON.stringify({ plugins: ['kappa'] }));
    await writeFile(join(plugins, 'kappa', 'index.js'), PLUGIN);
    [main, region] = await Promise.all([ScriptedUpstream.start(), ScriptedUpstream.start()]);
    configPath = join(dir, 'gateway.yaml');
    await writeFile(configPath, configText(main.url, region.url, FIRST_PLACES));
    const env: NodeJS.ProcessEnv = {
      PORT: '0',
      HOST: '127.0.0.1',
      GATEWAY_CONFIG: configPath,
      GATEWAY_PLUGIN_PATH: plugins,
      GATEWAY_DATA_DIR: join(dir, 'data'),
      GATEWAY_API_KEYS: CLIENT_KEY,
      RATE_LIMIT_MAX: '100000',
    };
    const config = loadConfig(env, dir);
    const capture = new Writable({
      write(chunk: Buffer, _encoding, done) {
        logs += chunk.toString();
        done();
      },
    });
    gateway = await startGateway(config, env, createLogger(config.logLevel, capture));
  });
  after(async () => {
    await gateway?.close();
    await Promise.all([main, region].map((upstream) => upstream?.close()));
    await rm(dir, { recursive: true, force: true });
  });

  it('spreads normal traffic over both endpoints, each getting its own key only where it declares it (the header one no query, the query one no header)', async () => {
    main.script = answer('main');
    region.script = answer('region');
    // The pool picks by weight at random: sent until both have served (both unused after 40 is a chance of 2 in 10^12).
    for (
      let index = 0;
      index < 40 && (index < 6 || main.requests.length === 0 || region.requests.length === 0);
      index++
    ) {
      const response = await chat();
      expect(response.status, response.text).to.equal(200);
    }
    expect(main.requests.length).to.be.greaterThan(0);
    expect(region.requests.length).to.be.greaterThan(0);
    for (const seen of main.requests) expectKeyOnlyAt(seen, MAIN_KEY, FIRST_PLACES.main);
    for (const seen of region.requests) expectKeyOnlyAt(seen, REGION_KEY, FIRST_PLACES.region);
  });

  it('fails over from the query endpoint to the header endpoint within the one pool; the warning names the endpoint, not its URL or key', async () => {
    reset();
    main.script = answer('main');
    region.script = busyEcho;
    const served: string[] = [];
    for (let index = 0; index < 40 && region.requests.length === 0; index++) {
      const response = await chat();
      expect(response.status, response.text).to.equal(200);
      expect(response.text).to.contain('hello from main');
      served.push(response.requestId);
    }
    expect(region.requests).to.have.length(1);
    expectKeyOnlyAt(region.requests[0]!, REGION_KEY, FIRST_PLACES.region);
    for (const seen of main.requests) expectKeyOnlyAt(seen, MAIN_KEY, FIRST_PLACES.main);
    const warning = logLines().find((line) => line.endpoint === 'region' && line.status === 503);
    expect(warning, 'the failover warning').to.include({
      level: 40,
      provider: 'kappa',
      msg: "upstream endpoint 'region' of provider 'kappa' answered 503",
      request_id: served.at(-1),
    });
    expectNoKeyIn(JSON.stringify(warning), 'the failover warning');
    expect(JSON.stringify(warning)).not.to.contain(region.url.replace(/\/v1$/, ''));
  });

  it('fails over from the header endpoint to the query endpoint on a broken connection', async () => {
    reset();
    main.script = (req) => req.socket.destroy();
    region.script = answer('region');
    for (let index = 0; index < 40 && main.requests.length === 0; index++) {
      const response = await chat();
      expect(response.status, response.text).to.equal(200);
      expect(response.text).to.contain('hello from region');
    }
    expect(main.requests).to.have.length(1);
    expectKeyOnlyAt(main.requests[0]!, MAIN_KEY, FIRST_PLACES.main);
    for (const seen of region.requests) expectKeyOnlyAt(seen, REGION_KEY, FIRST_PLACES.region);
    const warning = logLines().find((line) => line.endpoint === 'main' && line.level === 40);
    expect(warning, 'the failover warning').to.include({ provider: 'kappa' });
    expect(String(warning!.msg)).to.match(/^upstream endpoint 'main' of provider 'kappa' failed: /);
  });

  it('keeps each endpoint’s credential place across a reload, and takes a changed place on the next request', async () => {
    main.script = answer('main');
    region.script = answer('region');
    const both = async (places: typeof FIRST_PLACES | typeof SWAPPED_PLACES) => {
      reset();
      for (let index = 0; index < 40 && (main.requests.length === 0 || region.requests.length === 0); index++)
        expect((await chat()).status).to.equal(200);
      for (const seen of main.requests) expectKeyOnlyAt(seen, MAIN_KEY, places.main);
      for (const seen of region.requests) expectKeyOnlyAt(seen, REGION_KEY, places.region);
    };
    // The same file again (a reload rebuilds every pool from it).
    await writeFile(configPath, `${configText(main.url, region.url, FIRST_PLACES)}\n`);
    expect(gateway.reloadConfig('test')).to.include({ applied: true });
    await both(FIRST_PLACES);
    await writeFile(configPath, configText(main.url, region.url, SWAPPED_PLACES));
    expect(gateway.reloadConfig('test')).to.include({ applied: true });
    await both(SWAPPED_PLACES);
  });

  it('refuses a reload with a bad endpoint auth, naming its field, and keeps serving as before', async () => {
    const good = configText(main.url, region.url, SWAPPED_PLACES);
    await writeFile(configPath, good.replace('{"query":"api_key"}', `{"query":"api_key","prefix":"${MAIN_KEY}"}`));
    const result = gateway.reloadConfig('test');
    expect(result.applied).to.equal(false);
    expect(result.error).to.contain(
      'providers.kappa.endpoints[0].auth.prefix: only a header credential takes a prefix',
    );
    expectNoKeyIn(result.error!, 'the reload error');
    const ready = await request(`${gateway.url}/readyz`);
    const readiness = await ready.body.text();
    expect(readiness).to.contain('providers.kappa.endpoints[0].auth.prefix');
    expectNoKeyIn(readiness, '/readyz');
    reset();
    for (let index = 0; index < 40 && main.requests.length === 0; index++) expect((await chat()).status).to.equal(200);
    expectKeyOnlyAt(main.requests.at(-1)!, MAIN_KEY, SWAPPED_PLACES.main);
    await writeFile(configPath, good);
    expect(gateway.reloadConfig('test')).to.include({ applied: true });
  });

  it('passes on the last endpoint’s error with its key redacted when every endpoint failed', async () => {
    main.script = busyEcho;
    region.script = busyEcho;
    for (let index = 0; index < 4; index++) {
      reset();
      const response = await chat();
      expect(response.status).to.equal(503);
      expect(response.text).to.contain('[REDACTED]');
      expectNoKeyIn(response.text, 'the error body');
      expect(main.requests.length + region.requests.length).to.equal(2);
    }
    main.script = (req) => req.socket.destroy();
    region.script = (req) => req.socket.destroy();
    const response = await chat();
    expect(response.status).to.equal(502);
    expectNoKeyIn(response.text, 'the error body');
  });

  it('never writes a key into a log line, a metric or the health view', async () => {
    const lines = logLines();
    expect(lines.filter((line) => line.msg === 'request').length).to.be.greaterThan(10);
    expect(
      lines.filter((line) => typeof line.msg === 'string' && line.msg.startsWith("upstream endpoint '")).length,
    ).to.be.greaterThan(2);
    expectNoKeyIn(logs, 'the log');
    const metrics = await (await request(`${gateway.url}/metrics`)).body.text();
    expect(metrics).to.contain('gateway_upstream_requests_total');
    expectNoKeyIn(metrics, '/metrics');
  });
});

describe('per-endpoint credentials in the health view', () => {
  it('shows each endpoint by name and base URL, never the key or where it goes', () => {
    const plugin: ProviderPlugin = {
      contract: 1,
      vendor: 'kappa',
      routes: { 'chat-completions': { path: '/chat/completions', format: 'chat-completions', auth: 'bearer' } },
      models: [
        {
          id: 'kappa-1',
          listed: true,
          routes: ['chat-completions'],
          pricing: { input: 1, cachedInput: 0.1, output: 2 },
        },
      ],
    };
    const config = {
      ...loadConfig({ GATEWAY_CONFIG: '/dev/null' }),
      providers: {
        kappa: {
          endpoints: [
            {
              name: 'main',
              baseUrl: 'https://kappa.example/v1',
              apiKey: MAIN_KEY,
              weight: 1,
              auth: { header: 'x-kappa-key' },
            },
            {
              name: 'region',
              baseUrl: 'https://eu.kappa.example/v1',
              apiKey: REGION_KEY,
              weight: 1,
              auth: { query: 'key' },
            },
          ],
        },
      },
    };
    const endpoints = providerEndpoints([plugin], config, {}, pino({ level: 'silent' }));
    const view = providerHealth(new ModelRegistry([plugin]), endpoints);
    expect(view.map((entry) => [entry.name, entry.endpoint])).to.deep.equal([
      ['main', 'https://kappa.example/v1'],
      ['region', 'https://eu.kappa.example/v1'],
    ]);
    const text = JSON.stringify(view);
    for (const key of KEYS) for (const form of writtenForms(key)) expect(text).not.to.contain(form);
  });
});
