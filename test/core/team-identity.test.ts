import { expect } from 'chai';
import { generateTeamId, keyInTeam, withTeamId } from '../../src/core/team-identity.ts';

describe('team identity', () => {
  const team = { id: 'team_0123456789abcdef', name: 'red', createdAt: '2026-06-01T00:00:00.000Z' };

  it('makes a new random id for every team', () => {
    const ids = new Set(Array.from({ length: 100 }, generateTeamId));
    expect(ids.size).to.equal(100);
    for (const id of ids) expect(id).to.match(/^team_[0-9a-f]{16}$/);
  });

  it('gives a team stored before teams had ids its name as its id, and leaves any other as it is', () => {
    const { createdAt } = team;
    expect(withTeamId({ name: 'red', createdAt })).to.deep.equal({ id: 'red', name: 'red', createdAt });
    expect(withTeamId(team)).to.equal(team);
  });

  it('puts a key in the team whose id it carries, never in a later team of the same name', () => {
    expect(keyInTeam({ team: 'red', teamId: team.id }, team)).to.equal(true);
    expect(keyInTeam({ team: 'red', teamId: 'team_ffffffffffffffff' }, team)).to.equal(false);
    expect(keyInTeam({ team: 'blue', teamId: team.id }, team)).to.equal(false);
  });

  it('puts a key given its team before ids in a team of before, or one older than the key, never a later one', () => {
    const veteran = { id: 'red', name: 'red', createdAt: '2026-06-01T00:00:00.000Z' };
    expect(keyInTeam({ team: 'red', createdAt: '2026-01-01T00:00:00.000Z' }, veteran)).to.equal(true);
    expect(keyInTeam({ team: 'red', createdAt: '2026-07-01T00:00:00.000Z' }, team)).to.equal(true);
    expect(keyInTeam({ team: 'red', createdAt: '2026-05-01T00:00:00.000Z' }, team)).to.equal(false);
    expect(keyInTeam({ team: 'red' }, team)).to.equal(false);
  });
});
