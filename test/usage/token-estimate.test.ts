import { expect } from 'chai';
import {
  countTokensBounded,
  countedSlices,
  DEFAULT_COUNT_BUDGET,
  estimateOutputTokens,
  type CountBudget,
} from '../../src/usage/token-estimate.ts';

describe('bounded token counts', () => {
  /** A clock that only the fake tokenizer moves: each call "takes" `costMs`. */
  const fakeTokenizer = (costMs: number) => {
    let clock = 0;
    const slices: string[] = [];
    const count = (text: string) => {
      slices.push(text);
      clock += costMs;
      return text.length;
    };
    return { count, slices, now: () => clock };
  };

  it('never hands the tokenizer more than one slice, and counts a text whole when the budget allows', async () => {
    const tokenizer = fakeTokenizer(0.01);
    const text = 'word '.repeat(20_000);
    const budget: CountBudget = { ...DEFAULT_COUNT_BUDGET, now: tokenizer.now };
    expect(await countTokensBounded(tokenizer.count, text, text.length, budget)).to.equal(text.length);
    // Slices end before a whitespace within 32 characters of their nominal end.
    expect(Math.max(...tokenizer.slices.map((slice) => slice.length))).to.be.at.most(
      DEFAULT_COUNT_BUDGET.sliceChars + 32,
    );
    expect(tokenizer.slices.join('')).to.equal(text);
  });

  it('samples evenly spread slices of a long text and extrapolates', async () => {
    const tokenizer = fakeTokenizer(0.01);
    const text = 'a'.repeat(1000) + 'b'.repeat(99_000);
    const budget: CountBudget = { ...DEFAULT_COUNT_BUDGET, sliceChars: 1000, maxSlices: 10, now: tokenizer.now };
    expect(await countTokensBounded(tokenizer.count, text, text.length, budget)).to.equal(100_000);
    expect(tokenizer.slices).to.have.length(10);
    expect(tokenizer.slices[0]![0]).to.equal('a');
    expect(tokenizer.slices.slice(1).every((slice) => slice.startsWith('b'))).to.equal(true);
  });

  it('cuts a long text into the slices it counts, at most maxSlices of them, before any is counted', () => {
    const text = 'word '.repeat(1_000_000);
    const slices = countedSlices(text);
    expect(slices).to.have.length(DEFAULT_COUNT_BUDGET.maxSlices);
    expect(slices.every((slice) => slice.length <= DEFAULT_COUNT_BUDGET.sliceChars + 32)).to.equal(true);
    expect(countedSlices('short text')).to.deep.equal(['short text']);
    expect(countedSlices('')).to.deep.equal([]);
  });

  it('stops at its time budget and extrapolates, scaling a sample to the whole text', async () => {
    const tokenizer = fakeTokenizer(10);
    const text = 'x'.repeat(100_000);
    const budget: CountBudget = { ...DEFAULT_COUNT_BUDGET, sliceChars: 1000, totalMs: 40, now: tokenizer.now };
    expect(await countTokensBounded(tokenizer.count, text, 300_000, budget)).to.equal(300_000);
    expect(tokenizer.slices).to.have.length(4);
  });

  it('yields to the event loop between slices, so other work runs while it counts', async () => {
    const order: string[] = [];
    let clock = 0;
    const count = (text: string) => {
      order.push('slice');
      clock += 3;
      return text.length;
    };
    setImmediate(() => order.push('other request'));
    await countTokensBounded(count, 'y'.repeat(10_000), 10_000, {
      ...DEFAULT_COUNT_BUDGET,
      sliceChars: 1000,
      tickMs: 4,
      now: () => clock,
    });
    expect(order.indexOf('other request')).to.be.greaterThan(0);
    expect(order.indexOf('other request')).to.be.lessThan(order.length - 1);
  });

  it('estimates degenerate text (200,000 of one character) with the real tokenizer, close to its true count', async () => {
    // Whole, this text takes the tokenizer about 25 s on one core; bounded, a few tens of ms.
    const estimate = await estimateOutputTokens('a'.repeat(200_000));
    expect(estimate).to.be.within(22_500, 27_500);
    const sample = await estimateOutputTokens({
      text: 'The quick brown fox jumps over the lazy dog. '.repeat(100),
      chars: 4_500_000,
    });
    expect(sample).to.be.within(900_000, 1_100_000);
  });
});
