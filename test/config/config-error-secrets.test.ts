import { expect } from 'chai';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { runCli } from '../../src/cli/main.ts';
import { startupFailure } from '../helpers/gateway-process.ts';
import { startTestGateway, type TestGateway } from '../helpers/test-gateway.ts';

const SECRET = 'sk-upstream-NEVER-SHOWN-7f3a9c';
const ADMIN_TOKEN = 'config-secrets-admin-token-0123456789abcdef';
// Line 5, right below the upstream key, is indented one column short: the parser's own message quotes
// the line before the error, the key included.
const good = 'logLevel: info\nproviders:\n  alpha:\n    apiKey: ' + SECRET + '\n';
const broken = `${good}   baseUrl: http://127.0.0.1:9/v1\nrateLimit:\n  max: 5\n`;

describe('a config file that does not parse, next to an upstream key', function () {
  this.timeout(60_000);
  let dir: string;
  let file: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'gateway-config-secrets-'));
    file = join(dir, 'gateway.yaml');
  });
  afterEach(async () => rm(dir, { recursive: true, force: true }));

  it('refuses the start by position, without the key on stderr', async () => {
    await writeFile(file, broken);
    const { code, output } = await startupFailure({ GATEWAY_CONFIG: file, GATEWAY_DATA_DIR: dir });
    expect(code).to.equal(1);
    expect(output).to.match(
      /model-gateway: invalid configuration: .*gateway\.yaml line \d+, column \d+: not valid YAML/,
    );
    expect(output).not.to.contain(SECRET);
  });

  it('fails config check by position, without the key in its output', async () => {
    await writeFile(file, broken);
    let out = '';
    let err = '';
    const code = await runCli(
      ['config', 'check', file],
      { out: (text) => (out += text), err: (text) => (err += text) },
      {},
    );
    expect(code).to.equal(1);
    expect(err).to.match(/gateway\.yaml line \d+, column \d+: not valid YAML/);
    expect(out + err).not.to.contain(SECRET);
  });

  describe('at a reload', () => {
    let test: TestGateway;
    let logged: string;
    afterEach(async () => test?.close());

    it('keeps serving, ready but stale, and shows the error without the key in /readyz, the health view, the metrics and the log', async () => {
      logged = '';
      const log = new PassThrough().on('data', (chunk: Buffer) => (logged += chunk.toString()));
      await writeFile(file, good);
      test = await startTestGateway({ configFile: file, env: { GATEWAY_ADMIN_TOKEN: ADMIN_TOKEN }, logTo: log });
      const fresh = await fetch(`${test.url}/readyz`);
      expect(fresh.status).to.equal(200);
      expect(await fresh.json())
        .to.include({ config_stale: false })
        .and.not.to.have.property('config_error');

      await writeFile(file, broken);
      expect(test.gateway.reloadConfig('test')).to.include({ applied: false });

      const readyz = await fetch(`${test.url}/readyz`);
      const readyText = await readyz.text();
      expect(readyz.status).to.equal(200);
      const ready = JSON.parse(readyText) as Record<string, unknown>;
      expect(ready).to.include({ status: 'ok', config_stale: true });
      expect(ready.config_error).to.match(/gateway\.yaml line 5, column \d+: not valid YAML: .+ \([A-Z_]+\)$/);
      expect(readyText).not.to.contain(SECRET);

      const signedIn = await fetch(`${test.url}/account/api/session`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ token: ADMIN_TOKEN }),
      });
      expect(signedIn.status).to.equal(201);
      const cookie = signedIn.headers.get('set-cookie')!.split(';')[0]!;
      const health = await fetch(`${test.url}/account/api/health`, { headers: { cookie } });
      const healthText = await health.text();
      expect(health.status).to.equal(200);
      expect((JSON.parse(healthText) as { readiness: Record<string, unknown> }).readiness).to.include({
        config_stale: true,
        config_error: ready.config_error,
      });
      expect(healthText).not.to.contain(SECRET);

      const metrics = await (await fetch(`${test.url}/metrics`)).text();
      expect(metrics).to.match(/^gateway_config_stale 1$/m);

      expect(logged).to.contain('configuration reload refused').and.to.contain(String(ready.config_error));
      expect(logged).not.to.contain(SECRET);

      // A good file again: applied, no longer stale.
      await writeFile(file, good);
      expect(test.gateway.reloadConfig('test')).to.include({ applied: true });
      expect(await (await fetch(`${test.url}/readyz`)).json()).to.include({ config_stale: false });
      expect(await (await fetch(`${test.url}/metrics`)).text()).to.match(/^gateway_config_stale 0$/m);
    });
  });
});

describe('a Redis URL that does not parse (a password holding # or /)', function () {
  this.timeout(60_000);
  const PASSWORD = 'pa#ss/NEVER-SHOWN-91c2';
  const url = `redis://:${PASSWORD}@redis.internal:6379`;
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'gateway-redis-url-'));
  });
  afterEach(async () => rm(dir, { recursive: true, force: true }));

  const refusesCleanly = (output: string) => {
    expect(output).not.to.contain(PASSWORD).and.not.to.contain('pa#ss').and.not.to.contain('NEVER-SHOWN');
    expect(output, 'no stack trace').not.to.match(/\n\s+at |TypeError|ERR_INVALID_URL/);
  };

  it('stops the start naming REDIS_URL, never its value', async () => {
    const { code, output } = await startupFailure({ REDIS_URL: url, GATEWAY_DATA_DIR: dir });
    expect(code).to.equal(1);
    expect(output).to.match(/^model-gateway: invalid configuration: REDIS_URL is not a valid URL: /);
    expect(output).to.contain('write the user name and password percent-encoded (# as %23, / as %2F');
    refusesCleanly(output);
  });

  it('stops the start naming REDIS_URL_FILE and its path when the URL came from the file', async () => {
    const secret = join(dir, 'redis_url');
    await writeFile(secret, `${url}\n`);
    const { code, output } = await startupFailure({ REDIS_URL_FILE: secret, GATEWAY_DATA_DIR: dir });
    expect(code).to.equal(1);
    expect(output).to.contain(
      `invalid configuration: REDIS_URL (read from REDIS_URL_FILE, ${secret}) is not a valid URL`,
    );
    refusesCleanly(output);
  });

  it('names the file of GATEWAY_ENV_DIR the URL came from', async () => {
    const secrets = join(dir, 'secrets');
    await mkdir(secrets);
    await writeFile(join(secrets, 'REDIS_URL'), url);
    const { code, output } = await startupFailure({ GATEWAY_ENV_DIR: secrets, GATEWAY_DATA_DIR: dir });
    expect(code).to.equal(1);
    const file = join(secrets, 'REDIS_URL');
    expect(output).to.contain(`REDIS_URL (read from GATEWAY_ENV_DIR, ${file}) is not a valid URL`);
    refusesCleanly(output);
  });

  it("fails an operator command and config check the same way, and the file's redis.url by line and column", async () => {
    const secret = join(dir, 'redis_url');
    await writeFile(secret, url);
    let out = '';
    let err = '';
    const io = { out: (text: string) => (out += text), err: (text: string) => (err += text) };
    expect(await runCli(['keys', 'list'], io, { REDIS_URL_FILE: secret, GATEWAY_DATA_DIR: dir })).to.equal(1);
    expect(err).to.contain(`REDIS_URL (read from REDIS_URL_FILE, ${secret}) is not a valid URL`);
    const file = join(dir, 'gateway.yaml');
    await writeFile(file, `logLevel: info\nredis:\n  url: ${url}\n`);
    expect(await runCli(['config', 'check', file], io, { GATEWAY_DATA_DIR: dir })).to.equal(1);
    expect(err).to.match(/gateway\.yaml line 3, column 3: redis\.url is not a valid URL/);
    refusesCleanly(out + err);
  });
});
