import { expect } from 'chai';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runCli } from '../../src/cli/main.ts';
import { FileKeyStore } from '../../src/stores/keys/file-key-store.ts';
import { FileTeamStore } from '../../src/stores/teams/file-team-store.ts';

async function cli(argv: string[], env: NodeJS.ProcessEnv): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await runCli(argv, { out: (text) => (out += text), err: (text) => (err += text) }, env);
  return { code, out, err };
}

describe('CLI: the --end-user-* flags of keys and teams', function () {
  this.timeout(30_000);
  let dataDir: string;
  let env: NodeJS.ProcessEnv;

  beforeEach(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'gateway-cli-end-user-'));
    env = { GATEWAY_DATA_DIR: dataDir };
  });
  afterEach(async () => rm(dataDir, { recursive: true, force: true }));

  it('creates a key with end-user limits, changes one side, clears one limit, then all of them', async () => {
    const flags = ['--end-user-rpm', '10', '--end-user-daily-usd', '0.5', '--end-user-monthly-usd', '5'];
    const made = await cli(['keys', 'create', '--name', 'product', ...flags], env);
    expect(made.code, made.err).to.equal(0);
    const store = new FileKeyStore(dataDir);
    const id = (await store.list())[0]!.id;
    expect((await store.list())[0]!.end_user).to.deep.equal({ rpm: 10, budget: { daily_usd: 0.5, monthly_usd: 5 } });
    expect((await cli(['keys', 'list'], env)).out).to.match(/rpm 10, \$0\.5 a day, \$5 a month$/m);
    const changed = await cli(['keys', 'update', id, '--end-user-daily-usd', '1', '--clear', 'end-user-rpm'], env);
    expect(changed.code, changed.err).to.equal(0);
    expect((await store.list())[0]!.end_user).to.deep.equal({ budget: { daily_usd: 1, monthly_usd: 5 } });
    await cli(['keys', 'update', id, '--clear', 'end-user-daily-usd', '--clear', 'end-user-monthly-usd'], env);
    expect((await store.list())[0]!).to.not.have.property('end_user');
    await cli(['keys', 'update', id, '--end-user-tpm', '900'], env);
    await cli(['keys', 'update', id, '--clear', 'end-user'], env);
    expect((await store.list())[0]!).to.not.have.property('end_user');
  });

  it('names the flag of a bad end-user limit, and refuses a flag that contradicts its --clear', async () => {
    const bad = await cli(
      ['keys', 'create', '--name', 'k', '--end-user-rpm', 'many', '--end-user-daily-usd', '0'],
      env,
    );
    expect(bad.code, bad.err).to.equal(1);
    expect(bad.err).to.contain("Field '--end-user-rpm': must be a positive integer");
    expect(bad.err).to.contain("Field '--end-user-daily-usd': must be a positive number of USD");
    await cli(['teams', 'create', 'support', '--end-user-daily-tokens', '1000'], env);
    expect(await new FileTeamStore(dataDir).get('support')).to.deep.include({ end_user: { quota: { daily: 1000 } } });
    const contradiction = await cli(['teams', 'update', 'support', '--clear', 'end-user', '--end-user-rpm', '3'], env);
    expect(contradiction.code).to.equal(2);
    expect(contradiction.err).to.contain('--clear end-user and --end-user-rpm contradict each other');
    const updated = await cli(['teams', 'update', 'support', '--end-user-rpm', '3'], env);
    expect(updated.out).to.contain('each end user: rpm 3, 1000 tokens a day');
  });
});
