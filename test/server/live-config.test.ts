import { expect } from 'chai';
import { mkdir, mkdtemp, rename, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { request } from 'undici';
import { startMockUpstream, type MockUpstream } from '../../mock-upstream/mock-upstream-server.ts';
import { watch, type FSWatcher } from 'node:fs';
import { aliasProblems, fallbackProblems, LiveConfig, type LiveConfigOptions } from '../../src/server/live-config.ts';
import { createLogger } from '../../src/core/logger.ts';
import { endpointsOf } from '../../src/data-plane/upstream/endpoint-pool.ts';
import { loadPlugins } from '../../src/plugins/load-plugins.ts';
import { loadConfig } from '../../src/config/gateway-config.ts';
import { eventually } from '../helpers/eventually.ts';
import { GatewayProcess } from '../helpers/gateway-process.ts';
import { startTestGateway, TEST_KEY, UPSTREAM_KEY, type TestGateway } from '../helpers/test-gateway.ts';

// A limit the load below cannot reach, however slowly a loaded machine applies the change.
const aliasFile = (target: string, extra = 'logLevel: silent\nrateLimit:\n  max: 1000000\n') =>
  `aliases:\n  beta-latest: ${target}\n${extra}`;

async function ask(url: string, key = TEST_KEY) {
  const response = await request(`${url}/v1/messages`, {
    method: 'POST',
    headers: { 'x-api-key': key, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'beta-latest', max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] }),
  });
  const body = (await response.body.json()) as { model?: string };
  return { status: response.statusCode, body };
}

async function readyz(url: string): Promise<Record<string, string>> {
  const response = await request(`${url}/readyz`);
  return (await response.body.json()) as Record<string, string>;
}

describe('alias problems of a config', () => {
  it('lists every alias whose target is unknown or does not serve its routes, and none for a good table', async () => {
    const plugins = await loadPlugins(loadConfig({ GATEWAY_CONFIG: undefined }).manifestPath, []);
    expect(
      aliasProblems(plugins, { 'beta-latest': 'beta/beta-opus-5', 'alpha-latest': 'alpha/gen-6-astra' }),
    ).to.deep.equal([]);
    const found = aliasProblems(plugins, {
      'beta-latest': 'beta/no-such-model',
      'no-such-alias': 'beta/beta-opus-5',
      'alpha-latest': 'beta/beta-opus-5',
    });
    expect(found.map((problem) => problem.at)).to.deep.equal([
      ['aliases', 'beta-latest'],
      ['aliases', 'no-such-alias'],
      ['aliases', 'alpha-latest'],
    ]);
    const problems = found.map((problem) => problem.text);
    expect(problems).to.have.length(3);
    expect(problems[0]).to.match(/^aliases\.beta-latest: .*beta\/no-such-model/);
    expect(problems[1]).to.match(/^aliases\.no-such-alias: /);
    expect(problems[2]).to.match(/^aliases\.alpha-latest: .*does not serve the alias's route\(s\) responses/);
  });
});

describe('fallback problems of a config', () => {
  it('lists every bad source and every bad target, and none for a good table', async () => {
    const plugins = await loadPlugins(loadConfig({ GATEWAY_CONFIG: undefined }).manifestPath, []);
    expect(fallbackProblems(plugins, { 'alpha/gen-6-astra': ['alpha/gen-6-sol'] })).to.deep.equal([]);
    const problems = fallbackProblems(plugins, {
      'nope/model': ['alpha/gen-6-sol'],
      'alpha/gen-6-astra': ['alpha/gen-6-astra', 'alpha/gen-6-sol', 'nope/other'],
    });
    expect(problems.map((problem) => problem.at)).to.deep.equal([
      ['fallbacks', 'nope/model'],
      ['fallbacks', 'alpha/gen-6-astra', 0],
      ['fallbacks', 'alpha/gen-6-astra', 2],
    ]);
    expect(problems[1]!.text).to.contain('cannot fall back to itself');
  });
});

describe('live configuration reload', function () {
  this.timeout(60_000);
  let dir: string;
  let file: string;
  let test: TestGateway;

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'gateway-live-config-'));
    file = join(dir, 'gateway.yaml');
    await writeFile(file, aliasFile('beta/beta-opus-5'));
    test = await startTestGateway({ configFile: file });
  });
  afterEach(async () => {
    await test.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('applies an alias change made to the file while under load, with no failed request', async () => {
    const before = await readyz(test.url);
    expect(before.config_version).to.match(/^[0-9a-f]{12}$/);
    expect((await ask(test.url)).body.model).to.equal('beta-opus-5');
    const statuses: number[] = [];
    let stop = false;
    const load = Promise.all(
      Array.from({ length: 4 }, async () => {
        while (!stop) statuses.push((await ask(test.url)).status);
      }),
    );
    await writeFile(file, aliasFile('beta/beta-sonnet-4-6'));
    await eventually(
      () => test.upstreams.beta.requests.some((seen) => seen.body?.model === 'beta-sonnet-4-6'),
      'a request on the new target',
      20_000,
    );
    stop = true;
    await load;
    expect(statuses.length).to.be.above(0);
    expect(statuses.filter((status) => status !== 200)).to.deep.equal([]);
    // Once applied, every request takes the new target.
    test.upstreams.beta.reset();
    for (let i = 0; i < 3; i += 1) expect((await ask(test.url)).status).to.equal(200);
    expect(test.upstreams.beta.requests.map((seen) => seen.body?.model)).to.deep.equal([
      'beta-sonnet-4-6',
      'beta-sonnet-4-6',
      'beta-sonnet-4-6',
    ]);
    const after = await readyz(test.url);
    expect(after.config_version)
      .to.match(/^[0-9a-f]{12}$/)
      .and.not.equal(before.config_version);
    expect(after).not.to.have.property('config_error');
    const metrics = await (await request(`${test.url}/metrics`)).body.text();
    expect(metrics).to.match(/^gateway_config_reloads_total\{result="applied"\} [1-9]/m);
  });

  it('keeps the previous table when the file is invalid, shows why in /readyz, and recovers with a good file', async () => {
    const before = await readyz(test.url);
    await writeFile(file, aliasFile('beta/no-such-model'));
    await eventually(
      async () => (await readyz(test.url)).config_error !== undefined,
      'the reload error in /readyz',
      20_000,
    );
    const refused = await readyz(test.url);
    expect(refused.config_error).to.match(
      /gateway\.yaml line 2, column 3: aliases\.beta-latest: .*beta\/no-such-model/,
    );
    expect(refused.config_version).to.equal(before.config_version);
    expect(refused).to.include({ status: 'ok', config_stale: true });
    test.upstreams.beta.reset();
    expect((await ask(test.url)).status).to.equal(200);
    expect(test.upstreams.beta.requests[0]!.body?.model).to.equal('beta-opus-5');
    const metrics = await (await request(`${test.url}/metrics`)).body.text();
    expect(metrics).to.match(/^gateway_config_reloads_total\{result="rejected"\} [1-9]/m);

    // A schema problem and an alias problem: one refusal names both.
    await writeFile(file, aliasFile('beta/no-such-model', 'logLevel: loud\n'));
    await eventually(
      async () => ((await readyz(test.url)).config_error ?? '').includes('logLevel'),
      'the schema error in /readyz',
      20_000,
    );
    expect((await readyz(test.url)).config_error).to.match(
      /line 3, column 1: logLevel must be one of .*; .*line 2, column 3: aliases\.beta-latest: /,
    );

    await writeFile(file, aliasFile('beta/beta-fable-5'));
    await eventually(async () => (await readyz(test.url)).config_error === undefined, 'the error cleared', 20_000);
    test.upstreams.beta.reset();
    await ask(test.url);
    expect(test.upstreams.beta.requests[0]!.body?.model).to.equal('beta-fable-5');
  });

  it('refuses a port, host or Redis change at reload, saying it needs a restart', async () => {
    await writeFile(file, aliasFile('beta/beta-sonnet-4-6', 'logLevel: silent\nredis:\n  url: redis://127.0.0.1:1\n'));
    const result = test.gateway.reloadConfig('test');
    expect(result.applied).to.equal(false);
    expect(result.error).to.contain('redis').and.to.contain('need a restart');
    test.upstreams.beta.reset();
    await ask(test.url);
    expect(test.upstreams.beta.requests[0]!.body?.model).to.equal('beta-opus-5');
  });

  it('applies a new rate limit without a restart', async () => {
    await writeFile(file, aliasFile('beta/beta-opus-5', 'logLevel: silent\nrateLimit:\n  max: 2\n  windowMs: 60000\n'));
    expect(test.gateway.reloadConfig('test').applied).to.equal(true);
    const statuses = [];
    for (let i = 0; i < 4; i += 1) statuses.push((await ask(test.url)).status);
    expect(statuses.filter((status) => status === 429)).to.have.length.at.least(2);
  });

  it('applies a new log level without a restart', async () => {
    const log = new PassThrough();
    let text = '';
    log.on('data', (chunk: Buffer) => (text += chunk.toString('utf8')));
    const loudFile = join(dir, 'loud.yaml');
    await writeFile(loudFile, aliasFile('beta/beta-opus-5', 'logLevel: info\n'));
    const loud = await startTestGateway({ configFile: loudFile, logTo: log });
    const requestLines = () => text.split('\n').filter((line) => line.includes('"msg":"request"')).length;
    try {
      await ask(loud.url);
      await eventually(() => requestLines() === 1, 'an access-log line at info');
      await writeFile(loudFile, aliasFile('beta/beta-opus-5', 'logLevel: warn\n'));
      expect(loud.gateway.reloadConfig('test').applied).to.equal(true);
      await ask(loud.url);
      // An error line (a refused reload) comes after anything the request logged.
      await writeFile(loudFile, 'logLevel: loud\n');
      loud.gateway.reloadConfig('test');
      await eventually(() => text.includes('configuration reload refused'), 'the refusal at error level');
      expect(requestLines()).to.equal(1);
    } finally {
      await loud.close();
    }
  });
});

describe('polling the config file where it cannot be watched', function () {
  this.timeout(30_000);
  let dir: string;
  let file: string;
  let live: LiveConfig | undefined;
  let logged: string;

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'gateway-config-poll-'));
    file = join(dir, 'gateway.yaml');
    await writeFile(file, aliasFile('beta/beta-opus-5'));
    logged = '';
  });
  afterEach(async () => {
    live?.close();
    live = undefined;
    await rm(dir, { recursive: true, force: true });
  });

  const start = async (watchDirectory: LiveConfigOptions['watchDirectory']) => {
    const env = { GATEWAY_CONFIG: file };
    const config = loadConfig(env);
    const plugins = await loadPlugins(config.manifestPath, []);
    const log = new PassThrough().on('data', (chunk: Buffer) => (logged += chunk.toString()));
    live = new LiveConfig({
      plugins,
      env,
      config,
      buildEndpoints: () => endpointsOf(new Map()),
      logger: createLogger('info', log),
      debounceMs: 20,
      watchDirectory,
    });
    live.watch();
    return live;
  };
  const target = (config: LiveConfig) => config.current.registry.resolve('messages', 'beta-latest').canonicalId;

  it('polls the file when the directory cannot be watched (inotify limit), and applies a change', async () => {
    const config = await start(() => {
      throw Object.assign(new Error('ENOSPC: System limit for number of file watchers reached'), { code: 'ENOSPC' });
    });
    expect(logged).to.contain('polling it every second instead').and.to.contain('ENOSPC');
    expect(target(config)).to.equal('beta/beta-opus-5');
    await writeFile(file, aliasFile('beta/beta-sonnet-4-6'));
    await eventually(() => target(config) === 'beta/beta-sonnet-4-6', 'the change applied by polling', 10_000);
    expect(logged).to.contain('"trigger":"file change"');
  });

  it('falls back to polling when a running watch fails, and applies a change', async () => {
    let watcher: FSWatcher | undefined;
    let dead = false;
    const config = await start(
      (directory, onChange) => (watcher = watch(directory, (event, name) => dead || onChange(event, name))),
    );
    // The watch dies (as on an unmounted volume) and reports no event after: only polling can see the change.
    dead = true;
    watcher!.emit('error', Object.assign(new Error('EPERM: watch failed'), { code: 'EPERM' }));
    expect(logged).to.contain('polling it every second instead');
    await writeFile(file, aliasFile('beta/beta-sonnet-4-6'));
    await eventually(() => target(config) === 'beta/beta-sonnet-4-6', 'the change applied by polling', 10_000);
  });
});

/**
 * A ConfigMap volume as kubelet writes it: the data in a timestamped directory, `..data` a symlink to
 * it, and the file a symlink through `..data`. An update writes a new timestamped directory, points a
 * new symlink `..data_tmp` at it, renames that over `..data` and removes the old directory: the file's
 * own name is in no event of the directory.
 */
class ConfigMapVolume {
  private current: string | undefined;
  constructor(
    readonly dir: string,
    readonly key: string,
  ) {}

  get file(): string {
    return join(this.dir, this.key);
  }

  /** Kubelet's timestamped directory name (`..2006_01_02_15_04_05.` and a random suffix). */
  private static stamp(): string {
    const now = new Date()
      .toISOString()
      .replace(/[-T:]/g, '_')
      .replace(/\.\d+Z$/, '');
    return `..${now}.${Math.floor(Math.random() * 1e9)}`;
  }

  async write(text: string): Promise<void> {
    const next = ConfigMapVolume.stamp();
    await mkdir(join(this.dir, next));
    await writeFile(join(this.dir, next, this.key), text);
    if (this.current === undefined) {
      await symlink(next, join(this.dir, '..data'));
      await symlink(join('..data', this.key), this.file);
    } else {
      await symlink(next, join(this.dir, '..data_tmp'));
      await rename(join(this.dir, '..data_tmp'), join(this.dir, '..data'));
      await rm(join(this.dir, this.current), { recursive: true, force: true });
    }
    this.current = next;
  }
}

describe('a Kubernetes ConfigMap update (the symlink swap of kubelet)', function () {
  this.timeout(30_000);
  let dir: string;
  let volume: ConfigMapVolume;
  let live: LiveConfig | undefined;

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'gateway-configmap-'));
    volume = new ConfigMapVolume(dir, 'gateway.yaml');
    await volume.write(aliasFile('beta/beta-opus-5'));
  });
  afterEach(async () => {
    live?.close();
    live = undefined;
    await rm(dir, { recursive: true, force: true });
  });

  const start = async (watchDirectory?: LiveConfigOptions['watchDirectory']) => {
    const env = { GATEWAY_CONFIG: volume.file };
    const config = loadConfig(env);
    const plugins = await loadPlugins(config.manifestPath, []);
    live = new LiveConfig({
      plugins,
      env,
      config,
      buildEndpoints: () => endpointsOf(new Map()),
      logger: createLogger('silent'),
      debounceMs: 20,
      watchDirectory,
    });
    live.watch();
    return live;
  };
  const target = (config: LiveConfig) => config.current.registry.resolve('messages', 'beta-latest').canonicalId;

  it('applies the update seen by the directory watch', async () => {
    const config = await start();
    expect(target(config)).to.equal('beta/beta-opus-5');
    await volume.write(aliasFile('beta/beta-sonnet-4-6'));
    await eventually(() => target(config) === 'beta/beta-sonnet-4-6', 'the ConfigMap update applied', 10_000);
    // A second update, as the next edit of the ConfigMap.
    await volume.write(aliasFile('beta/beta-fable-5'));
    await eventually(() => target(config) === 'beta/beta-fable-5', 'the second ConfigMap update applied', 10_000);
  });

  it('applies the update when polling (the poll reads the file through its symlinks)', async () => {
    const config = await start(() => {
      throw Object.assign(new Error('ENOSPC: System limit for number of file watchers reached'), { code: 'ENOSPC' });
    });
    await volume.write(aliasFile('beta/beta-sonnet-4-6'));
    await eventually(
      () => target(config) === 'beta/beta-sonnet-4-6',
      'the ConfigMap update applied by polling',
      10_000,
    );
  });
});

describe('breaker state across a reload', function () {
  this.timeout(60_000);
  let dir: string;
  let file: string;
  let resting: MockUpstream;
  let healthy: MockUpstream;
  let test: TestGateway;
  // One failure rests an endpoint for ten minutes: longer than the test. Affinity off: the test sends one
  // same body until the failing endpoint took a request (random spread).
  const breakerFile = (target: string) =>
    aliasFile(
      target,
      'logLevel: silent\nrateLimit:\n  max: 1000000\nfailover:\n  failureThreshold: 1\n  cooldownMs: 600000\nrouting:\n  affinity: false\n',
    );

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'gateway-breaker-reload-'));
    file = join(dir, 'gateway.yaml');
    await writeFile(file, breakerFile('beta/beta-opus-5'));
    resting = await startMockUpstream({ apiKey: UPSTREAM_KEY });
    healthy = await startMockUpstream({ apiKey: UPSTREAM_KEY });
    test = await startTestGateway({ configFile: file, env: { ZETA_BASE_URL: `${resting.url},${healthy.url}` } });
  });
  afterEach(async () => {
    await test.close();
    await Promise.all([resting.close(), healthy.close()]);
    await rm(dir, { recursive: true, force: true });
  });

  const chatOnZeta = async () => {
    const response = await request(`${test.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TEST_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'zeta/zeta-k3', messages: [{ role: 'user', content: 'hi' }] }),
    });
    await response.body.dump();
    return response.statusCode;
  };
  const endpointUp = async (upstream: MockUpstream) => {
    const { body } = await test.gateway.metrics.scrape();
    const origin = new URL(upstream.url).origin;
    const line = body
      .split('\n')
      .find((entry) => entry.startsWith(`gateway_endpoint_up{provider="zeta",endpoint="${origin}"}`));
    return line === undefined ? undefined : Number(line.split(' ').pop());
  };

  it('keeps an endpoint resting through a reload that changes something else, and does not call it', async () => {
    resting.enqueue({ kind: 'status', status: 500 });
    // The pick is by weight at random: ask until the failing endpoint has taken (and failed) one request.
    for (let i = 0; i < 50 && resting.requests.length === 0; i += 1) expect(await chatOnZeta()).to.equal(200);
    expect(resting.requests).to.have.length(1);
    expect(await endpointUp(resting)).to.equal(0);
    expect(await endpointUp(healthy)).to.equal(1);

    await writeFile(file, breakerFile('beta/beta-sonnet-4-6'));
    expect(test.gateway.reloadConfig('test')).to.include({ applied: true });
    expect((await ask(test.url)).body.model, 'the alias change applied').to.equal('beta-sonnet-4-6');

    expect(await endpointUp(resting), 'still resting after the reload').to.equal(0);
    const servedBefore = healthy.requests.length;
    for (let i = 0; i < 8; i += 1) expect(await chatOnZeta()).to.equal(200);
    expect(resting.requests, 'the resting endpoint is not called').to.have.length(1);
    expect(healthy.requests.length - servedBefore).to.equal(8);
  });
});

describe('SIGHUP reload of a running gateway', function () {
  this.timeout(60_000);
  let upstream: MockUpstream;
  let gateway: GatewayProcess | undefined;
  afterEach(async () => {
    await gateway?.kill();
    await upstream?.close();
  });

  it('applies an alias change on SIGHUP', async () => {
    upstream = await startMockUpstream();
    const root = await mkdtemp(join(tmpdir(), 'gateway-sighup-'));
    // The file is edited where the gateway's watch does not look (behind a symlink), so only SIGHUP applies it.
    await mkdir(join(root, 'real'));
    await mkdir(join(root, 'config'));
    const real = join(root, 'real', 'gateway.yaml');
    await writeFile(real, aliasFile('beta/beta-opus-5'));
    await symlink(real, join(root, 'config', 'gateway.yaml'));
    gateway = await GatewayProcess.start({
      BETA_BASE_URL: upstream.url,
      GATEWAY_API_KEYS: TEST_KEY,
      GATEWAY_DATA_DIR: join(root, 'data'),
      GATEWAY_CONFIG: join(root, 'config', 'gateway.yaml'),
    });
    expect((await ask(gateway.url)).body.model).to.equal('beta-opus-5');
    await writeFile(real, aliasFile('beta/beta-sonnet-4-6'));
    expect((await ask(gateway.url)).body.model).to.equal('beta-opus-5');
    gateway.signal('SIGHUP');
    await eventually(
      async () => (await ask(gateway!.url)).body.model === 'beta-sonnet-4-6',
      'the new target after SIGHUP',
    );
    // The log line reaches this process through a pipe, possibly after the answer that showed the change.
    await eventually(() => gateway!.logs.join('').includes('"trigger":"SIGHUP"'), 'the SIGHUP reload log line');
    expect(await gateway.stop()).to.equal(0);
    await rm(root, { recursive: true, force: true });
  });
});
