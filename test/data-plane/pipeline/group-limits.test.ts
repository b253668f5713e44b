import { expect } from 'chai';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createAuthenticator } from '../../../src/data-plane/pipeline/authenticate.ts';
import { FileGroupStore } from '../../../src/stores/groups/file-group-store.ts';
import type { GroupStore } from '../../../src/stores/groups/group-store.ts';
import { FileKeyStore } from '../../../src/stores/keys/file-key-store.ts';
import { FileTeamStore } from '../../../src/stores/teams/file-team-store.ts';
import { metersOf } from '../../../src/usage/limit-meters.ts';
import { captureLogs } from './guarded-app.ts';

const bearer = (key: string) => ({ authorization: `Bearer ${key}` });
const PATH = '/v1/chat/completions';

describe('authentication with budget groups', () => {
  let dataDir: string;
  let keys: FileKeyStore;
  let teams: FileTeamStore;
  let groups: FileGroupStore;

  beforeEach(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'gateway-auth-groups-'));
    keys = new FileKeyStore(dataDir);
    teams = new FileTeamStore(dataDir);
    groups = new FileGroupStore(dataDir);
  });
  afterEach(async () => rm(dataDir, { recursive: true, force: true }));

  it("joins the key's own group over its team's, else its team's, else none", async () => {
    const dept = await groups.create({ name: 'dept', budget: { daily_usd: 100 }, tpm: 5000, alerts: [50] });
    const lab = await groups.create({ name: 'lab', quota: { monthly: 1000 } });
    const team = await teams.create({ name: 'sales', group: 'dept' });
    const viaTeam = await keys.create({ name: 'via team', team: 'sales' });
    const own = await keys.create({ name: 'own group', team: 'sales', group: 'lab' });
    const alone = await keys.create({ name: 'alone', group: 'lab' });
    const none = await keys.create({ name: 'none' });
    const auth = createAuthenticator({ store: keys, teams, groups });
    const deptView = { id: dept.id, name: 'dept', budget: { daily_usd: 100 }, tpm: 5000, alerts: [50] };
    expect(await auth.check(bearer(viaTeam.key), PATH)).to.deep.equal({
      id: viaTeam.record.id,
      name: 'via team',
      team: { id: team.id, name: 'sales', group: 'dept' },
      group: deptView,
    });
    expect((await auth.check(bearer(own.key), PATH)).group).to.deep.equal({
      id: lab.id,
      name: 'lab',
      quota: { monthly: 1000 },
    });
    expect((await auth.check(bearer(alone.key), PATH)).group).to.deep.equal({
      id: lab.id,
      name: 'lab',
      quota: { monthly: 1000 },
    });
    expect(await auth.check(bearer(none.key), PATH)).to.deep.equal({ id: none.record.id, name: 'none' });
  });

  it("measures a request on the group's meters too, owned by its name and counted under its id", async () => {
    const dept = await groups.create({ name: 'dept', budget: { daily_usd: 1, monthly_usd: 10 }, quota: { daily: 50 } });
    const { key } = await keys.create({ name: 'member', group: 'dept', tpm: 100 });
    const caller = await createAuthenticator({ store: keys, groups }).check(bearer(key), PATH);
    const now = Date.UTC(2030, 0, 15, 12);
    const meters = metersOf(caller, now);
    expect(meters.map((meter) => `${meter.scope}:${meter.owner}:${meter.kind}:${meter.period}`)).to.deep.equal([
      `key:${caller.id}:tpm:minute`,
      'group:dept:quota:day',
      'group:dept:budget:day',
      'group:dept:budget:month',
    ]);
    expect(meters.slice(1).map((meter) => meter.counter)).to.deep.equal([
      `group:${dept.id}:quota:d:2030-01-15`,
      `group:${dept.id}:budget:d:2030-01-15`,
      `group:${dept.id}:budget:mo:2030-01`,
    ]);
    expect(meters[2]).to.deep.include({ limit: 1e9, resetAt: Date.UTC(2030, 0, 16) });
  });

  it('hands out one caller object while nothing changes, a new one once the group changes', async () => {
    await groups.create({ name: 'dept', budget: { daily_usd: 1 } });
    const { key } = await keys.create({ name: 'member', group: 'dept' });
    const auth = createAuthenticator({ store: keys, groups });
    const once = await auth.check(bearer(key), PATH);
    expect(await auth.check(bearer(key), PATH)).to.equal(once);
    // The store's revision moves with the change (the file is read again), so the cache reads again at once.
    await groups.update('dept', { budget: { daily_usd: 2 } });
    const changed = await auth.check(bearer(key), PATH);
    expect(changed).to.not.equal(once);
    expect(changed.group?.budget).to.deep.equal({ daily_usd: 2 });
  });

  it('serves a key whose group no longer exists without group limits, warning once per group', async () => {
    await groups.create({ name: 'gone' });
    const { key } = await keys.create({ name: 'orphan', group: 'gone' });
    await groups.remove('gone');
    const logs = captureLogs();
    const auth = createAuthenticator({ store: keys, groups, logger: logs.logger });
    expect((await auth.check(bearer(key), PATH)).group).to.equal(undefined);
    expect((await auth.check(bearer(key), PATH)).group).to.equal(undefined);
    const warnings = logs
      .text()
      .split('\n')
      .filter((line) => line.includes("the group 'gone', which does not exist"));
    expect(warnings).to.have.length(1);
  });

  it('answers 503 when the group store cannot be read for a group never seen, naming no secret', async () => {
    const broken: GroupStore = {
      create: () => Promise.reject(new Error('down')),
      list: () => Promise.reject(new Error('down')),
      get: () => Promise.reject(new Error('redis://:hunter2@redis:6379 refused')),
      update: () => Promise.reject(new Error('down')),
      remove: () => Promise.reject(new Error('down')),
      close: async () => {},
    };
    const { key } = await keys.create({ name: 'member', group: 'dept' });
    const auth = createAuthenticator({ store: keys, groups: broken, logger: captureLogs().logger });
    const error = await Promise.resolve(auth.check(bearer(key), PATH)).then(
      () => undefined,
      (failure: unknown) => failure,
    );
    expect(error).to.deep.include({ status: 503, detail: 'The group store is unavailable; please retry shortly' });
  });
});
