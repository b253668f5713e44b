import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { ConfigError, loadConfig, providerEndpointSettings } from '../../../src/config/gateway-config.ts';

async function configFile(text: string): Promise<string> {
  const path = join(await mkdtemp(join(tmpdir(), 'gateway-endpoints-')), 'gateway.yaml');
  await writeFile(path, text);
  return path;
}

describe('provider endpoint settings', () => {
  const empty = () => loadConfig({ GATEWAY_CONFIG: '/dev/null' });

  it('reads several comma-separated base URLs with one key for all', () => {
    expect(
      providerEndpointSettings(empty(), 'acme', 'ACME', {
        ACME_BASE_URL: 'http://a.example/v1/, http://b.example/v1',
        ACME_API_KEY: 'k-one',
      }),
    ).to.deep.equal([
      { baseUrl: 'http://a.example/v1', apiKey: 'k-one', weight: 1, name: '0' },
      { baseUrl: 'http://b.example/v1', apiKey: 'k-one', weight: 1, name: '1' },
    ]);
  });

  it('pairs a key list with the URLs, and refuses a list of another length', () => {
    const settings = providerEndpointSettings(empty(), 'acme', 'ACME', {
      ACME_BASE_URL: 'http://a.example/v1,http://b.example/v1',
      ACME_API_KEY: 'k-a,k-b',
    });
    expect(settings.map((entry) => entry.apiKey)).to.deep.equal(['k-a', 'k-b']);
    expect(() =>
      providerEndpointSettings(empty(), 'acme', 'ACME', {
        ACME_BASE_URL: 'http://a.example/v1,http://b.example/v1',
        ACME_API_KEY: 'k-a,k-b,k-c',
      }),
    ).to.throw(ConfigError, 'ACME_API_KEY lists 3 keys for 2 endpoints');
    expect(() =>
      providerEndpointSettings(empty(), 'acme', 'ACME', { ACME_BASE_URL: 'http://a.example/v1,ftp://b' }),
    ).to.throw(ConfigError, 'ACME_BASE_URL');
  });

  it("reads the config file's endpoint list with names and weights; env wins over it", async () => {
    const path = await configFile(
      'providers:\n  acme:\n    endpoints:\n      - baseUrl: http://a.example/v1\n        apiKey: k-a\n        weight: 3\n        name: primary\n      - baseUrl: http://b.example/v1/\n',
    );
    const config = loadConfig({ GATEWAY_CONFIG: path });
    expect(providerEndpointSettings(config, 'acme', 'ACME', {})).to.deep.equal([
      { baseUrl: 'http://a.example/v1', apiKey: 'k-a', weight: 3, name: 'primary' },
      { baseUrl: 'http://b.example/v1', apiKey: undefined, weight: 1, name: '1' },
    ]);
    expect(
      providerEndpointSettings(config, 'acme', 'ACME', { ACME_API_KEY: 'env-key' }).map((entry) => entry.apiKey),
    ).to.deep.equal(['env-key', 'env-key']);
    expect(providerEndpointSettings(config, 'acme', 'ACME', { ACME_BASE_URL: 'http://env.example/v1' })).to.deep.equal([
      { baseUrl: 'http://env.example/v1', apiKey: undefined, weight: 1, name: '0' },
    ]);
    expect(providerEndpointSettings(config, 'other', 'OTHER', {})).to.deep.equal([]);
  });

  it("reads an endpoint's auth (any header case, one spelling per place); env keys keep it, env URLs replace the list and it", async () => {
    const path = await configFile(
      [
        'providers:',
        '  kappa:',
        '    endpoints:',
        "      - { name: main, baseUrl: 'http://a.example/v1', apiKey: k-a, auth: { prefix: '', header: X-Kappa-Key } }",
        "      - { name: region, baseUrl: 'http://b.example/v1', apiKey: k-b, auth: { query: key } }",
        "      - { baseUrl: 'http://c.example/v1', auth: x-api-key }",
        "      - { baseUrl: 'http://d.example/v1' }",
        '',
      ].join('\n'),
    );
    const config = loadConfig({ GATEWAY_CONFIG: path });
    expect(providerEndpointSettings(config, 'kappa', 'KAPPA', {})).to.deep.equal([
      {
        baseUrl: 'http://a.example/v1',
        apiKey: 'k-a',
        weight: 1,
        name: 'main',
        auth: { header: 'x-kappa-key', prefix: '' },
      },
      { baseUrl: 'http://b.example/v1', apiKey: 'k-b', weight: 1, name: 'region', auth: { query: 'key' } },
      { baseUrl: 'http://c.example/v1', apiKey: undefined, weight: 1, name: '2', auth: 'x-api-key' },
      { baseUrl: 'http://d.example/v1', apiKey: undefined, weight: 1, name: '3' },
    ]);
    expect(
      providerEndpointSettings(config, 'kappa', 'KAPPA', { KAPPA_API_KEY: 'env-key' }).map((entry) => [
        entry.apiKey,
        entry.auth,
      ]),
    ).to.deep.equal([
      ['env-key', { header: 'x-kappa-key', prefix: '' }],
      ['env-key', { query: 'key' }],
      ['env-key', 'x-api-key'],
      ['env-key', undefined],
    ]);
    expect(
      providerEndpointSettings(config, 'kappa', 'KAPPA', { KAPPA_BASE_URL: 'http://env.example/v1' }),
    ).to.deep.equal([{ baseUrl: 'http://env.example/v1', apiKey: undefined, weight: 1, name: '0' }]);
  });

  it('refuses a bad endpoint auth naming its field (line and column of its key), never quoting it, and reports every one', async () => {
    const path = await configFile(
      [
        'providers:',
        '  kappa:',
        '    endpoints:',
        "      - { baseUrl: 'http://a.example/v1', auth: bearer }",
        "      - { baseUrl: 'http://b.example/v1', apiKey: sk-upstream-TOPSECRET-1, auth: sk-upstream-TOPSECRET-1 }",
        "      - { baseUrl: 'http://c.example/v1', auth: { query: key, prefix: 'Key ' } }",
        "      - { baseUrl: 'http://d.example/v1', auth: { header: 'x kappa' } }",
        "      - { baseUrl: 'http://e.example/v1', auth: { header: Content-Type } }",
        "      - { baseUrl: 'http://f.example/v1', auth: { cookie: TOPSECRET } }",
        "      - { baseUrl: 'http://g.example/v1', auth: { header: x-k, query: k } }",
        '',
      ].join('\n'),
    );
    let error: ConfigError | undefined;
    try {
      loadConfig({ GATEWAY_CONFIG: path });
    } catch (thrown) {
      error = thrown as ConfigError;
    }
    expect(error).to.be.instanceOf(ConfigError);
    const expected =
      "must be 'bearer', 'x-api-key', { header: '<lower case name>', prefix?: '<text before the key>' } or { query: '<parameter>' }";
    expect(error!.problems).to.deep.equal([
      `${path} line 5, column 76: providers.kappa.endpoints[1].auth: ${expected}`,
      `${path} line 6, column 63: providers.kappa.endpoints[2].auth.prefix: only a header credential takes a prefix`,
      `${path} line 7, column 51: providers.kappa.endpoints[3].auth.header: must be a lower case header name`,
      `${path} line 8, column 51: providers.kappa.endpoints[4].auth.header: 'content-type' is set by the gateway itself; name the vendor's credential header`,
      `${path} line 9, column 51: providers.kappa.endpoints[5].auth.cookie: unknown field (${expected})`,
      `${path} line 10, column 43: providers.kappa.endpoints[6].auth: give exactly one of header or query (${expected})`,
    ]);
    expect(error!.message).not.to.contain('TOPSECRET');
  });

  it('refuses a bad endpoint list with a message naming the field', async () => {
    const cases: [string, string][] = [
      ['providers:\n  acme:\n    endpoints: []\n', 'providers.acme.endpoints must be a non-empty list'],
      [
        'providers:\n  acme:\n    endpoints:\n      - apiKey: x\n',
        'providers.acme.endpoints[0].baseUrl must be a string',
      ],
      [
        'providers:\n  acme:\n    endpoints:\n      - baseUrl: http://a/v1\n        weight: 0\n',
        'providers.acme.endpoints[0].weight must be a positive number',
      ],
      [
        'providers:\n  acme:\n    endpoints:\n      - baseUrl: http://a/v1\n        wieght: 2\n',
        'providers.acme.endpoints[0].wieght is not a known setting',
      ],
    ];
    for (const [text, message] of cases) {
      const path = await configFile(text);
      expect(() => loadConfig({ GATEWAY_CONFIG: path }), message).to.throw(ConfigError, message);
    }
  });

  it('reads the upstream timeouts and the failover settings, env over file, with their defaults', async () => {
    expect(empty()).to.deep.include({
      firstByteTimeoutMs: 60_000,
      idleTimeoutMs: 60_000,
      failover: { maxAttempts: undefined, failureThreshold: 5, cooldownMs: 30_000 },
    });
    const path = await configFile(
      'upstream:\n  firstByteTimeoutMs: 5000\n  idleTimeoutMs: 7000\nfailover:\n  maxAttempts: 2\n  failureThreshold: 3\n  cooldownMs: 1000\n',
    );
    expect(loadConfig({ GATEWAY_CONFIG: path, UPSTREAM_FIRST_BYTE_TIMEOUT_MS: '4000' })).to.deep.include({
      firstByteTimeoutMs: 4000,
      idleTimeoutMs: 7000,
      failover: { maxAttempts: 2, failureThreshold: 3, cooldownMs: 1000 },
    });
    const tooMany = await configFile('failover:\n  maxAttempts: 6\n');
    expect(() => loadConfig({ GATEWAY_CONFIG: tooMany })).to.throw(ConfigError, 'maxAttempts');
  });
});
