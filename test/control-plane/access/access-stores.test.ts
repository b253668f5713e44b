import { expect } from 'chai';
import { callAs, startAccessFixture, type AccessFixture } from './access-fixture.ts';

describe('access stores: a role scoped to a team name', function () {
  this.timeout(30_000);
  let fixture: AccessFixture;
  before(async () => {
    fixture = await startAccessFixture();
  });
  after(async () => fixture.close());

  it('gets none of the keys of an earlier team of that name once another team took it', async () => {
    const admin = fixture.roles['admin-token']!;
    const scoped = fixture.roles['team-admin:blue']!;
    const old = (await fixture.keys.list()).find((record) => record.team === 'blue')!;
    const ids = async (as: typeof admin) => {
      const listed = await callAs(fixture, '/admin', 'GET', '/keys', as);
      return (listed.json.data as { id: string }[]).map((key) => key.id);
    };
    expect(await ids(scoped)).to.deep.equal([old.id]);

    expect((await callAs(fixture, '/admin', 'POST', `/keys/${old.id}/revoke`, admin)).status).to.equal(200);
    expect((await callAs(fixture, '/admin', 'DELETE', '/teams/blue', admin)).status).to.equal(200);
    expect((await callAs(fixture, '/admin', 'POST', '/teams', admin, { name: 'blue' })).status).to.equal(201);
    const fresh = await callAs(fixture, '/admin', 'POST', '/keys', admin, { name: 'new blue key', team: 'blue' });
    expect(fresh.status).to.equal(201);

    expect(await ids(scoped), "the new team's keys only").to.deep.equal([fresh.json.id]);
    // The admin still sees every key.
    expect(await ids(admin)).to.include.members([old.id, fresh.json.id]);
  });
});
