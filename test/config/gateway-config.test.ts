import { expect } from 'chai';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import {
  ConfigError,
  defaultMaxConnections,
  loadConfig,
  parseSize,
  parseStaticKeys,
  providerSettings,
} from '../../src/config/gateway-config.ts';
import { startupFailure } from '../helpers/gateway-process.ts';

async function configFile(text: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'gateway-config-'));
  const path = join(dir, 'gateway.yaml');
  await writeFile(path, text);
  return path;
}

describe('gateway config', () => {
  it('has the documented defaults', async () => {
    const config = loadConfig({ GATEWAY_CONFIG: await configFile('') });
    expect(config).to.deep.include({
      port: 8080,
      host: '0.0.0.0',
      bodyLimitBytes: 10 * 1024 * 1024,
      upstreamTimeoutMs: 300_000,
      rateLimit: { max: 100, windowMs: 60_000 },
      redis: undefined,
    });
    expect(config).to.deep.include({ maxSseEventBytes: 16 * 1024 * 1024, chatDeadlineMs: 600_000 });
  });

  it('reads the SSE event cap and the /v1/chat deadline from the file and from env', async () => {
    const path = await configFile('server:\n  maxSseEventBytes: 1mb\n  chatDeadlineMs: 5000\n');
    expect(loadConfig({ GATEWAY_CONFIG: path })).to.deep.include({
      maxSseEventBytes: 1024 * 1024,
      chatDeadlineMs: 5000,
    });
    expect(loadConfig({ GATEWAY_CONFIG: path, SSE_MAX_EVENT_BYTES: '64kb', CHAT_DEADLINE_MS: '9000' })).to.deep.include(
      { maxSseEventBytes: 65536, chatDeadlineMs: 9000 },
    );
    expect(() => loadConfig({ GATEWAY_CONFIG: path, SSE_MAX_EVENT_BYTES: 'lots' })).to.throw(
      ConfigError,
      'SSE_MAX_EVENT_BYTES',
    );
  });

  it('has the documented reliability defaults, and takes them from the file and env', async () => {
    const config = loadConfig({ GATEWAY_CONFIG: await configFile('') });
    expect(config).to.deep.include({
      drainMs: 120_000,
      headersTimeoutMs: 15_000,
      requestTimeoutMs: 60_000,
      authFailuresPerMinute: 20,
      maxConnections: defaultMaxConnections(),
    });
    const path = await configFile('server:\n  drainMs: 5000\n  maxConnections: 100\n  authFailuresPerMinute: 3\n');
    expect(
      loadConfig({
        GATEWAY_CONFIG: path,
        GATEWAY_DRAIN_MS: '0',
        GATEWAY_HEADERS_TIMEOUT_MS: '2000',
        GATEWAY_REQUEST_TIMEOUT_MS: '3000',
      }),
    ).to.deep.include({
      drainMs: 0,
      maxConnections: 100,
      authFailuresPerMinute: 3,
      headersTimeoutMs: 2000,
      requestTimeoutMs: 3000,
    });
    expect(() =>
      loadConfig({ GATEWAY_CONFIG: path, GATEWAY_HEADERS_TIMEOUT_MS: '9000', GATEWAY_REQUEST_TIMEOUT_MS: '3000' }),
    ).to.throw(ConfigError, 'cannot be longer than the request timeout');
  });

  it('reads the client write timeout: 60 s by default, server.clientWriteTimeoutMs in the file, GATEWAY_CLIENT_WRITE_TIMEOUT_MS over it', async () => {
    expect(loadConfig({ GATEWAY_CONFIG: await configFile('') }).clientWriteTimeoutMs).to.equal(60_000);
    const path = await configFile('server:\n  clientWriteTimeoutMs: 5000\n');
    expect(loadConfig({ GATEWAY_CONFIG: path }).clientWriteTimeoutMs).to.equal(5000);
    expect(loadConfig({ GATEWAY_CONFIG: path, GATEWAY_CLIENT_WRITE_TIMEOUT_MS: '250' }).clientWriteTimeoutMs).to.equal(
      250,
    );
    expect(() => loadConfig({ GATEWAY_CONFIG: path, GATEWAY_CLIENT_WRITE_TIMEOUT_MS: '0' })).to.throw(
      ConfigError,
      'GATEWAY_CLIENT_WRITE_TIMEOUT_MS must be an integer >= 1',
    );
    const negative = await configFile('server:\n  clientWriteTimeoutMs: -1\n');
    expect(() => loadConfig({ GATEWAY_CONFIG: negative })).to.throw(ConfigError, 'server.clientWriteTimeoutMs');
  });

  it('turns prompt-cache-aware routing on by default; routing.affinity in the file, GATEWAY_ROUTING_AFFINITY over it; refuses other values', async () => {
    expect(loadConfig({ GATEWAY_CONFIG: await configFile('') }).routing).to.deep.equal({ affinity: true });
    const off = await configFile('routing:\n  affinity: false\n');
    expect(loadConfig({ GATEWAY_CONFIG: off }).routing).to.deep.equal({ affinity: false });
    expect(loadConfig({ GATEWAY_CONFIG: off, GATEWAY_ROUTING_AFFINITY: 'true' }).routing).to.deep.equal({
      affinity: true,
    });
    expect(loadConfig({ GATEWAY_CONFIG: await configFile(''), GATEWAY_ROUTING_AFFINITY: '0' }).routing).to.deep.equal({
      affinity: false,
    });
    expect(() => loadConfig({ GATEWAY_CONFIG: off, GATEWAY_ROUTING_AFFINITY: 'sticky' })).to.throw(
      ConfigError,
      "GATEWAY_ROUTING_AFFINITY must be true or false, got 'sticky'",
    );
    const sticky = await configFile('routing:\n  affinity: sticky\n');
    expect(() => loadConfig({ GATEWAY_CONFIG: sticky })).to.throw(
      ConfigError,
      'line 2, column 3: routing.affinity must be a boolean',
    );
    const misspelt = await configFile('routing:\n  afinity: true\n');
    expect(() => loadConfig({ GATEWAY_CONFIG: misspelt })).to.throw(
      ConfigError,
      'line 2, column 3: routing.afinity is not a known setting',
    );
  });

  it('caps connections at half the open-file limit by default', () => {
    expect(
      defaultMaxConnections(
        'Limit                     Soft Limit           Hard Limit           Units\nMax open files            1024                 4096                 files\n',
      ),
    ).to.equal(512);
    expect(
      defaultMaxConnections('Max open files            unlimited            unlimited            files\n'),
    ).to.equal(512);
    expect(defaultMaxConnections('')).to.equal(512);
  });

  it('gives one address a tenth of the connections by default (16 for small caps, never above a quarter) and half of that for half-sent requests', async () => {
    const defaults = (max: number) => {
      const { maxConnectionsPerAddress, maxPendingRequestsPerAddress } = loadConfig(
        { GATEWAY_MAX_CONNECTIONS: String(max) },
        '/nonexistent',
      );
      return [maxConnectionsPerAddress, maxPendingRequestsPerAddress];
    };
    expect(defaults(10_000)).to.deep.equal([1000, 500]);
    expect(defaults(512)).to.deep.equal([51, 25]);
    expect(defaults(160)).to.deep.equal([16, 8]);
    expect(defaults(100)).to.deep.equal([16, 8]);
    expect(defaults(40)).to.deep.equal([10, 8]);
    expect(defaults(20)).to.deep.equal([5, 5]);
    expect(defaults(4)).to.deep.equal([1, 1]);
    expect(defaults(1)).to.deep.equal([1, 1]);
    // Two addresses holding their whole share always leave connections to a third.
    for (const max of [3, 5, 16, 33, 40, 63, 64, 65, 100, 159, 161, 512, 1000, 10_000, 65_536]) {
      const [connections, pending] = defaults(max);
      expect(2 * connections!, `max ${max}`).to.be.below(max);
      expect(pending!, `max ${max}`).to.be.at.most(connections!);
    }
    // The default follows the global cap read from the file as well.
    expect(loadConfig({ GATEWAY_CONFIG: await configFile('server:\n  maxConnections: 2000\n') })).to.deep.include({
      maxConnectionsPerAddress: 200,
      maxPendingRequestsPerAddress: 100,
    });
  });

  it('takes file values as defaults and lets env override them', async () => {
    const path = await configFile(
      'server:\n  port: 9000\n  bodyLimit: 2mb\nrateLimit:\n  max: 5\nproviders:\n  acme:\n    baseUrl: http://file.example/v1\n    apiKey: from-file\naliases:\n  acme-latest: acme/two\n',
    );
    const config = loadConfig({
      GATEWAY_CONFIG: path,
      PORT: '9100',
      RATE_LIMIT_WINDOW_MS: '1000',
      REDIS_URL: 'rediss://cache:6380',
    });
    expect(config).to.deep.include({
      port: 9100,
      bodyLimitBytes: 2 * 1024 * 1024,
      rateLimit: { max: 5, windowMs: 1000 },
      aliases: { 'acme-latest': 'acme/two' },
    });
    expect(config.redis?.url).to.equal('rediss://cache:6380');
    expect(providerSettings(config, 'acme', 'ACME', {})).to.deep.equal({
      baseUrl: 'http://file.example/v1',
      apiKey: 'from-file',
    });
    expect(
      providerSettings(config, 'acme', 'ACME', { ACME_BASE_URL: 'http://env.example/v1/', ACME_API_KEY: 'from-env' }),
    ).to.deep.equal({ baseUrl: 'http://env.example/v1', apiKey: 'from-env' });
  });

  it("takes LOG_LEVEL over the file's logLevel; an empty one is unset (compose passes unset as empty)", async () => {
    const path = await configFile('logLevel: warn\n');
    expect(loadConfig({ GATEWAY_CONFIG: path }).logLevel).to.equal('warn');
    expect(loadConfig({ GATEWAY_CONFIG: path, LOG_LEVEL: 'debug' }).logLevel).to.equal('debug');
    expect(loadConfig({ GATEWAY_CONFIG: path, LOG_LEVEL: '' }).logLevel).to.equal('warn');
    expect(loadConfig({ GATEWAY_CONFIG: await configFile(''), LOG_LEVEL: '' }).logLevel).to.equal('info');
  });

  const invalid: [string, string, NodeJS.ProcessEnv, string][] = [
    ['an unknown setting', 'server:\n  prot: 1\n', {}, 'line 2, column 3: server.prot is not a known setting'],
    ['a bad size', 'server:\n  bodyLimit: huge\n', {}, 'line 2, column 3: server.bodyLimit must be a size'],
    ['YAML that does not parse', 'server: [\n', {}, 'not valid YAML'],
    [
      'a bad provider URL',
      'providers:\n  acme:\n    baseUrl: not a url\n',
      {},
      'line 3, column 5: providers.acme.baseUrl is not a URL',
    ],
    ['a bad port in env', '', { PORT: 'eighty' }, "PORT must be an integer >= 0, got 'eighty'"],
    ['a bad Redis URL', '', { REDIS_URL: 'http://redis' }, 'REDIS_URL must start with redis:// or rediss://'],
    [
      'an unknown log level in env',
      '',
      { LOG_LEVEL: 'verbose' },
      "LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent, got 'verbose'",
    ],
    [
      'a static key without sk-',
      '',
      { GATEWAY_API_KEYS: 'sk-goodgoodgoodgoodgoodgoodgoodgood,pk-bad' },
      "GATEWAY_API_KEYS entry 2 is not a valid key: keys start with 'sk-'",
    ],
  ];
  for (const [name, text, env, message] of invalid) {
    it(`refuses ${name} with a clear message`, async () => {
      const path = await configFile(text);
      expect(() => loadConfig({ GATEWAY_CONFIG: path, ...env })).to.throw(ConfigError, message);
    });
  }

  it('reports every problem of the file and the environment at once, each by line, column and field', async () => {
    const path = await configFile(
      'server:\n  port: -1\n  colour: red\nrateLimit:\n  max: 0\nproviders:\n  acme:\n    baseUrl: ftp://acme.example\n    region: eu\naliases:\n  acme-latest: 5\nlogLevel: loud\n',
    );
    let error: ConfigError | undefined;
    try {
      loadConfig({ GATEWAY_CONFIG: path, RATE_LIMIT_WINDOW_MS: 'soon' });
    } catch (thrown) {
      error = thrown as ConfigError;
    }
    expect(error).to.be.instanceOf(ConfigError);
    expect(error!.problems).to.deep.equal([
      `${path} line 2, column 3: server.port must be greater than or equal to 0`,
      `${path} line 3, column 3: server.colour is not a known setting`,
      `${path} line 5, column 3: rateLimit.max must be a positive number`,
      `${path} line 12, column 1: logLevel must be one of the following values: fatal, error, warn, info, debug, trace, silent`,
      `${path} line 9, column 5: providers.acme.region is not a known setting (baseUrl, apiKey, endpoints)`,
      `${path} line 8, column 5: providers.acme.baseUrl must be an http:// or https:// URL`,
      `${path} line 11, column 3: aliases.acme-latest must be a string`,
      "RATE_LIMIT_WINDOW_MS must be an integer >= 1, got 'soon'",
    ]);
  });

  it('names the file relative to the working directory when it is under it', async () => {
    const path = await configFile('rateLimit:\n  max: 0\n');
    expect(() => loadConfig({ GATEWAY_CONFIG: 'gateway.yaml' }, dirname(path))).to.throw(
      ConfigError,
      /^gateway\.yaml line 2, column 3: rateLimit\.max/,
    );
  });

  it('never quotes the file: a syntax error next to an upstream key, a wrong type, a URL with a password', async () => {
    const cases = [
      // yaml's own message quotes the line before the error: here the key.
      [
        'providers:\n  alpha:\n    apiKey: sk-upstream-TOPSECRET-1\n   baseUrl: http://127.0.0.1:1/v1\n',
        /line 4, column \d+: not valid YAML: .* \([A-Z_]+\)$/m,
      ],
      [
        'providers:\n  alpha:\n    apiKey: sk-upstream-TOPSECRET-1\n    baseUrl: "http://user:TOPSECRET@[::1"\n',
        /line 4, column 5: providers\.alpha\.baseUrl is not a URL$/m,
      ],
      ['server:\n  host: [TOPSECRET]\n  port: TOPSECRET\n', /line 3, column 3: server\.port must be a number$/m],
      [
        'redis:\n  url: redis://:TOPSECRET@cache:6379\n  sentinels: TOPSECRET\n',
        /line 3, column 3: redis\.sentinels must be an array$/m,
      ],
    ] as const;
    for (const [text, expected] of cases) {
      const path = await configFile(text);
      let message = '';
      try {
        loadConfig({ GATEWAY_CONFIG: path });
      } catch (error) {
        message = (error as ConfigError).problems.join('\n');
      }
      expect(message, text).to.match(expected);
      expect(message, text).not.to.contain('TOPSECRET');
    }
  });

  it('parses sizes and static keys', () => {
    expect([parseSize('10mb'), parseSize('512kb'), parseSize(1000), parseSize('1.5kb')]).to.deep.equal([
      10485760, 524288, 1000, 1536,
    ]);
    const [a, b] = [`sk-${'a'.repeat(32)}`, `sk-${'b'.repeat(40)}`];
    expect(parseStaticKeys(` ${a} , ${b} `)).to.deep.equal([a, b]);
  });

  it('refuses an admin token shorter than 32 characters, naming the variable but not the value', async () => {
    const path = await configFile('');
    const short = 'admin-token-of-31-characters-xx';
    expect(short).to.have.length(31);
    expect(() => loadConfig({ GATEWAY_CONFIG: path, GATEWAY_ADMIN_TOKEN: short }))
      .to.throw(ConfigError, 'GATEWAY_ADMIN_TOKEN must be at least 32 characters long')
      .with.property('message')
      .that.does.not.contain(short);
    expect(loadConfig({ GATEWAY_CONFIG: path, GATEWAY_ADMIN_TOKEN: `${short}x` }).adminToken).to.equal(`${short}x`);
    expect(() => loadConfig({ GATEWAY_CONFIG: path, GATEWAY_KEY_ID_SECRET: short }))
      .to.throw(ConfigError, 'GATEWAY_KEY_ID_SECRET must be at least 32 characters long')
      .with.property('message')
      .that.does.not.contain(short);
    expect(loadConfig({ GATEWAY_CONFIG: path, GATEWAY_KEY_ID_SECRET: `${short}x` }).keyIdSecret).to.equal(`${short}x`);
    expect(loadConfig({ GATEWAY_CONFIG: path }).limitsAllowUnbounded).to.equal(false);
    expect(loadConfig({ GATEWAY_CONFIG: path, GATEWAY_LIMITS_ALLOW_UNBOUNDED: 'true' }).limitsAllowUnbounded).to.equal(
      true,
    );
    expect(() => loadConfig({ GATEWAY_CONFIG: path, GATEWAY_LIMITS_ALLOW_UNBOUNDED: 'sometimes' })).to.throw(
      ConfigError,
      "GATEWAY_LIMITS_ALLOW_UNBOUNDED must be true or false, got 'sometimes'",
    );
  });
});

describe('start-up refusals', function () {
  this.timeout(30_000);

  it('stops with a clear message on an invalid config', async () => {
    const { code, output } = await startupFailure({ GATEWAY_CONFIG: await configFile('rateLimit:\n  max: -1\n') });
    expect(code).to.equal(1);
    expect(output).to.contain('model-gateway: invalid configuration');
    expect(output).to.contain('rateLimit.max must be a positive number');
    expect(output).not.to.contain('    at ');
  });

  it('stops on a short admin token and a short static key, naming both variables but neither value', async () => {
    const token = 'short-admin-token-0001';
    const key = 'sk-short-static-key-0001';
    const config = await configFile('');
    const { code, output } = await startupFailure({
      GATEWAY_CONFIG: config,
      GATEWAY_DATA_DIR: dirname(config),
      GATEWAY_ADMIN_TOKEN: token,
      GATEWAY_API_KEYS: key,
    });
    expect(code).to.equal(1);
    expect(output).to.contain('model-gateway: invalid configuration:');
    expect(output)
      .to.contain('GATEWAY_ADMIN_TOKEN must be at least 32 characters long')
      .and.to.contain('GATEWAY_API_KEYS entry 1 is not a valid key');
    expect(output).not.to.contain(token).and.not.to.contain(key);
  });

  it('reads a setting from its NAME_FILE, and stops on an unreadable one naming variable and path', async () => {
    const config = await configFile('');
    const token = 'short-admin-token-from-a-file';
    const tokenFile = join(dirname(config), 'admin-token');
    await writeFile(tokenFile, `${token}\n`);
    const read = await startupFailure({
      GATEWAY_CONFIG: config,
      GATEWAY_DATA_DIR: dirname(config),
      GATEWAY_ADMIN_TOKEN_FILE: tokenFile,
    });
    expect(read.code).to.equal(1);
    // The file's content is the token: checked as the variable itself would be, and never printed.
    expect(read.output).to.contain('GATEWAY_ADMIN_TOKEN must be at least 32 characters long');
    expect(read.output).not.to.contain(token);
    const missing = join(dirname(config), 'no-such-file');
    const unreadable = await startupFailure({
      GATEWAY_CONFIG: config,
      GATEWAY_DATA_DIR: dirname(config),
      REDIS_URL_FILE: missing,
    });
    expect(unreadable.code).to.equal(1);
    expect(unreadable.output).to.contain(`REDIS_URL_FILE: cannot read ${missing} (ENOENT)`);
  });

  it('stops on every alias problem at once, each by position and field', async () => {
    const config = await configFile('aliases:\n  beta-latest: beta/no-such-model\n  alpha-latest: beta/beta-opus-5\n');
    const { code, output } = await startupFailure({ GATEWAY_CONFIG: config, GATEWAY_DATA_DIR: dirname(config) });
    expect(code).to.equal(1);
    expect(output).to.contain('model-gateway: cannot start:\n');
    expect(output).to.match(/line 2, column 3: aliases\.beta-latest: .*'beta\/no-such-model' is not a known model/);
    expect(output).to.match(
      /line 3, column 3: aliases\.alpha-latest: .*does not serve the alias's route\(s\) responses/,
    );
  });

  it('refuses a broken plugin, naming the plugin and the field', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'gateway-plugins-'));
    const { mkdir } = await import('node:fs/promises');
    await mkdir(join(dir, 'acme'));
    await writeFile(join(dir, 'manifest.json'), JSON.stringify({ plugins: ['acme'] }));
    await writeFile(
      join(dir, 'acme', 'index.ts'),
      "export default { contract: 1, vendor: 'acme', routes: { 'chat-completions': { path: '/chat/completions', format: 'chat-completions', auth: 'bearer' } }, models: [{ id: 'one', listed: true, routes: ['chat-completions'], pricing: { input: 1, cachedInput: 0.1, output: 2 } }], aliases: [{ id: 'acme-latest', target: 'acme/two', routes: ['chat-completions'] }] };\n",
    );
    const { code, output } = await startupFailure({
      GATEWAY_MANIFEST: join(dir, 'manifest.json'),
      GATEWAY_DATA_DIR: dir,
    });
    expect(code).to.equal(1);
    expect(output).to.contain(
      "model-gateway: cannot start: plugin 'acme': aliases[0].target: 'acme/two' is not one of the plugin's models",
    );
  });
});
