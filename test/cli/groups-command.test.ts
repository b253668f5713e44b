import { expect } from 'chai';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runCli } from '../../src/cli/main.ts';
import { FileAuditStore } from '../../src/stores/audit/file-audit-store.ts';
import { FileGroupStore } from '../../src/stores/groups/file-group-store.ts';
import { FileKeyStore } from '../../src/stores/keys/file-key-store.ts';
import { FileTeamStore } from '../../src/stores/teams/file-team-store.ts';
import { EmbeddedLedger } from '../../src/stores/limits/embedded-ledger.ts';
import { createLogger } from '../../src/core/logger.ts';

async function cli(argv: string[], env: NodeJS.ProcessEnv): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await runCli(argv, { out: (text) => (out += text), err: (text) => (err += text) }, env);
  return { code, out, err };
}

describe('CLI groups, and --group on teams and keys', function () {
  this.timeout(30_000);
  let dataDir: string;
  let env: NodeJS.ProcessEnv;
  let groups: FileGroupStore;

  beforeEach(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'gateway-cli-groups-'));
    env = { GATEWAY_DATA_DIR: dataDir };
    groups = new FileGroupStore(dataDir);
  });
  afterEach(async () => rm(dataDir, { recursive: true, force: true }));

  it('creates a group with its limits, lists it with its members, and keeps each change in the audit log', async () => {
    const created = await cli(
      ['groups', 'create', 'dept', '--daily-usd', '100', '--monthly-tokens', '900', '--alerts', '50,90'],
      env,
    );
    expect(created).to.deep.include({
      code: 0,
      err: '',
      out: 'Created group dept (900 tokens a month, $100 a day, alerts at 50 %, 90 %); name it on teams or keys with --group dept.\n',
    });
    expect(await groups.get('dept')).to.deep.include({
      quota: { monthly: 900 },
      budget: { daily_usd: 100 },
      alerts: [50, 90],
    });
    expect(await cli(['groups', 'create', 'dept'], env)).to.deep.include({
      code: 1,
      err: "A group named 'dept' exists already\n",
    });
    const bad = await cli(['groups', 'create', 'odd', '--daily-usd', 'lots', '--alerts', '90,50'], env);
    expect(bad.code).to.equal(1);
    expect(bad.err).to.include("Field '--daily-usd': must be a positive number of USD");
    expect(bad.err).to.include("Field '--alerts': must be a list of whole percents from 1 to 100 in ascending order");

    expect((await cli(['teams', 'create', 'sales', '--group', 'dept'], env)).out).to.equal(
      'Created team sales (group dept).\n',
    );
    const key = await cli(['keys', 'create', '--name', 'analyst', '--group', 'dept'], env);
    expect(key.code).to.equal(0);
    const keyId = /Created API key (key_\w+)/.exec(key.out)![1]!;
    const listed = await cli(['groups', 'list'], env);
    const [header, row] = listed.out.trimEnd().split('\n');
    const columns = [
      'name',
      'created',
      'tpm',
      'daily-tokens',
      'monthly-tokens',
      'daily-usd',
      'monthly-usd',
      'alerts',
      'teams',
      'keys',
    ];
    expect(header!.split(/\s+/)).to.deep.equal(columns);
    expect(row).to.match(new RegExp(`^dept\\s+\\S+\\s+-\\s+-\\s+900\\s+100\\s+-\\s+50,90\\s+sales\\s+${keyId}$`));

    const audit = await new FileAuditStore(dataDir).all();
    expect(audit.map((record) => record.action)).to.include.members(['group.create', 'team.create', 'key.create']);
    expect(audit.find((record) => record.action === 'group.create')!.target).to.deep.include({
      type: 'group',
      id: 'dept',
    });
  });

  it('refuses --group naming no group on teams and keys, and sets and clears it with update', async () => {
    expect(await cli(['teams', 'create', 'sales', '--group', 'nowhere'], env)).to.deep.include({
      code: 1,
      err: "Invalid input parameters\n  Field '--group': no group is named 'nowhere' (create it first)\n",
    });
    await cli(['groups', 'create', 'dept'], env);
    await cli(['teams', 'create', 'sales'], env);
    expect((await cli(['teams', 'update', 'sales', '--group', 'dept'], env)).code).to.equal(0);
    expect((await new FileTeamStore(dataDir).get('sales'))!.group).to.equal('dept');
    expect((await cli(['teams', 'update', 'sales', '--clear', 'group'], env)).code).to.equal(0);
    expect((await new FileTeamStore(dataDir).get('sales'))!.group).to.equal(undefined);
    expect((await cli(['teams', 'update', 'sales', '--clear', 'group', '--group', 'dept'], env)).code).to.equal(2);

    const key = await cli(['keys', 'create', '--name', 'k', '--group', 'nowhere'], env);
    expect(key.code).to.equal(1);
    expect(key.err).to.include("Field '--group': no group is named 'nowhere' (create it first)");
    const made = await cli(['keys', 'create', '--name', 'k'], env);
    const keyId = /Created API key (key_\w+)/.exec(made.out)![1]!;
    expect((await cli(['keys', 'update', keyId, '--group', 'dept'], env)).code).to.equal(0);
    expect((await new FileKeyStore(dataDir).list())[0]!.group).to.equal('dept');
    expect((await cli(['keys', 'update', keyId, '--clear', 'group'], env)).code).to.equal(0);
    expect((await new FileKeyStore(dataDir).list())[0]!.group).to.equal(undefined);
  });

  it('shows a group with its members and the use the server wrote; deletes it once nothing names it', async () => {
    await cli(['groups', 'create', 'dept', '--daily-usd', '10', '--tpm', '5000'], env);
    await cli(['teams', 'create', 'sales', '--group', 'dept'], env);
    const { id } = (await groups.get('dept'))!;
    // What a server counted today, as the embedded ledger keeps it in the data directory.
    const ledger = await EmbeddedLedger.open(dataDir, createLogger('silent'));
    const day = new Date().toISOString().slice(0, 10);
    const tomorrow = Date.UTC(new Date().getUTCFullYear(), new Date().getUTCMonth(), new Date().getUTCDate() + 1);
    ledger.reserve([
      { counter: `group:${id}:budget:d:${day}`, limit: 10e9, want: 2.5e9, need: 2.5e9, resetAt: tomorrow },
    ]);
    await ledger.close();

    const shown = await cli(['groups', 'show', 'dept'], env);
    expect(shown.code, shown.err).to.equal(0);
    const lines = shown.out.trimEnd().split('\n');
    expect(lines.slice(0, 3)).to.deep.equal([
      'Group dept (tpm 5000, $10 a day)',
      'Teams: sales',
      'Keys naming it: none',
    ]);
    expect(lines.find((line) => line.startsWith('tokens per minute'))).to.match(/not counted here/);
    expect(lines.find((line) => line.startsWith('USD today (UTC)'))).to.match(
      /^USD today \(UTC\)\s+2\.5\s+10\s+7\.5\s+25 %/,
    );
    const json = JSON.parse((await cli(['groups', 'show', 'dept', '--json'], env)).out);
    expect(json).to.deep.include({ name: 'dept', members: { teams: ['sales'], keys: [] } });

    const updated = await cli(['groups', 'update', 'dept', '--clear', 'tpm', '--monthly-usd', '200'], env);
    expect(updated.out).to.equal(
      'Updated group dept ($10 a day, $200 a month); every gateway instance applies it within seconds.\n',
    );
    const refused = await cli(['groups', 'delete', 'dept'], env);
    expect(refused).to.deep.include({
      code: 1,
      err: "Group 'dept' is named by team 'sales'; remove the group from it first\n",
    });
    await cli(['teams', 'update', 'sales', '--clear', 'group'], env);
    expect(await cli(['groups', 'delete', 'dept'], env)).to.deep.include({ code: 0, out: 'Deleted group dept.\n' });
    expect(await cli(['groups', 'delete', 'dept'], env)).to.deep.include({
      code: 1,
      err: "No group named 'dept' (see groups list)\n",
    });
    expect(await cli(['groups', 'list'], env)).to.deep.include({
      out: 'No groups yet (groups create NAME makes one).\n',
    });
  });
});
