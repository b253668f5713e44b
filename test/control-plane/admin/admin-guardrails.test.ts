import { expect } from 'chai';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { adminRouter } from '../../../src/control-plane/admin/admin-routes.ts';
import { authenticatedKey, withTeam } from '../../../src/data-plane/pipeline/authenticate.ts';
import { FileKeyStore } from '../../../src/stores/keys/file-key-store.ts';
import { FileTeamStore } from '../../../src/stores/teams/file-team-store.ts';
import { captureLogs, send, startGuardedApp, type GuardedApp } from '../../data-plane/pipeline/guarded-app.ts';
import { piiGuardrail } from '../../helpers/guardrail-fixtures.ts';

const TOKEN = 'admin-token-for-tests-0001-0123456789abcdef';
const admin = { authorization: `Bearer ${TOKEN}` };

describe('admin API: the guardrails of keys and teams', () => {
  let dataDir: string;
  let keys: FileKeyStore;
  let teams: FileTeamStore;
  let app: GuardedApp;
  let configured: string[];
  const logs = captureLogs();

  beforeEach(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'gateway-admin-guardrails-'));
    keys = new FileKeyStore(dataDir);
    teams = new FileTeamStore(dataDir);
    configured = ['no-emails', 'moderation'];
    app = await startGuardedApp({
      routers: {
        '/admin': adminRouter({ token: TOKEN, keys, teams, guardrailSettings: () => configured.map(piiGuardrail) }),
      },
      logger: logs.logger,
    });
  });
  afterEach(async () => {
    await app.close();
    await rm(dataDir, { recursive: true, force: true });
  });

  it('creates a key naming configured guardrails, or none ([]), and stores the list as given', async () => {
    const named = await send(app.url, '/admin/keys', {
      ...admin,
      body: { name: 'strict', guardrails: ['moderation'] },
    });
    expect(named.status).to.equal(201);
    expect(named.body)
      .to.include({ name: 'strict' })
      .and.to.deep.include({ guardrails: ['moderation'] });
    const none = await send(app.url, '/admin/keys', { ...admin, body: { name: 'trusted', guardrails: [] } });
    expect(none.body).to.deep.include({ guardrails: [] });
    const listed = await send(app.url, '/admin/keys', { method: 'GET', ...admin });
    expect(
      listed.body.data.map((view: { name: string; guardrails: unknown }) => [view.name, view.guardrails]),
    ).to.deep.equal([
      ['strict', ['moderation']],
      ['trusted', []],
    ]);
    const record = (await keys.list()).find((key) => key.name === 'strict')!;
    expect(authenticatedKey(record)).to.deep.include({ guardrails: ['moderation'] });
  });

  it("refuses a key's guardrail the configuration does not hold, or a list that is not one of names", async () => {
    const unknown = await send(app.url, '/admin/keys', {
      ...admin,
      body: { name: 'typo', guardrails: ['no-email', 'moderation', 'no-email'] },
    });
    expect(unknown).to.deep.include({ status: 400 });
    expect(unknown.body.errors).to.deep.equal([
      "Field 'guardrails': no guardrail is named 'no-email' in the configuration (configured: no-emails, moderation)",
    ]);
    const malformed = await send(app.url, '/admin/keys', { ...admin, body: { name: 'bad', guardrails: 'moderation' } });
    expect(malformed.body.errors).to.deep.equal([
      "Field 'guardrails': must be a list of guardrail names ([] for none)",
    ]);
    const badName = await send(app.url, '/admin/keys', {
      ...admin,
      body: { name: 'bad', guardrails: ['has space', 3] },
    });
    expect(badName.body.errors).to.have.members([
      "Field 'guardrails[0]': must be a name of 1 to 64 letters, digits, ., _ or -, starting with a letter or digit",
      "Field 'guardrails[1]': must be a name of 1 to 64 letters, digits, ., _ or -, starting with a letter or digit",
    ]);
    expect(await keys.list()).to.deep.equal([]);
  });

  it("sets a team's guardrails, changes them, and removes them with null; keys carry their team's", async () => {
    const created = await send(app.url, '/admin/teams', {
      ...admin,
      body: { name: 'support', guardrails: ['no-emails'] },
    });
    expect(created).to.deep.include({ status: 201 });
    expect(created.body).to.deep.include({ guardrails: ['no-emails'] });
    expect(
      withTeam(
        authenticatedKey((await keys.create({ name: 'member', team: 'support' })).record),
        (await teams.get('support'))!,
      ).team,
    ).to.deep.include({ guardrails: ['no-emails'] });
    const patched = await send(app.url, '/admin/teams/support', {
      method: 'PATCH',
      ...admin,
      body: { guardrails: ['no-emails', 'moderation'] },
    });
    expect(patched.body).to.deep.include({ guardrails: ['no-emails', 'moderation'] });
    const refused = await send(app.url, '/admin/teams/support', {
      method: 'PATCH',
      ...admin,
      body: { guardrails: ['gone'] },
    });
    expect(refused).to.deep.include({ status: 400 });
    expect(refused.body.errors).to.deep.equal([
      "Field 'guardrails': no guardrail is named 'gone' in the configuration (configured: no-emails, moderation)",
    ]);
    const removed = await send(app.url, '/admin/teams/support', {
      method: 'PATCH',
      ...admin,
      body: { guardrails: null },
    });
    expect(removed.body).to.deep.include({ guardrails: null });
    expect(await teams.get('support')).not.to.have.property('guardrails');
    configured = [];
    const unconfigured = await send(app.url, '/admin/teams', {
      ...admin,
      body: { name: 'other', guardrails: ['no-emails'] },
    });
    expect(unconfigured.body.errors).to.deep.equal([
      "Field 'guardrails': no guardrail is named 'no-emails' in the configuration (configured: none)",
    ]);
  });
});
