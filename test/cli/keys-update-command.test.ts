import { expect } from 'chai';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runCli } from '../../src/cli/main.ts';
import { FileKeyStore } from '../../src/stores/keys/file-key-store.ts';

async function cli(argv: string[], env: NodeJS.ProcessEnv): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await runCli(argv, { out: (text) => (out += text), err: (text) => (err += text) }, env);
  return { code, out, err };
}

describe('CLI keys update', function () {
  this.timeout(30_000);
  let dataDir: string;
  let env: NodeJS.ProcessEnv;
  let keys: FileKeyStore;
  let id: string;

  beforeEach(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'gateway-cli-keys-update-'));
    env = { GATEWAY_DATA_DIR: dataDir };
    keys = new FileKeyStore(dataDir);
    ({ id } = (
      await keys.create({
        name: 'ci',
        rpm: 20,
        quota: { daily: 5000, monthly: 90_000 },
        budget: { daily_usd: 2, monthly_usd: 30 },
        expiresAt: '2031-01-31T00:00:00.000Z',
      })
    ).record);
  });
  afterEach(async () => rm(dataDir, { recursive: true, force: true }));

  const stored = async () => (await keys.list()).find((record) => record.id === id)!;

  it('sets the flags given with the flags of keys create, keeping the rest, and is listed in the help', async () => {
    const updated = await cli(
      [
        'keys',
        'update',
        id,
        '--name',
        'ci-2',
        '--rpm',
        '5',
        '--tpm',
        '800',
        '--concurrency',
        '2',
        '--monthly-tokens',
        '70000',
        '--daily-usd',
        '1.5',
        '--cache',
        'false',
        '--expires-at',
        '2032-01-01T00:00:00Z',
      ],
      env,
    );
    expect(updated).to.deep.include({
      code: 0,
      err: '',
      out: `Updated API key ${id} (ci-2); every gateway instance applies it within a second.\n`,
    });
    // One side of quota or budget changes that side only.
    expect(await stored()).to.deep.include({
      name: 'ci-2',
      rpm: 5,
      tpm: 800,
      concurrency: 2,
      quota: { daily: 5000, monthly: 70_000 },
      budget: { daily_usd: 1.5, monthly_usd: 30 },
      cache: false,
      expiresAt: '2032-01-01T00:00:00.000Z',
    });
    expect((await cli(['help'], env)).out).to.contain('keys update KEY_ID');
  });

  it('removes limits with --clear (whole fields or one side of quota/budget)', async () => {
    expect(
      (
        await cli(
          [
            'keys',
            'update',
            id,
            '--clear',
            'rpm',
            '--clear',
            'daily-tokens',
            '--clear',
            'budget',
            '--clear',
            'expires-at',
          ],
          env,
        )
      ).code,
    ).to.equal(0);
    const record = await stored();
    expect(record).to.deep.include({ quota: { monthly: 90_000 } });
    for (const field of ['rpm', 'budget', 'expiresAt']) expect(record, field).not.to.have.property(field);
    expect((await cli(['keys', 'update', id, '--clear', 'monthly-tokens'], env)).code).to.equal(0);
    expect(await stored()).not.to.have.property('quota');
  });

  it('checks a team and guardrails as keys create does', async () => {
    const config = join(dataDir, 'gateway.yaml');
    await writeFile(config, 'guardrails:\n  - { name: no-emails, use: pii, on: request, action: redact }\n');
    const withConfig = { ...env, GATEWAY_CONFIG: config };
    expect(await cli(['keys', 'update', id, '--team', 'nobody', '--guardrails', 'nope'], withConfig)).to.deep.include({
      code: 1,
      err: "Invalid input parameters\n  Field '--guardrails': no guardrail is named 'nope' in the configuration (configured: no-emails)\n  Field '--team': no team is named 'nobody' (create it first)\n",
    });
    await cli(['teams', 'create', 'research'], withConfig);
    expect((await cli(['keys', 'update', id, '--team', 'research', '--guardrails', ''], withConfig)).code).to.equal(0);
    expect(await stored()).to.deep.include({ team: 'research', guardrails: [] });
    expect((await cli(['keys', 'update', id, '--clear', 'team', '--clear', 'guardrails'], withConfig)).code).to.equal(
      0,
    );
    expect(await stored()).not.to.have.property('team');
    expect(await stored()).not.to.have.property('guardrails');
  });

  it('answers bad input, an unknown or revoked key, and contradicting flags', async () => {
    expect(await cli(['keys', 'update', id, '--rpm', '0', '--daily-usd', 'x'], env)).to.deep.include({
      code: 1,
      err: "Invalid input parameters\n  Field '--rpm': must be a positive integer\n  Field '--daily-usd': must be a positive number of USD\n",
    });
    expect((await cli(['keys', 'update', id], env)).err).to.contain("Field 'flags': must change at least one of");
    expect(await cli(['keys', 'update', 'key_nobody', '--rpm', '1'], env)).to.deep.include({
      code: 1,
      err: "No API key with id 'key_nobody' (see keys list)\n",
    });
    expect((await cli(['keys', 'update', id, '--clear', 'rpm', '--rpm', '3'], env)).code).to.equal(2);
    expect((await cli(['keys', 'update', id, '--clear', 'quota', '--daily-tokens', '3'], env)).code).to.equal(2);
    expect((await cli(['keys', 'update', id, '--clear', 'name'], env)).code).to.equal(2);
    expect((await cli(['keys', 'update', '--rpm', '3'], env)).code).to.equal(2);
    expect((await stored()).rpm).to.equal(20);
    await keys.revoke(id);
    expect(await cli(['keys', 'update', id, '--rpm', '1'], env)).to.deep.include({
      code: 1,
      err: `API key '${id}' is revoked; a revoked key cannot be changed (create a new one)\n`,
    });
  });
});
