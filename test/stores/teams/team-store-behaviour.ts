import { expect } from 'chai';
import type { GatewayError } from '../../../src/core/gateway-errors.ts';
import type { TeamStore } from '../../../src/stores/teams/team-store.ts';

async function failure(promise: Promise<unknown>): Promise<GatewayError> {
  return promise.then(
    () => expect.fail('expected a failure'),
    (error: GatewayError) => error,
  );
}

/** What every team store does, checked on two instances sharing the same storage (`open` gives a fresh pair). */
export function behavesAsTeamStore(open: () => Promise<[TeamStore, TeamStore]>): void {
  let first: TeamStore;
  let second: TeamStore;

  beforeEach(async () => {
    [first, second] = await open();
  });

  it('creates a team with its limits, refuses a second of that name (409), and lists and gets it from another instance', async () => {
    const before = Date.now();
    const created = await first.create({
      name: 'research.team_1',
      rpm: 60,
      tpm: 10_000,
      quota: { daily: 5000 },
      budget: { daily_usd: 2.5, monthly_usd: 40 },
    });
    const after = Date.now();
    expect(created).to.deep.equal({
      id: created.id,
      name: 'research.team_1',
      rpm: 60,
      tpm: 10_000,
      quota: { daily: 5000 },
      budget: { daily_usd: 2.5, monthly_usd: 40 },
      createdAt: created.createdAt,
    });
    // Stamped while the create ran (ISO time to the millisecond, the clock Date.now reads).
    expect(Date.parse(created.createdAt), created.createdAt).to.be.within(before, after);
    const clash = await failure(second.create({ name: 'research.team_1' }));
    expect(clash).to.deep.include({
      status: 409,
      code: 'GW_ERR_CONFLICT',
      detail: "A team named 'research.team_1' exists already",
    });
    await first.create({ name: 'bare' });
    expect((await second.list()).map((team) => team.name)).to.have.members(['research.team_1', 'bare']);
    expect(await second.get('research.team_1')).to.deep.equal(created);
    expect(await second.get('bare')).to.deep.equal({
      id: (await second.get('bare'))!.id,
      name: 'bare',
      createdAt: (await second.get('bare'))!.createdAt,
    });
    expect(await second.get('nobody')).to.equal(undefined);
  });

  it('updates each limit (set, removed with null, kept when absent) and says when no team has the name', async () => {
    await first.create({ name: 'ops', rpm: 10, tpm: 100, quota: { daily: 1, monthly: 2 } });
    const updated = await second.update('ops', { rpm: null, tpm: 200, budget: { monthly_usd: 0.000001 } });
    expect(updated).to.deep.include({
      name: 'ops',
      tpm: 200,
      quota: { daily: 1, monthly: 2 },
      budget: { monthly_usd: 0.000001 },
    });
    expect(updated).not.to.have.property('rpm');
    expect(await first.get('ops')).to.deep.equal(updated);
    expect(await first.update('ops', { quota: null, budget: null, tpm: null })).to.deep.equal({
      id: updated!.id,
      name: 'ops',
      createdAt: updated!.createdAt,
    });
    expect(await first.update('nobody', { rpm: 1 })).to.equal(undefined);
    expect(await first.get('nobody')).to.equal(undefined);
  });

  it('keeps the cache setting as set (false or true), changes it, and removes it with null', async () => {
    const created = await first.create({ name: 'quiet', rpm: 5, cache: false });
    expect(created).to.deep.equal({
      id: created.id,
      name: 'quiet',
      rpm: 5,
      cache: false,
      createdAt: created.createdAt,
    });
    expect(await second.get('quiet')).to.deep.equal(created);
    expect(await second.update('quiet', { cache: true })).to.deep.equal({ ...created, cache: true });
    expect(await first.get('quiet')).to.include({ cache: true });
    expect(await first.update('quiet', { rpm: 6 })).to.include({ cache: true, rpm: 6 });
    const removed = await second.update('quiet', { cache: null });
    expect(removed).to.deep.equal({ id: created.id, name: 'quiet', rpm: 6, createdAt: created.createdAt });
    expect((await first.list()).find((team) => team.name === 'quiet')).not.to.have.property('cache');
  });

  it('keeps the guardrails as set ([] included), changes them, and removes them with null', async () => {
    const created = await first.create({ name: 'guarded', guardrails: ['no-emails'] });
    expect(await second.get('guarded')).to.deep.equal(created);
    expect(await second.update('guarded', { guardrails: [] })).to.deep.include({ guardrails: [] });
    expect(await first.get('guarded')).to.deep.include({ guardrails: [] });
    expect(await first.update('guarded', { guardrails: ['a', 'b'] })).to.deep.include({ guardrails: ['a', 'b'] });
    expect(await second.update('guarded', { guardrails: null })).to.deep.equal({
      id: created.id,
      name: 'guarded',
      createdAt: created.createdAt,
    });
  });

  it('loses no change when two instances update one team at once', async () => {
    await first.create({ name: 'busy' });
    await Promise.all([
      first.update('busy', { rpm: 5 }),
      second.update('busy', { tpm: 7 }),
      first.update('busy', { quota: { daily: 9 } }),
      second.update('busy', { budget: { daily_usd: 1 } }),
    ]);
    expect(await first.get('busy')).to.deep.include({ rpm: 5, tpm: 7, quota: { daily: 9 }, budget: { daily_usd: 1 } });
  });

  it('removes a team (false when there is none), after which its name is free again', async () => {
    await first.create({ name: 'gone', rpm: 3 });
    expect(await second.remove('gone')).to.equal(true);
    expect(await second.remove('gone')).to.equal(false);
    expect(await first.get('gone')).to.equal(undefined);
    expect((await first.list()).map((team) => team.name)).not.to.include('gone');
    expect((await first.create({ name: 'gone' })).rpm).to.equal(undefined);
  });

  it("gives each team an id of its own, one made again under a deleted team's name too, and keeps the last deleted id", async () => {
    const before = await first.create({ name: 'again', rpm: 1 });
    expect(before.id).to.match(/^team_[0-9a-f]{16}$/);
    expect((await second.get('again'))?.id).to.equal(before.id);
    expect((await second.list()).find((team) => team.name === 'again')?.id).to.equal(before.id);
    expect((await second.update('again', { rpm: 2 }))?.id).to.equal(before.id);
    expect(await second.deletedId('again')).to.equal(undefined);
    expect(await second.remove('again')).to.equal(true);
    expect(await first.deletedId('again')).to.equal(before.id);
    const later = await first.create({ name: 'again' });
    expect(later.id)
      .to.match(/^team_[0-9a-f]{16}$/)
      .and.not.to.equal(before.id);
    expect((await second.get('again'))?.id).to.equal(later.id);
    expect(await second.deletedId('again'), 'the last deleted, while a later team has the name').to.equal(before.id);
    await second.remove('again');
    expect(await first.deletedId('again')).to.equal(later.id);
    expect(await first.deletedId('never')).to.equal(undefined);
  });

  it('refuses a name that is not 1 to 64 of [A-Za-z0-9._-], whoever calls the store', async () => {
    for (const name of ['', 'a b', 'x'.repeat(65), 'team/1', 'ü']) {
      expect(await failure(first.create({ name })), JSON.stringify(name)).to.deep.include({ status: 400 });
    }
    expect((await first.create({ name: 'x'.repeat(64) })).name).to.have.length(64);
  });

  it('grows its revision on its own writes', async () => {
    const before = first.revision ?? 0;
    await first.create({ name: 'rev' });
    await first.update('rev', { rpm: 1 });
    await first.remove('rev');
    expect(first.revision).to.be.at.least(before + 3);
  });
}
