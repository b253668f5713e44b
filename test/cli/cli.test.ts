import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { hashApiKey } from '../../src/core/api-keys.ts';
import { FileKeyStore } from '../../src/stores/keys/file-key-store.ts';
import { RedisKeyStore } from '../../src/stores/keys/redis-key-store.ts';
import { runCli } from '../../src/cli/main.ts';
import { createRedisClient, waitUntilReady } from '../../src/stores/redis/redis-client.ts';
import { eventually } from '../data-plane/pipeline/guarded-app.ts';
import { freePort, TestRedisServer } from '../helpers/redis-server.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** Runs the CLI in this process, as the bin would, capturing what it writes. */
async function cli(argv: string[], env: NodeJS.ProcessEnv): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await runCli(argv, { out: (text) => (out += text), err: (text) => (err += text) }, env);
  return { code, out, err };
}

/**
 * Runs `action`, watching the timers of `delayMs` set meanwhile (`setTimeout` is wrapped for the time it
 * runs): how many fired, and whether the event loop turned (an immediate queued as the last one fired
 * ran) before the action settled. Not turned: the action answered as that timer ended its wait.
 */
async function watchingTimersOf<T>(
  delayMs: number,
  action: () => Promise<T>,
): Promise<{ value: T; fired: number; turnedSince: boolean }> {
  const original = globalThis.setTimeout;
  let fired = 0;
  let turnedSince = false;
  const watched = (callback: (...args: unknown[]) => void, ms?: number, ...args: unknown[]) => {
    if (ms !== delayMs) return original(callback, ms, ...args);
    return original(
      (...given: unknown[]) => {
        fired += 1;
        turnedSince = false;
        setImmediate(() => (turnedSince = true));
        callback(...given);
      },
      ms,
      ...args,
    );
  };
  globalThis.setTimeout = watched as typeof setTimeout;
  try {
    const value = await action();
    return { value, fired, turnedSince };
  } finally {
    globalThis.setTimeout = original;
  }
}

const createdKey = (out: string) => /^(sk-[A-Za-z0-9_-]{43})$/m.exec(out)?.[1];
const createdId = (out: string) => /Created API key (key_[0-9a-f]{16})/.exec(out)?.[1];

describe('CLI', function () {
  this.timeout(30_000);
  let dataDir: string;
  let env: NodeJS.ProcessEnv;

  beforeEach(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'gateway-cli-'));
    env = { GATEWAY_DATA_DIR: dataDir };
  });
  afterEach(async () => rm(dataDir, { recursive: true, force: true }));

  it("creates a key, printing it once with its id, on the data directory's file store", async () => {
    const created = await cli(
      [
        'keys',
        'create',
        '--name',
        'ci',
        '--rpm',
        '20',
        '--concurrency',
        '8',
        '--models',
        'alpha/gen-5.5, beta/beta-fable-5-1',
        '--expires-at',
        '2031-01-31T00:00:00Z',
        '--cache',
        'false',
      ],
      env,
    );
    expect(created.code).to.equal(0);
    const key = createdKey(created.out)!;
    const id = createdId(created.out)!;
    expect(key).to.be.a('string');
    expect(created.out.split(key)).to.have.length(2);
    const record = await new FileKeyStore(dataDir).findByHash(hashApiKey(key));
    expect(record).to.deep.include({
      id,
      name: 'ci',
      rpm: 20,
      concurrency: 8,
      models: ['alpha/gen-5.5', 'beta/beta-fable-5-1'],
      expiresAt: '2031-01-31T00:00:00.000Z',
      cache: false,
    });
    expect(await readFile(join(dataDir, 'keys.json'), 'utf8')).not.to.contain(key);
  });

  it('lists keys as a table without keys or hashes, and revokes by id', async () => {
    const first = await cli(['keys', 'create', '--name', 'first'], env);
    await cli(['keys', 'create', '--name', 'second', '--daily-tokens', '5000', '--cache', 'true'], env);
    await cli(['keys', 'create', '--name', 'third', '--cache', 'false'], env);
    const id = createdId(first.out)!;
    const revoked = await cli(['keys', 'revoke', id], env);
    expect(revoked).to.deep.include({ code: 0, err: '' });
    expect(revoked.out).to.contain(`Revoked ${id}`);
    const listed = await cli(['keys', 'list'], env);
    expect(listed.code).to.equal(0);
    const [header, ...rows] = listed.out.trimEnd().split('\n');
    expect(header!.split(/\s+/)).to.deep.equal([
      'id',
      'name',
      'status',
      'created',
      'expires',
      'rpm',
      'concurrency',
      'models',
      'team',
      'group',
      'cache',
      'guardrails',
      'alerts',
      'end-user',
    ]);
    expect(rows).to.have.length(3);
    expect(rows[0]).to.match(
      new RegExp(
        `^${id}\\s+first\\s+revoked\\s+\\S+\\s+never\\s+default\\s+default\\s+all\\s+-\\s+-\\s+default\\s+default\\s+default\\s+-$`,
      ),
    );
    expect(rows[1]).to.match(/\ssecond\s+active\s.*\strue\s+default\s+default\s+-$/);
    expect(rows[2]).to.match(/\sthird\s+active\s.*\sfalse\s+default\s+default\s+-$/);
    expect(listed.out).not.to.match(/sk-|[0-9a-f]{64}/);
  });

  it('creates keys naming guardrails of the configuration (or none), and refuses a name it does not hold', async () => {
    const config = join(dataDir, 'gateway.yaml');
    const { writeFile } = await import('node:fs/promises');
    await writeFile(
      config,
      "guardrails:\n  - { name: no-emails, use: pii, on: request, action: redact, entities: [email] }\n  - { name: no-codes, use: regex, on: response, action: block, patterns: ['X-[0-9]+'] }\n",
    );
    const withConfig = { ...env, GATEWAY_CONFIG: config };
    expect(
      await cli(['keys', 'create', '--name', 'strict', '--guardrails', 'no-codes, no-emails'], withConfig),
    ).to.deep.include({ code: 0, err: '' });
    expect(await cli(['keys', 'create', '--name', 'trusted', '--guardrails', ''], withConfig)).to.deep.include({
      code: 0,
      err: '',
    });
    expect(await cli(['keys', 'create', '--name', 'typo', '--guardrails', 'no-email'], withConfig)).to.deep.include({
      code: 1,
      err: "Invalid input parameters\n  Field '--guardrails': no guardrail is named 'no-email' in the configuration (configured: no-emails, no-codes)\n",
    });
    const records = await new FileKeyStore(dataDir).list();
    expect(records.map((record) => [record.name, record.guardrails])).to.deep.equal([
      ['strict', ['no-codes', 'no-emails']],
      ['trusted', []],
    ]);
    const rows = (await cli(['keys', 'list'], withConfig)).out.trimEnd().split('\n').slice(1);
    expect(rows[0]).to.match(/\sstrict\s.*\sno-codes,no-emails\s+default\s+-$/);
    expect(rows[1]).to.match(/\strusted\s.*\snone\s+default\s+-$/);
  });

  it('is picked up by a running store instance without a restart', async () => {
    const server = new FileKeyStore(dataDir);
    const created = await cli(['keys', 'create', '--name', 'live'], env);
    const hash = hashApiKey(createdKey(created.out)!);
    await eventually(async () => (await server.findByHash(hash)) !== undefined, 'the new key', 1000);
    await cli(['keys', 'revoke', createdId(created.out)!], env);
    await eventually(async () => (await server.findByHash(hash))?.revoked === true, 'the revoke', 1000);
  });

  it('reports bad input (exit 1) and bad usage (exit 2) clearly', async () => {
    const invalid = await cli(
      ['keys', 'create', '--name', 'x', '--rpm', 'many', '--models', 'alpha-latest', '--expires-at', '2020-01-01'],
      env,
    );
    expect(invalid).to.deep.include({ code: 1, out: '' });
    expect(invalid.err).to.equal(
      [
        'Invalid input parameters',
        "  Field '--rpm': must be a positive integer",
        "  Field '--expires-at': must be in the future",
        "  Field '--models': 'alpha-latest' is not a canonical model ID of this gateway (name concrete models such as vendor/model, not aliases)",
        '',
      ].join('\n'),
    );
    expect(await cli(['keys', 'create'], env)).to.deep.include({
      code: 1,
      err: "Invalid input parameters\n  Field '--name': is required\n",
    });
    for (const value of ['no', 'FALSE', '0', '']) {
      expect(await cli(['keys', 'create', '--name', 'x', `--cache=${value}`], env), value).to.deep.include({
        code: 1,
        err: "Invalid input parameters\n  Field '--cache': must be true or false\n",
      });
    }
    expect(await cli(['keys', 'revoke', 'key_unknown'], env)).to.deep.include({
      code: 1,
      err: "No API key with id 'key_unknown' (see keys list)\n",
    });
    const noId = await cli(['keys', 'revoke'], env);
    expect(noId.code).to.equal(2);
    expect(noId.err).to.match(
      /^keys revoke needs exactly one key id \(see keys list\)\n\nUsage:\n {2}keys create --name NAME/,
    );
    expect((await cli(['keys', 'create', '--nmae', 'x'], env)).err).to.match(/^Unknown option '--nmae'/);
    expect((await cli(['keys', 'rotate'], env)).code).to.equal(2);
    const unknown = await cli(['deploy'], env);
    expect(unknown.code).to.equal(2);
    expect(unknown.err).to.match(/^Unknown command 'deploy'\.\n\nmodel-gateway: operator commands/);
    expect(await cli(['keys', 'list'], { ...env, RATE_LIMIT_MAX: 'lots' })).to.deep.include({
      code: 1,
      err: "Invalid configuration: RATE_LIMIT_MAX must be an integer >= 1, got 'lots'\n",
    });
  });

  it('prints help listing every command', async () => {
    for (const argv of [[], ['help'], ['--help']]) {
      const help = await cli(argv, env);
      expect(help.code).to.equal(0);
      expect(help.out)
        .to.contain('keys create --name NAME')
        .and.to.contain('keys list')
        .and.to.contain('keys revoke KEY_ID')
        .and.to.contain('usage [--key KEY_ID]')
        .and.to.contain('teams create NAME')
        .and.to.contain('teams update NAME')
        .and.to.contain('cache clear [--key KEY_ID | --team NAME]');
    }
  });

  it('uses Redis when REDIS_URL is set, and says so when Redis is not there', async () => {
    const server = await TestRedisServer.start();
    const client = createRedisClient(server.url);
    try {
      const created = await cli(['keys', 'create', '--name', 'on redis'], { ...env, REDIS_URL: server.url });
      expect(created.code).to.equal(0);
      expect(await waitUntilReady(client, 5000)).to.equal(true);
      expect((await new RedisKeyStore(client).findByHash(hashApiKey(createdKey(created.out)!)))?.name).to.equal(
        'on redis',
      );
      expect((await cli(['keys', 'list'], { ...env, REDIS_URL: server.url })).out).to.contain(createdId(created.out)!);
    } finally {
      client.disconnect();
      await server.close();
    }
    const url = `redis://127.0.0.1:${await freePort()}`;
    const {
      value: away,
      fired,
      turnedSince,
    } = await watchingTimersOf(3000, () => cli(['keys', 'list'], { ...env, REDIS_URL: url }));
    expect(away).to.deep.include({ code: 1, err: 'Redis is not reachable (waited 3000 ms); the keys live there\n' });
    // It waited its 3 s once, and answered as that wait ended, waiting for nothing more (a reconnect, a close).
    expect(fired).to.equal(1);
    expect(turnedSince, 'the event loop turned between the end of the wait and the answer').to.equal(false);
  });

  it('runs as a real process: node bin/model-gateway.js keys list', async () => {
    const store = new FileKeyStore(dataDir);
    const { key, record } = await store.create({ name: 'spawned' });
    const run = promisify(execFile);
    const { stdout, stderr } = await run(process.execPath, ['bin/model-gateway.js', 'keys', 'list'], {
      cwd: ROOT,
      env: { PATH: process.env.PATH, GATEWAY_DATA_DIR: dataDir },
    });
    expect(stderr).to.equal('');
    expect(stdout).to.contain(record.id).and.to.contain('spawned');
    expect(stdout).not.to.contain(key);
    expect(stdout).not.to.contain(record.hash);
    const failed = await run(process.execPath, ['bin/model-gateway.js', 'keys', 'revoke', 'key_unknown'], {
      cwd: ROOT,
      env: { PATH: process.env.PATH, GATEWAY_DATA_DIR: dataDir },
    }).catch((error: { code: number; stderr: string }) => error);
    expect(failed).to.deep.include({ code: 1, stderr: "No API key with id 'key_unknown' (see keys list)\n" });
  });
});
