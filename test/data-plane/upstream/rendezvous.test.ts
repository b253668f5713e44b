import { expect } from 'chai';
import { endpointSeed, rendezvousScore, unitHash } from '../../../src/data-plane/upstream/rendezvous.ts';
import { namedSession, type RoutingSession } from '../../../src/data-plane/upstream/session-affinity.ts';

const SESSIONS = 20_000;
const sessions: RoutingSession[] = Array.from({ length: SESSIONS }, (_, index) => namedSession(`session-${index}`));

/** The names ranked by score for a session, highest first. */
function ranking(session: RoutingSession, endpoints: readonly { name: string; weight: number }[]): string[] {
  return endpoints
    .map(({ name, weight }) => ({ name, score: rendezvousScore(session, endpointSeed(name), weight) }))
    .sort((a, b) => b.score - a.score)
    .map((entry) => entry.name);
}

function shares(winners: readonly string[]): Record<string, number> {
  const counted: Record<string, number> = {};
  for (const name of winners) counted[name] = (counted[name] ?? 0) + 1 / winners.length;
  return counted;
}

describe('weighted rendezvous hashing', () => {
  it('keeps hash01 strictly between 0 and 1, and about uniform', () => {
    const seed = endpointSeed('eu');
    const values = sessions.map((session) => unitHash(session, seed));
    expect(values.every((value) => value > 0 && value < 1)).to.equal(true);
    const mean = values.reduce((sum, value) => sum + value, 0) / values.length;
    expect(mean).to.be.closeTo(0.5, 0.01);
    const lowTenth = values.filter((value) => value < 0.1).length / values.length;
    expect(lowTenth).to.be.closeTo(0.1, 0.01);
    expect(unitHash({ hi: 0, lo: 0 }, { hi: 0, lo: 0 }))
      .to.be.greaterThan(0)
      .and.lessThan(1);
    expect(unitHash({ hi: 0xffffffff, lo: 0xffffffff }, { hi: 0, lo: 0 }))
      .to.be.greaterThan(0)
      .and.lessThan(1);
  });

  it('gives each endpoint sessions in proportion to its weight', () => {
    const endpoints = [
      { name: 'eu', weight: 3 },
      { name: 'us', weight: 1 },
    ];
    const won = shares(sessions.map((session) => ranking(session, endpoints)[0]!));
    expect(won.eu).to.be.closeTo(0.75, 0.015);
    expect(won.us).to.be.closeTo(0.25, 0.015);
    const three = shares(
      sessions.map(
        (session) =>
          ranking(session, [
            { name: '0', weight: 1 },
            { name: '1', weight: 1 },
            { name: '2', weight: 1 },
          ])[0]!,
      ),
    );
    for (const name of ['0', '1', '2']) expect(three[name]).to.be.closeTo(1 / 3, 0.015);
  });

  it("spreads one endpoint's sessions evenly over the others when it is gone, and moves no other session", () => {
    const all = ['a', 'b', 'c', 'd'].map((name) => ({ name, weight: 1 }));
    const withoutA = all.slice(1);
    const movedTo: string[] = [];
    for (const session of sessions) {
      const before = ranking(session, all);
      const after = ranking(session, withoutA)[0]!;
      if (before[0] === 'a') movedTo.push(after);
      else expect(after).to.equal(before[0]);
      // The next pick once the first is gone is the second of the full ranking: the failover order is the ranking.
      if (before[0] === 'a') expect(after).to.equal(before[1]);
    }
    const moved = shares(movedTo);
    for (const name of ['b', 'c', 'd']) expect(moved[name]).to.be.closeTo(1 / 3, 0.04);
  });

  it('orders the endpoints of a session independently: each of the six orders of three endpoints about as often', () => {
    const endpoints = ['x', 'y', 'z'].map((name) => ({ name, weight: 1 }));
    const orders = shares(sessions.map((session) => ranking(session, endpoints).join('')));
    expect(Object.keys(orders)).to.have.length(6);
    for (const share of Object.values(orders)) expect(share).to.be.closeTo(1 / 6, 0.015);
  });

  it('derives the seed from the name alone, so instances with the same names agree', () => {
    expect(endpointSeed('eu')).to.deep.equal(endpointSeed('eu'));
    expect(endpointSeed('eu')).not.to.deep.equal(endpointSeed('us'));
  });
});
