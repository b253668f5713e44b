import { expect } from 'chai';
import { carryBreakerState } from '../../src/server/breaker-carry-over.ts';
import { EndpointPool, PooledEndpoint, endpointsOf } from '../../src/data-plane/upstream/endpoint-pool.ts';
import { upstreamEndpoint } from '../../src/data-plane/upstream/upstream-client.ts';

const SETTINGS = { failureThreshold: 2, cooldownMs: 60_000 };
const member = (provider: string, url: string, key: string, name: string, weight = 1) =>
  new PooledEndpoint(upstreamEndpoint(provider, url, key), name, weight);
const table = (pools: Record<string, PooledEndpoint[]>) =>
  endpointsOf(new Map(Object.entries(pools).map(([vendor, members]) => [vendor, new EndpointPool(members, SETTINGS)])));

describe('breaker state carried over a reload', () => {
  it('carries rests and failure counts of endpoints whose provider, base URL and key are unchanged, and of no other', () => {
    const previous = table({
      acme: [
        member('acme', 'http://a.example/v1', 'key-a', 'a'),
        member('acme', 'http://b.example/v1', 'key-b', 'b'),
        member('acme', 'http://c.example/v1', 'key-c', 'c'),
      ],
      other: [member('other', 'http://a.example/v1', 'key-a', 'same-url-other-provider')],
    });
    const [a, b, c] = previous.pool('acme')!.endpoints;
    previous.pool('acme')!.failed(a!);
    previous.pool('acme')!.failed(a!);
    previous.pool('acme')!.failed(b!, 30_000);
    previous.pool('acme')!.failed(c!);
    previous.pool('acme')!.failed(c!);
    const next = table({
      // a renamed and reweighted (same identity); b under a new key; c under a new path; d new.
      acme: [
        member('acme', 'http://b.example/v1', 'key-b2', 'b'),
        member('acme', 'http://c.example/v2', 'key-c', 'c'),
        member('acme', 'http://a.example/v1', 'key-a', 'renamed', 3),
        member('acme', 'http://d.example/v1', 'key-d', 'd'),
      ],
      other: [member('other', 'http://a.example/v1', 'key-a', 'same-url-other-provider')],
    });
    expect(carryBreakerState(previous, next)).to.equal(next);
    const states = Object.fromEntries(
      next
        .pool('acme')!
        .state()
        .map((state) => [state.name, state]),
    );
    expect(states.renamed).to.include({ status: 'resting', consecutiveFailures: 2 });
    expect(states.renamed!.restingUntil).to.equal(previous.pool('acme')!.state()[0]!.restingUntil);
    for (const name of ['b', 'c', 'd'])
      expect(states[name], name).to.include({ status: 'up', consecutiveFailures: 0, restingUntil: 0 });
    expect(next.pool('other')!.state()[0]).to.include({ status: 'up', consecutiveFailures: 0 });
    // The carried rest is a tripped breaker: once over, one trial decides, as before the reload.
    expect(next.pool('acme')!.endpoints[2]!.tripped).to.equal(true);
  });

  it("carries an endpoint's state when its credential place is unchanged, and starts fresh when it moved", () => {
    const at = (auth?: { query: string } | { header: string }) =>
      new PooledEndpoint(upstreamEndpoint('acme', 'http://a.example/v1', 'key-a', auth), 'a', 1);
    for (const [before, after, carried] of [
      [{ query: 'key' }, { query: 'key' }, true],
      [{ query: 'key' }, { query: 'api_key' }, false],
      [{ query: 'key' }, { header: 'x-acme-key' }, false],
      [undefined, { query: 'key' }, false],
    ] as const) {
      const previous = table({ acme: [at(before)] });
      previous.pool('acme')!.failed(previous.pool('acme')!.endpoints[0]!, 10_000);
      const next = carryBreakerState(previous, table({ acme: [at(after)] }));
      expect(next.pool('acme')!.state()[0]!.status, JSON.stringify([before, after])).to.equal(
        carried ? 'resting' : 'up',
      );
    }
  });

  it('matches several endpoints of one identity in order, and leaves a table at start as built', () => {
    const previous = table({
      acme: [member('acme', 'http://a.example/v1', 'k', 'first'), member('acme', 'http://a.example/v1', 'k', 'second')],
    });
    previous.pool('acme')!.failed(previous.pool('acme')!.endpoints[1]!, 10_000);
    const next = table({
      acme: [member('acme', 'http://a.example/v1', 'k', 'first'), member('acme', 'http://a.example/v1', 'k', 'second')],
    });
    carryBreakerState(previous, next);
    expect(
      next
        .pool('acme')!
        .state()
        .map((state) => state.status),
    ).to.deep.equal(['up', 'resting']);
    const fresh = table({ acme: [member('acme', 'http://a.example/v1', 'k', 'only')] });
    expect(carryBreakerState(undefined, fresh).pool('acme')!.state()[0]).to.include({ status: 'up' });
  });
});
