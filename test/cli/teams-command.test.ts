import { expect } from 'chai';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { hashApiKey } from '../../src/core/api-keys.ts';
import { runCli } from '../../src/cli/main.ts';
import { FileKeyStore } from '../../src/stores/keys/file-key-store.ts';
import { FileTeamStore } from '../../src/stores/teams/file-team-store.ts';
import { RedisTeamStore } from '../../src/stores/teams/redis-team-store.ts';
import { createRedisClient, waitUntilReady } from '../../src/stores/redis/redis-client.ts';
import { TestRedisServer } from '../helpers/redis-server.ts';

async function cli(argv: string[], env: NodeJS.ProcessEnv): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await runCli(argv, { out: (text) => (out += text), err: (text) => (err += text) }, env);
  return { code, out, err };
}

describe("CLI teams and the keys' budget flags", function () {
  this.timeout(30_000);
  let dataDir: string;
  let env: NodeJS.ProcessEnv;
  let teams: FileTeamStore;

  beforeEach(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'gateway-cli-teams-'));
    env = { GATEWAY_DATA_DIR: dataDir };
    teams = new FileTeamStore(dataDir);
  });
  afterEach(async () => rm(dataDir, { recursive: true, force: true }));

  it("creates a team with its limits on the data directory's store, and lists teams as a table", async () => {
    const created = await cli(
      [
        'teams',
        'create',
        'research',
        '--rpm',
        '60',
        '--tpm',
        '20000',
        '--daily-tokens',
        '5000',
        '--monthly-usd',
        '80.5',
        '--concurrency',
        '40',
        '--cache',
        'false',
      ],
      env,
    );
    expect(created).to.deep.include({
      code: 0,
      err: '',
      out: 'Created team research (rpm 60, tpm 20000, 5000 tokens a day, $80.5 a month, at most 40 requests at once, cache false).\n',
    });
    expect(await teams.get('research')).to.deep.include({
      rpm: 60,
      tpm: 20_000,
      quota: { daily: 5000 },
      budget: { monthly_usd: 80.5 },
      cache: false,
    });
    expect(await cli(['teams', 'create', 'research'], env)).to.deep.include({
      code: 1,
      err: "A team named 'research' exists already\n",
    });
    await cli(['teams', 'create', 'bare'], env);
    const listed = await cli(['teams', 'list'], env);
    const [header, ...rows] = listed.out.trimEnd().split('\n');
    expect(header!.split(/\s+/)).to.deep.equal([
      'name',
      'created',
      'rpm',
      'tpm',
      'daily-tokens',
      'monthly-tokens',
      'daily-usd',
      'monthly-usd',
      'concurrency',
      'cache',
      'guardrails',
      'group',
      'alerts',
      'end-user',
    ]);
    expect(rows[0]).to.match(/^research\s+\S+\s+60\s+20000\s+5000\s+-\s+-\s+80\.5\s+40\s+false\s+-\s+-\s+-\s+-$/);
    expect(rows[1]).to.match(/^bare\s+\S+(\s+-){12}$/);
  });

  it("sets a team's guardrails (those the configuration holds, or none), changes them, and removes them with --clear guardrails", async () => {
    const config = join(dataDir, 'gateway.yaml');
    const { writeFile } = await import('node:fs/promises');
    await writeFile(
      config,
      'guardrails:\n  - { name: no-emails, use: pii, on: request, action: redact }\n  - { name: moderation, use: webhook, url: http://127.0.0.1:9/check, failMode: open }\n',
    );
    const withConfig = { ...env, GATEWAY_CONFIG: config };
    expect(await cli(['teams', 'create', 'support', '--guardrails', 'no-emails'], withConfig)).to.deep.include({
      code: 0,
      out: 'Created team support (guardrails no-emails).\n',
    });
    expect(await teams.get('support')).to.deep.include({ guardrails: ['no-emails'] });
    expect((await cli(['teams', 'update', 'support', '--guardrails', ''], withConfig)).out).to.contain(
      'Updated team support (guardrails none)',
    );
    expect(await teams.get('support')).to.deep.include({ guardrails: [] });
    expect(await cli(['teams', 'update', 'support', '--guardrails', 'moderation,nope'], withConfig)).to.deep.include({
      code: 1,
      err: "Invalid input parameters\n  Field '--guardrails': no guardrail is named 'nope' in the configuration (configured: no-emails, moderation)\n",
    });
    expect((await cli(['teams', 'list'], withConfig)).out).to.match(/\nsupport\s.*\snone\s+-\s+-\s+-\n$/);
    expect(
      await cli(['teams', 'update', 'support', '--clear', 'guardrails', '--guardrails', 'no-emails'], withConfig),
    ).to.deep.include({ code: 2 });
    expect((await cli(['teams', 'update', 'support', '--clear', 'guardrails'], withConfig)).out).to.contain(
      'Updated team support (no limits)',
    );
    expect(await teams.get('support')).not.to.have.property('guardrails');
  });

  it('updates a team: flags set limits, a side of quota or budget keeps the other, --clear removes', async () => {
    await teams.create({ name: 'ops', rpm: 5, quota: { daily: 1, monthly: 2 }, budget: { daily_usd: 3 } });
    const updated = await cli(
      ['teams', 'update', 'ops', '--tpm', '700', '--monthly-tokens', '20', '--clear', 'rpm', '--clear', 'daily-usd'],
      env,
    );
    expect(updated.code, updated.err).to.equal(0);
    expect(updated.out).to.contain('Updated team ops (tpm 700, 1 tokens a day, 20 tokens a month)');
    const team = await teams.get('ops');
    expect(team).to.deep.equal({
      id: team!.id,
      name: 'ops',
      createdAt: team!.createdAt,
      tpm: 700,
      quota: { daily: 1, monthly: 20 },
    });
    await cli(['teams', 'update', 'ops', '--clear', 'quota', '--daily-usd', '0.25'], env);
    expect(await teams.get('ops')).to.deep.equal({
      id: team!.id,
      name: 'ops',
      createdAt: team!.createdAt,
      tpm: 700,
      budget: { daily_usd: 0.25 },
    });
    expect(await cli(['teams', 'update', 'nobody', '--rpm', '1'], env)).to.deep.include({
      code: 1,
      err: "No team named 'nobody' (see teams list)\n",
    });
  });

  it("sets a team's cache setting with --cache true|false, keeping the limits, and removes it with --clear cache", async () => {
    await teams.create({ name: 'ops', rpm: 5 });
    const off = await cli(['teams', 'update', 'ops', '--cache', 'false'], env);
    expect(off).to.deep.include({
      code: 0,
      err: '',
      out: 'Updated team ops (rpm 5, cache false); every gateway instance applies it within seconds.\n',
    });
    expect(await teams.get('ops')).to.deep.include({ rpm: 5, cache: false });
    expect((await cli(['teams', 'update', 'ops', '--cache', 'true', '--tpm', '9'], env)).code).to.equal(0);
    expect(await teams.get('ops')).to.deep.include({ rpm: 5, tpm: 9, cache: true });
    expect((await cli(['teams', 'update', 'ops', '--clear', 'cache'], env)).out).to.contain(
      'Updated team ops (rpm 5, tpm 9)',
    );
    expect(await teams.get('ops')).not.to.have.property('cache');
    expect(await cli(['teams', 'update', 'ops', '--cache', 'off'], env)).to.deep.include({
      code: 1,
      err: "Invalid input parameters\n  Field '--cache': must be true or false\n",
    });
    expect(await cli(['teams', 'create', 'other', '--cache', 'yes'], env)).to.deep.include({
      code: 1,
      err: "Invalid input parameters\n  Field '--cache': must be true or false\n",
    });
    const both = await cli(['teams', 'update', 'ops', '--clear', 'cache', '--cache', 'false'], env);
    expect(both.code).to.equal(2);
    expect(both.err).to.match(/^--clear cache and --cache contradict each other\n/);
    expect(await teams.get('ops')).not.to.have.property('cache');
    expect(await teams.get('other')).to.equal(undefined);
  });

  it('names the flag of each bad value, and refuses bad usage (exit 2)', async () => {
    const bad = await cli(
      ['teams', 'create', 'bad name', '--rpm', 'many', '--daily-usd', '0.0000001', '--monthly-tokens=-3'],
      env,
    );
    expect(bad.code).to.equal(1);
    expect(
      bad.err
        .split('\n')
        .slice(1)
        .map((line) => line.trim())
        .filter(Boolean),
    ).to.have.members([
      "Field 'NAME': must be 1 to 64 characters of letters, digits, ., _ and -",
      "Field '--rpm': must be a positive integer",
      "Field '--daily-usd': must have at most 6 decimals",
      "Field '--monthly-tokens': must be a positive integer",
    ]);
    await teams.create({ name: 'ok' });
    expect((await cli(['teams', 'update', 'ok', '--tpm', '0'], env)).err).to.equal(
      "Invalid input parameters\n  Field '--tpm': must be a positive integer\n",
    );
    for (const argv of [
      ['teams', 'create'],
      ['teams', 'update', 'ok', '--clear', 'colour'],
      ['teams', 'update', 'ok', '--clear', 'quota', '--daily-tokens', '3'],
      ['teams', 'delete'],
      ['teams', 'rename', 'ok'],
      ['teams', 'create', 'x', '--weekly-usd', '1'],
    ]) {
      expect((await cli(argv, env)).code, argv.join(' ')).to.equal(2);
    }
    expect(await teams.list()).to.have.length(1);
  });

  it('deletes a team only once no key that is not revoked names it', async () => {
    await cli(['teams', 'create', 'busy'], env);
    const made = await cli(
      [
        'keys',
        'create',
        '--name',
        'member',
        '--team',
        'busy',
        '--tpm',
        '900',
        '--daily-usd',
        '1.5',
        '--monthly-usd',
        '30',
      ],
      env,
    );
    expect(made.code, made.err).to.equal(0);
    const key = /^(sk-[A-Za-z0-9_-]{43})$/m.exec(made.out)![1]!;
    const record = (await new FileKeyStore(dataDir).findByHash(hashApiKey(key)))!;
    expect(record).to.deep.include({ team: 'busy', tpm: 900, budget: { daily_usd: 1.5, monthly_usd: 30 } });
    expect((await cli(['keys', 'list'], env)).out).to.match(
      /\smember\s.*\sbusy\s+-\s+default\s+default\s+default\s+-$/m,
    );
    expect(await cli(['teams', 'delete', 'busy'], env)).to.deep.include({
      code: 1,
      err: "Team 'busy' is named by 1 key that is not revoked; revoke it first\n",
    });
    await cli(['keys', 'revoke', record.id], env);
    expect(await cli(['teams', 'delete', 'busy'], env)).to.deep.include({ code: 0, out: 'Deleted team busy.\n' });
    expect(await cli(['teams', 'delete', 'busy'], env)).to.deep.include({
      code: 1,
      err: "No team named 'busy' (see teams list)\n",
    });
  });

  it('refuses a key naming a team that does not exist, or bad budget flags, naming the flags', async () => {
    const bad = await cli(
      ['keys', 'create', '--name', 'x', '--team', 'nobody', '--tpm', '1.5', '--monthly-usd', 'lots'],
      env,
    );
    expect(bad.code).to.equal(1);
    expect(
      bad.err
        .split('\n')
        .slice(1)
        .map((line) => line.trim())
        .filter(Boolean),
    ).to.have.members([
      "Field '--team': no team is named 'nobody' (create it first)",
      "Field '--tpm': must be a positive integer",
      "Field '--monthly-usd': must be a positive number of USD",
    ]);
    expect(await new FileKeyStore(dataDir).list()).to.deep.equal([]);
  });

  it('uses Redis when REDIS_URL is set', async () => {
    const server = await TestRedisServer.start();
    const client = createRedisClient(server.url);
    try {
      expect(await cli(['teams', 'create', 'shared', '--rpm', '9'], { ...env, REDIS_URL: server.url })).to.deep.include(
        { code: 0 },
      );
      expect(await waitUntilReady(client, 5000)).to.equal(true);
      expect((await new RedisTeamStore(client).get('shared'))?.rpm).to.equal(9);
      expect(await teams.list()).to.deep.equal([]);
      expect((await cli(['teams', 'list'], { ...env, REDIS_URL: server.url })).out).to.match(/^shared\s/m);
    } finally {
      client.disconnect();
      await server.close();
    }
  });
});
