import { expect } from 'chai';
import type { Meter } from '../../src/core/limits.ts';
import { metersOf, windowOf } from '../../src/usage/limit-meters.ts';
import {
  demandsFor,
  estimateRequest,
  highestPricing,
  PROMPT_FRAMING_TOKENS,
  Reservation,
} from '../../src/usage/reservation.ts';
import { IMAGE_PART_TOKENS, promptCharacters } from '../../src/usage/token-estimate.ts';
import type { CounterChange } from '../../src/usage/limit-ledger.ts';

const pricing = { input: 2, cachedInput: 0.2, output: 10 };
const NOW = Date.UTC(2026, 10, 25, 23, 59, 30);

describe('reservations', () => {
  it('names UTC windows and when they end', () => {
    expect(windowOf('minute', NOW)).to.deep.equal({
      tag: `m:${Math.floor(NOW / 60_000)}`,
      resetAt: Date.UTC(2026, 10, 25, 23, 60),
    });
    expect(windowOf('day', NOW)).to.deep.equal({ tag: 'd:2026-11-25', resetAt: Date.UTC(2026, 10, 26) });
    expect(windowOf('month', NOW)).to.deep.equal({ tag: 'mo:2026-11', resetAt: Date.UTC(2026, 11, 1) });
    expect(windowOf('month', Date.UTC(2026, 11, 31, 12))).to.deep.equal({
      tag: 'mo:2026-12',
      resetAt: Date.UTC(2027, 0, 1),
    });
  });

  it('gives a caller the meters of its key and its team, money in nano-USD', () => {
    const meters = metersOf(
      { id: 'key_a', tpm: 1000, budget: { daily_usd: 1.5 }, team: { id: 'eng', name: 'eng', quota: { monthly: 50 } } },
      NOW,
    );
    expect(meters.map((meter) => [meter.counter, meter.limit])).to.deep.equal([
      [`key:key_a:tpm:m:${Math.floor(NOW / 60_000)}`, 1000],
      ['key:key_a:budget:d:2026-11-25', 1_500_000_000],
      ['team:eng:quota:mo:2026-11', 50],
    ]);
    expect(metersOf({ id: 'key_b', rpm: 5 }, NOW)).to.deep.equal([]);
    expect(metersOf(undefined, NOW)).to.deep.equal([]);
  });

  it('estimates the input from the prompt text, each image part at a fixed figure whatever its URL, other inline payloads at their length', () => {
    const image = { type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } };
    const body = {
      model: 'm',
      max_tokens: 99,
      system: 'Be brief.',
      messages: [{ role: 'user', content: [{ type: 'text', text: 'Hello there' }, image] }],
    };
    expect(promptCharacters(body)).to.equal('Be brief.'.length + 'Hello there'.length + IMAGE_PART_TOKENS * 4);
    // A long image URL costs no more than a short one: images are billed by size, not by their URL.
    const linked = {
      ...body,
      messages: [
        {
          role: 'user',
          content: [{ type: 'image_url', image_url: { url: `https://images.example/${'x'.repeat(5000)}.png` } }],
        },
      ],
    };
    expect(promptCharacters(linked)).to.equal('Be brief.'.length + IMAGE_PART_TOKENS * 4);
    // Messages and Responses spell their image parts their own way.
    expect(
      promptCharacters({
        messages: [
          {
            role: 'user',
            content: [
              { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'A'.repeat(900_000) } },
            ],
          },
        ],
      }),
    ).to.equal(IMAGE_PART_TOKENS * 4);
    expect(
      promptCharacters({
        input: [{ role: 'user', content: [{ type: 'input_image', image_url: 'data:image/png;base64,AAAA' }] }],
      }),
    ).to.equal(IMAGE_PART_TOKENS * 4);
    // A document's inline bytes count at their full length.
    expect(
      promptCharacters({
        messages: [
          {
            role: 'user',
            content: [
              { type: 'document', source: { type: 'base64', media_type: 'application/pdf', data: 'B'.repeat(4000) } },
            ],
          },
        ],
      }),
    ).to.equal(4000);
    expect(estimateRequest(20, 99)).to.deep.equal({ inputTokens: 5 + PROMPT_FRAMING_TOKENS, outputTokens: 99 });
    expect(estimateRequest(20, 99, 10), 'n answers, each up to the cap').to.deep.equal({
      inputTokens: 5 + PROMPT_FRAMING_TOKENS,
      outputTokens: 990,
    });
  });

  it('asks tokens of token meters and their price of money meters, all of which must be left', () => {
    const meters = metersOf({ id: 'k', tpm: 1000, quota: { daily: 500 }, budget: { daily_usd: 1 } }, NOW);
    const demands = demandsFor(meters, { inputTokens: 10, outputTokens: 90 }, pricing);
    expect(demands.map(({ want, need }) => [want, need])).to.deep.equal([
      [100, 100],
      [100, 100],
      // 10 × 2 USD/M = 20,000 nano-USD; 90 × 10 USD/M = 900,000.
      [920_000, 920_000],
    ]);
    expect(highestPricing([pricing, { input: 1, cachedInput: 0.5, output: 30 }])).to.deep.equal({
      input: 2,
      cachedInput: 0.5,
      output: 30,
    });
    const free = demandsFor(
      meters.slice(2),
      { inputTokens: 10, outputTokens: 90 },
      { input: 0, cachedInput: 0, output: 0 },
    );
    expect(free[0]).to.include({ want: 0, need: 0 });
  });

  it('settles once to the recorded figures: tokens, charged tokens, nano-USD', () => {
    const changes: CounterChange[][] = [];
    const meters: readonly Meter[] = metersOf(
      { id: 'k', tpm: 1000, quota: { daily: 5000 }, budget: { daily_usd: 1 } },
      NOW,
    );
    const reservation = new Reservation(
      { adjust: (batch) => void changes.push([...batch]) },
      meters,
      [100, 100, 920_000],
    );
    reservation.handOver();
    reservation.release();
    expect(changes, 'a reservation handed over is not released').to.deep.equal([]);
    // 30 input (10 cached) and 200 output: tpm 230; charged 20 + 200 + ⌈10 × 0.1⌉ = 221; cost 20 × 2 + 10 × 0.2 + 200 ×
    // 10 = 2042 USD/M.
    reservation.settle({ totalTokens: 230, chargedTokens: 221, costUsd: 0.002042 });
    reservation.settle({ totalTokens: 2, chargedTokens: 2, costUsd: 1 });
    expect(changes).to.deep.equal([
      [
        { counter: meters[0]!.counter, delta: 130, resetAt: meters[0]!.resetAt },
        { counter: meters[1]!.counter, delta: 121, resetAt: meters[1]!.resetAt },
        { counter: meters[2]!.counter, delta: 1_122_000, resetAt: meters[2]!.resetAt },
      ],
    ]);
  });

  it('gives everything back on release, and nothing twice', () => {
    const changes: CounterChange[][] = [];
    const meters = metersOf({ id: 'k', tpm: 1000 }, NOW);
    const reservation = new Reservation({ adjust: (batch) => void changes.push([...batch]) }, meters, [100]);
    reservation.release();
    reservation.release();
    reservation.settle({ totalTokens: 10, chargedTokens: 10, costUsd: 0 });
    expect(changes).to.deep.equal([[{ counter: meters[0]!.counter, delta: -100, resetAt: meters[0]!.resetAt }]]);
  });
});
