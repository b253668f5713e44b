import { expect } from 'chai';
import { MemoryLedger } from '../../../src/stores/limits/embedded-ledger.ts';
import type { CounterDemand } from '../../../src/usage/limit-ledger.ts';

describe('MemoryLedger', () => {
  let now: number;
  let ledger: MemoryLedger;
  const demand = (
    counter: string,
    limit: number,
    want: number,
    need: number,
    resetAt = now + 60_000,
  ): CounterDemand => ({ counter, limit, want, need, resetAt });

  beforeEach(() => {
    now = 1_000_000;
    ledger = new MemoryLedger(() => now);
  });

  it('reserves on every counter, or on none when one has less left than it needs', async () => {
    expect(ledger.reserve([demand('a', 100, 30, 10), demand('b', 50, 30, 10)])).to.deep.equal({
      used: [30, 30],
      reserved: [30, 30],
    });
    // b has 20 left, less than the 25 needed: a is not touched either.
    expect(ledger.reserve([demand('a', 100, 30, 10), demand('b', 50, 30, 25)])).to.deep.equal({
      refused: 1,
      used: [30, 30],
      reserved: [0, 0],
    });
    expect(await ledger.peek(['a', 'b', 'unknown'])).to.deep.equal([30, 30, 0]);
  });

  it('caps each reservation at what remains of its limit', () => {
    ledger.reserve([demand('a', 100, 80, 0)]);
    expect(ledger.reserve([demand('a', 100, 50, 5)])).to.deep.equal({ used: [100], reserved: [20] });
    expect(ledger.reserve([demand('a', 100, 50, 1)]).refused).to.equal(0);
    // Nothing needed: reserved at zero, never below.
    expect(ledger.reserve([demand('a', 100, 50, 0)])).to.deep.equal({ used: [100], reserved: [0] });
  });

  it('adjusts open counters it has, and leaves closed windows and unknown counters alone', async () => {
    ledger.reserve([demand('open', 100, 40, 0), demand('closing', 100, 40, 0, now + 1000)]);
    now += 1000;
    ledger.adjust([
      { counter: 'open', delta: -15, resetAt: now + 59_000 - 1000 },
      { counter: 'closing', delta: 10, resetAt: now },
      { counter: 'never-reserved', delta: 10, resetAt: now + 60_000 },
    ]);
    expect(await ledger.peek(['open', 'closing', 'never-reserved'])).to.deep.equal([25, 0, 0]);
  });

  it('starts a counter afresh in its next window', () => {
    ledger.reserve([demand('a', 10, 10, 0)]);
    expect(ledger.reserve([demand('a', 10, 1, 1)]).refused).to.equal(0);
    now += 60_000;
    expect(ledger.reserve([demand('a', 10, 4, 1, now + 60_000)])).to.deep.equal({ used: [4], reserved: [4] });
  });
});
