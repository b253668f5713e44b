import { expect } from 'chai';
import type { GatewayError } from '../../../src/core/gateway-errors.ts';
import type { GroupStore } from '../../../src/stores/groups/group-store.ts';

async function failure(promise: Promise<unknown>): Promise<GatewayError> {
  return promise.then(
    () => expect.fail('expected a failure'),
    (error: GatewayError) => error,
  );
}

/** What every group store does, checked on two instances sharing the same storage (`open` gives a fresh pair). */
export function behavesAsGroupStore(open: () => Promise<[GroupStore, GroupStore]>): void {
  let first: GroupStore;
  let second: GroupStore;

  beforeEach(async () => {
    [first, second] = await open();
  });

  it('creates a group with an id of its own, refuses a second of that name (409), reads it elsewhere', async () => {
    const before = Date.now();
    const limits = { tpm: 9000, quota: { monthly: 5000 }, budget: { daily_usd: 100 }, alerts: [50, 90] };
    const created = await first.create({ name: 'dept.a_1', ...limits });
    const after = Date.now();
    expect(created).to.deep.equal({ id: created.id, name: 'dept.a_1', createdAt: created.createdAt, ...limits });
    expect(created.id).to.match(/^group_[0-9a-f]{16}$/);
    expect(Date.parse(created.createdAt)).to.be.within(before, after);
    const clash = await failure(second.create({ name: 'dept.a_1' }));
    expect(clash).to.deep.include({
      status: 409,
      code: 'GW_ERR_CONFLICT',
      detail: "A group named 'dept.a_1' exists already",
    });
    const bare = await first.create({ name: 'bare' });
    expect(bare).to.deep.equal({ id: bare.id, name: 'bare', createdAt: bare.createdAt });
    expect(bare.id).to.not.equal(created.id);
    expect((await second.list()).map((group) => group.name)).to.deep.equal(['dept.a_1', 'bare']);
    expect(await second.get('dept.a_1')).to.deep.equal(created);
    expect(await second.get('nobody')).to.equal(undefined);
  });

  it('refuses a name that is not a group name, whatever called it', async () => {
    const refused = await failure(first.create({ name: 'no spaces' }));
    expect(refused).to.deep.include({ status: 400, param: 'name' });
    expect(await second.list()).to.deep.equal([]);
  });

  it('updates each limit (set, removed with null, kept when absent) and says when no group has the name', async () => {
    const created = await first.create({ name: 'ops', tpm: 10, quota: { daily: 1, monthly: 2 }, alerts: [80] });
    const updated = await second.update('ops', { tpm: null, budget: { monthly_usd: 0.5 }, alerts: [] });
    const { id, createdAt } = created;
    const kept = { quota: { daily: 1, monthly: 2 }, budget: { monthly_usd: 0.5 }, alerts: [] };
    expect(updated).to.deep.equal({ id, name: 'ops', createdAt, ...kept });
    expect(await first.get('ops')).to.deep.equal(updated);
    expect(await first.update('nobody', { tpm: 1 })).to.equal(undefined);
  });

  it('removes a group; one created later under its name gets a new id (its counters start clean)', async () => {
    const gone = await first.create({ name: 'short-lived', budget: { daily_usd: 1 } });
    expect(await second.remove('short-lived')).to.equal(true);
    expect(await first.get('short-lived')).to.equal(undefined);
    expect(await first.remove('short-lived')).to.equal(false);
    const again = await second.create({ name: 'short-lived' });
    expect(again.id).to.not.equal(gone.id);
    expect((await first.list()).map((group) => group.name)).to.deep.equal(['short-lived']);
  });
}
