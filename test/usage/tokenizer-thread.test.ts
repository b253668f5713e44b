import { expect } from 'chai';
import { countTokensBounded, loadTokenizer } from '../../src/usage/token-estimate.ts';
import { TokenizerThread } from '../../src/usage/tokenizer-thread.ts';
import { eventually } from '../helpers/eventually.ts';

describe('tokenizer thread', () => {
  const threads: TokenizerThread[] = [];
  const thread = (idleMs?: number) => {
    const created = new TokenizerThread(idleMs);
    threads.push(created);
    return created;
  };
  after(async () => Promise.all(threads.map((created) => created.close())));

  it('starts only on the first count, and counts as the tokenizer does on this thread', async () => {
    const tokenizer = thread();
    expect(tokenizer.running).to.equal(false);
    expect(await tokenizer.count('')).to.equal(0);
    expect(tokenizer.running).to.equal(false);
    const text = 'The capital of France is Paris. <|endoftext|> '.repeat(40);
    const counted = await tokenizer.count(text);
    expect(tokenizer.running).to.equal(true);
    expect(counted).to.equal(await countTokensBounded(await loadTokenizer(), text));
    expect(await tokenizer.count(text.slice(0, 100), 1000)).to.equal(
      await countTokensBounded(await loadTokenizer(), text.slice(0, 100), 1000),
    );
  });

  it('answers counts made at once, each its own', async () => {
    const tokenizer = thread();
    const texts = ['one', 'two words', 'a few more words here', 'x'.repeat(5000)];
    const counts = await Promise.all(texts.map((text) => tokenizer.count(text)));
    const count = await loadTokenizer();
    expect(counts).to.deep.equal(await Promise.all(texts.map((text) => countTokensBounded(count, text))));
  });

  it('counts a text past its sampling bound (10 MB, the default body limit), extrapolating from its slices', async () => {
    const tokenizer = thread();
    const text = Array.from({ length: 20_000 }, (_, index) => `word${index % 997} Ünï ${index}\n`).join('');
    const long = text.repeat(Math.ceil(10_000_000 / text.length));
    expect(long.length).to.be.at.least(10_000_000);
    // The text repeats, so its tokens per character are those of one repetition, counted whole here.
    const whole = ((await loadTokenizer())(text) * long.length) / text.length;
    const counted = await tokenizer.count(long);
    expect(counted).to.be.within(whole * 0.95, whole * 1.05);
  });

  it('ends after its idle time and starts again on the next count', async () => {
    const tokenizer = thread(50);
    expect(await tokenizer.count('hello world')).to.be.greaterThan(0);
    await eventually(() => !tokenizer.running, 'the idle thread ended');
    expect(await tokenizer.count('hello world')).to.be.greaterThan(0);
    expect(tokenizer.running).to.equal(true);
  });

  it('fails the pending counts when closed, and counts again afterwards', async () => {
    const tokenizer = thread();
    let failure: unknown;
    const pending = tokenizer.count('word '.repeat(10_000)).catch((error: unknown) => (failure = error));
    await tokenizer.close();
    await pending;
    expect(failure).to.be.instanceOf(Error);
    expect(await tokenizer.count('hello world')).to.be.greaterThan(0);
  });
});
