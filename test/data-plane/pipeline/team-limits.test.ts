import { expect } from 'chai';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { authenticatedKey, createAuthenticator } from '../../../src/data-plane/pipeline/authenticate.ts';
import { FileKeyStore } from '../../../src/stores/keys/file-key-store.ts';
import { FileTeamStore } from '../../../src/stores/teams/file-team-store.ts';
import type { TeamStore } from '../../../src/stores/teams/team-store.ts';
import { ManualClock, withDateNow } from '../../helpers/manual-clock.ts';
import { captureLogs, sleep } from './guarded-app.ts';

const bearer = (key: string) => ({ authorization: `Bearer ${key}` });

/** A team store over another whose reads can be made to fail, counting them. */
function flaky(inner: TeamStore): TeamStore & { failing: boolean; reads: number } {
  return {
    failing: false,
    reads: 0,
    create: (input) => inner.create(input),
    list: () => inner.list(),
    async get(name) {
      this.reads += 1;
      if (this.failing) throw new Error('connection refused');
      return inner.get(name);
    },
    update: (name, changes) => inner.update(name, changes),
    remove: (name) => inner.remove(name),
    deletedId: (name) => inner.deletedId(name),
    close: () => inner.close(),
  };
}

describe('authentication with team limits', () => {
  let dataDir: string;
  let keys: FileKeyStore;
  let teams: FileTeamStore;

  beforeEach(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'gateway-auth-teams-'));
    keys = new FileKeyStore(dataDir);
    teams = new FileTeamStore(dataDir);
  });
  afterEach(async () => rm(dataDir, { recursive: true, force: true }));

  it("copies the key's own tpm and budget into the caller", async () => {
    const { record } = await keys.create({
      name: 'own',
      rpm: 3,
      tpm: 900,
      budget: { daily_usd: 1.5 },
      quota: { daily: 10 },
    });
    expect(authenticatedKey(record)).to.deep.equal({
      id: record.id,
      name: 'own',
      rpm: 3,
      tpm: 900,
      budget: { daily_usd: 1.5 },
      quota: { daily: 10 },
    });
  });

  it("copies the key's and the team's cache settings into the caller, as set, and none when unset", async () => {
    const quiet = await teams.create({ name: 'quiet', cache: false });
    const loud = await teams.create({ name: 'loud', cache: true });
    const off = await keys.create({ name: 'off', cache: false });
    const on = await keys.create({ name: 'on', cache: true, team: 'quiet' });
    const plain = await keys.create({ name: 'plain', team: 'loud' });
    expect(authenticatedKey(off.record)).to.deep.equal({ id: off.record.id, name: 'off', cache: false });
    const auth = createAuthenticator({ store: keys, teams });
    expect(await auth.check(bearer(on.key), '/v1/chat/completions')).to.deep.equal({
      id: on.record.id,
      name: 'on',
      cache: true,
      team: { id: quiet.id, name: 'quiet', cache: false },
    });
    expect(await auth.check(bearer(plain.key), '/v1/chat/completions')).to.deep.equal({
      id: plain.record.id,
      name: 'plain',
      team: { id: loud.id, name: 'loud', cache: true },
    });
    await teams.update('loud', { cache: null });
    expect(
      await createAuthenticator({ store: keys, teams }).check(bearer(plain.key), '/v1/chat/completions'),
    ).to.deep.equal({ id: plain.record.id, name: 'plain', team: { id: loud.id, name: 'loud' } });
  });

  it("gives a key naming a team the team's name and limits beside its own, synchronously once cached", async () => {
    const research = await teams.create({
      name: 'research',
      rpm: 60,
      tpm: 20_000,
      quota: { monthly: 5 },
      budget: { monthly_usd: 80 },
    });
    const { key, record } = await keys.create({ name: 'member', tpm: 900, team: 'research' });
    const auth = createAuthenticator({ store: keys, teams });
    const first = await auth.check(bearer(key), '/v1/chat/completions');
    expect(first).to.deep.equal({
      id: record.id,
      name: 'member',
      tpm: 900,
      team: {
        id: research.id,
        name: 'research',
        rpm: 60,
        tpm: 20_000,
        quota: { monthly: 5 },
        budget: { monthly_usd: 80 },
      },
    });
    const again = auth.check(bearer(key), '/v1/chat/completions');
    expect(again).not.to.be.instanceOf(Promise);
    expect(again).to.equal(first);
    const plain = await keys.create({ name: 'alone' });
    expect(await auth.check(bearer(plain.key), '/v1/chat/completions')).not.to.have.property('team');
  });

  it('sees a change of the team within its trust time, and at once when this process made it', async () => {
    const { id } = await teams.create({ name: 'ops', rpm: 10 });
    const { key } = await keys.create({ name: 'k', team: 'ops' });
    const elsewhere = new FileTeamStore(dataDir);
    // The authenticator's caches on a clock the test moves (they take Date.now as their clock when built):
    // the team read is trusted for its 300 ms whatever the machine's speed, and no longer.
    const clock = new ManualClock(Date.now());
    const auth = withDateNow(clock, () => createAuthenticator({ store: keys, teams, teamTrustMs: 300 }));
    expect((await auth.check(bearer(key), '/v1/chat/completions')).team).to.deep.equal({ id, name: 'ops', rpm: 10 });
    await elsewhere.update('ops', { rpm: 20, tpm: 5 });
    clock.advance(300);
    expect(
      (await auth.check(bearer(key), '/v1/chat/completions')).team,
      "the other process's change, once the trust time is over",
    ).to.deep.equal({ id, name: 'ops', rpm: 20, tpm: 5 });

    const patient = createAuthenticator({ store: keys, teams, teamTrustMs: 60_000 });
    expect((await patient.check(bearer(key), '/v1/chat/completions')).team?.tpm).to.equal(5);
    await teams.update('ops', { tpm: null });
    expect(await patient.check(bearer(key), '/v1/chat/completions')).to.have.deep.property('team', {
      id,
      name: 'ops',
      rpm: 20,
    });
  });

  it('serves a key whose team no longer exists with its own limits, warning once per team name', async () => {
    await teams.create({ name: 'gone', rpm: 1 });
    const one = await keys.create({ name: 'one', rpm: 4, team: 'gone' });
    const two = await keys.create({ name: 'two', team: 'gone' });
    await teams.remove('gone');
    const logs = captureLogs();
    const auth = createAuthenticator({ store: keys, teams, logger: logs.logger, teamTrustMs: 0 });
    for (let round = 0; round < 3; round += 1) {
      expect(await auth.check(bearer(one.key), '/v1/chat/completions')).to.deep.equal({
        id: one.record.id,
        name: 'one',
        rpm: 4,
      });
      expect(await auth.check(bearer(two.key), '/v1/chat/completions')).to.deep.equal({
        id: two.record.id,
        name: 'two',
      });
    }
    const warnings = logs
      .text()
      .split('\n')
      .filter((line) => line.includes("the team 'gone', which does not exist"));
    expect(warnings).to.have.length(1);
    expect(logs.text()).not.to.contain(one.key).and.not.to.contain(one.record.hash);
    const noStore = createAuthenticator({ store: keys });
    expect(await noStore.check(bearer(one.key), '/v1/chat/completions')).not.to.have.property('team');
  });

  it('answers 503 while the team store fails for a team never read, and keeps the last state of one read before', async () => {
    const { id } = await teams.create({ name: 'shaky', tpm: 77 });
    const { key } = await keys.create({ name: 'k', team: 'shaky' });
    const store = flaky(teams);
    store.failing = true;
    const logs = captureLogs();
    const auth = createAuthenticator({ store: keys, teams: store, teamTrustMs: 50, logger: logs.logger });
    const refused = await Promise.resolve(auth.check(bearer(key), '/v1/chat/completions')).then(
      () => undefined,
      (error: { status: number; detail: string }) => error,
    );
    expect(refused).to.deep.include({ status: 503, detail: 'The team store is unavailable; please retry shortly' });
    store.failing = false;
    expect((await auth.check(bearer(key), '/v1/chat/completions')).team).to.deep.equal({ id, name: 'shaky', tpm: 77 });
    store.failing = true;
    await sleep(80);
    expect((await auth.check(bearer(key), '/v1/chat/completions')).team).to.deep.equal({ id, name: 'shaky', tpm: 77 });
    expect(logs.text()).to.contain('team store unavailable: using the team limits last read');
  });
});
