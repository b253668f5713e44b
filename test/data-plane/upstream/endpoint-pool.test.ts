import { expect } from 'chai';
import { EndpointPool, PooledEndpoint, retryAfterMs } from '../../../src/data-plane/upstream/endpoint-pool.ts';
import { namedSession } from '../../../src/data-plane/upstream/session-affinity.ts';
import { upstreamEndpoint } from '../../../src/data-plane/upstream/upstream-client.ts';

const member = (name: string, weight = 1) =>
  new PooledEndpoint(upstreamEndpoint('acme', `http://${name}.example/v1`, `key-${name}`), name, weight);

describe('EndpointPool', () => {
  let clock = 1_000_000;
  const now = () => clock;
  beforeEach(() => (clock = 1_000_000));

  it('spreads picks by weight over the endpoints not resting', () => {
    let draw = 0;
    const pool = new EndpointPool(
      [member('a', 1), member('b', 3)],
      { failureThreshold: 5, cooldownMs: 1000 },
      now,
      () => draw,
    );
    const pickAt = (value: number) => {
      draw = value;
      return pool.pick()!.name;
    };
    expect([0, 0.2, 0.3, 0.9].map(pickAt)).to.deep.equal(['a', 'a', 'b', 'b']);
    pool.failed(pool.endpoints[1]!, 10_000);
    expect([0, 0.5, 0.99].map(pickAt)).to.deep.equal(['a', 'a', 'a']);
    expect(pool.pick([pool.endpoints[0]!])).to.equal(undefined);
  });

  it("counts one caller's failures once per second, several callers' each, and an unnamed caller's each", () => {
    const pool = new EndpointPool([member('a')], { failureThreshold: 3, cooldownMs: 1000 }, now);
    const a = pool.endpoints[0]!;
    for (let index = 0; index < 10; index += 1) pool.failed(a, undefined, 'key_one');
    expect(pool.state()[0]).to.include({ status: 'up', consecutiveFailures: 1 });
    clock += 1000;
    pool.failed(a, undefined, 'key_one');
    expect(pool.state()[0]).to.include({ status: 'up', consecutiveFailures: 2 });
    pool.failed(a, undefined, 'key_two');
    expect(pool.state()[0]).to.include({ status: 'resting', consecutiveFailures: 3 });
    clock += 1000;
    pool.succeeded(pool.pick()!);
    pool.failed(a);
    pool.failed(a);
    pool.failed(a);
    expect(pool.state()[0]).to.include({ status: 'resting', consecutiveFailures: 3 });
  });

  it('defaults the attempts to the number of endpoints, at most 5', () => {
    expect(new EndpointPool([member('a'), member('b')], { failureThreshold: 5, cooldownMs: 1 }).maxAttempts).to.equal(
      2,
    );
    expect(
      new EndpointPool(
        ['a', 'b', 'c', 'd', 'e', 'f'].map((name) => member(name)),
        { failureThreshold: 5, cooldownMs: 1 },
      ).maxAttempts,
    ).to.equal(5);
    expect(
      new EndpointPool([member('a'), member('b')], { failureThreshold: 5, cooldownMs: 1, maxAttempts: 1 }).maxAttempts,
    ).to.equal(1);
  });

  it('opens after the threshold, lets one trial through after the cooldown, and closes on its success', () => {
    const pool = new EndpointPool([member('a')], { failureThreshold: 2, cooldownMs: 1000 }, now);
    const a = pool.endpoints[0]!;
    pool.failed(pool.pick()!);
    expect(pool.state()[0]).to.deep.equal({
      name: 'a',
      weight: 1,
      status: 'up',
      consecutiveFailures: 1,
      restingUntil: 0,
    });
    pool.failed(pool.pick()!);
    expect(pool.state()[0]).to.include({ status: 'resting', consecutiveFailures: 2, restingUntil: clock + 1000 });
    expect(pool.pick()).to.equal(undefined);
    expect(pool.retryAfterMs()).to.equal(1000);
    clock += 1000;
    expect(pool.pick()).to.equal(a);
    expect(pool.state()[0]!.status).to.equal('trial');
    expect(pool.pick(), 'only one trial at a time').to.equal(undefined);
    pool.failed(a);
    expect(pool.state()[0]).to.include({ status: 'resting', restingUntil: clock + 1000 });
    clock += 1000;
    pool.succeeded(pool.pick()!);
    expect(pool.state()[0]).to.deep.equal({
      name: 'a',
      weight: 1,
      status: 'up',
      consecutiveFailures: 0,
      restingUntil: 0,
    });
    expect(pool.pick()).to.equal(a);
  });

  it('rests an endpoint for a Retry-After without tripping its breaker', () => {
    const pool = new EndpointPool([member('a')], { failureThreshold: 5, cooldownMs: 1000 }, now);
    pool.failed(pool.pick()!, 5000);
    expect(pool.state()[0]).to.include({ status: 'resting', restingUntil: clock + 5000 });
    clock += 5000;
    const a = pool.pick()!;
    expect(pool.state()[0]!.status).to.equal('up');
    expect(pool.pick(), 'not a single trial: the rest is simply over').to.equal(a);
  });

  it('never shows a key or URL in its state', () => {
    const pool = new EndpointPool([member('a')], { failureThreshold: 5, cooldownMs: 1000 });
    expect(JSON.stringify(pool.state())).not.to.match(/key-a|example/);
  });

  describe('with affinity', () => {
    const sessions = Array.from({ length: 200 }, (_, index) => namedSession(`conversation-${index}`));
    const affine = (names = ['a', 'b', 'c']) =>
      new EndpointPool(
        names.map((name) => member(name)),
        { failureThreshold: 1, cooldownMs: 1000, affinity: true },
        now,
        () => {
          throw new Error('a session is never drawn at random');
        },
      );

    it('sends every request of a session to one endpoint, and the sessions over all of them', () => {
      const pool = affine();
      const homes = sessions.map((session) => pool.pick(undefined, session)!.name);
      for (const [index, session] of sessions.entries())
        for (let turn = 0; turn < 12; turn += 1) expect(pool.pick(undefined, session)!.name).to.equal(homes[index]);
      expect(new Set(homes)).to.deep.equal(new Set(['a', 'b', 'c']));
    });

    it('fails a session over in one fixed order: the same next endpoint for each of its requests, never one it tried', () => {
      const pool = affine();
      for (const session of sessions.slice(0, 50)) {
        const first = pool.pick(undefined, session)!;
        const second = pool.pick([first], session)!;
        const third = pool.pick([first, second], session)!;
        expect(new Set([first, second, third]).size).to.equal(3);
        expect(pool.pick([first], session)).to.equal(second);
        expect(pool.pick([first, second, third], session)).to.equal(undefined);
      }
    });

    it('moves a session off its resting endpoint to its next, and back once the rest is over (as the half-open trial)', () => {
      const pool = affine();
      const session = sessions[0]!;
      const home = pool.pick(undefined, session)!;
      const next = pool.pick([home], session)!;
      pool.failed(home);
      expect(pool.pick(undefined, session)).to.equal(next);
      expect(pool.pick(undefined, session)).to.equal(next);
      clock += 1000;
      expect(pool.pick(undefined, session)).to.equal(home);
      expect(pool.state().find((state) => state.name === home.name)!.status).to.equal('trial');
      expect(pool.pick(undefined, session), 'while the trial runs').to.equal(next);
      pool.succeeded(home);
      expect(pool.pick(undefined, session)).to.equal(home);
    });

    it('draws at random by weight without a session, or when affinity is off', () => {
      const pool = new EndpointPool(
        [member('a'), member('b')],
        { failureThreshold: 5, cooldownMs: 1000, affinity: true },
        now,
        () => 0.9,
      );
      expect(pool.pick()!.name).to.equal('b');
      expect(pool.affinity).to.equal(true);
      const off = new EndpointPool(
        [member('a'), member('b')],
        { failureThreshold: 5, cooldownMs: 1000 },
        now,
        () => 0.9,
      );
      expect(off.affinity).to.equal(false);
      expect(sessions.slice(0, 20).map((session) => off.pick(undefined, session)!.name)).to.deep.equal(
        Array(20).fill('b'),
      );
    });
  });

  it('reads Retry-After in seconds or as a date', () => {
    expect(retryAfterMs('3')).to.equal(3000);
    expect(retryAfterMs('1.5')).to.equal(1500);
    expect(retryAfterMs(new Date(clock + 10_000).toUTCString(), clock)).to.equal(10_000);
    expect(retryAfterMs('soon')).to.equal(undefined);
    expect(retryAfterMs(undefined)).to.equal(undefined);
  });
});
