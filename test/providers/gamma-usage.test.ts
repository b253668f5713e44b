import { expect } from 'chai';
import { gammaUsage } from '../../providers/gamma/usage.ts';
import type { TokenUsage } from '../../src/plugins/plugin-contract.ts';

// Recorded shape: running totals on every chunk, thinking tokens only in total_tokens.
const stream = [
  '{"choices":[{"index":0,"delta":{"role":"assistant","content":"Th"}}],"usage":{"prompt_tokens":20,"completion_tokens":1,"total_tokens":61}}',
  '{"choices":[{"index":0,"delta":{"content":"inking done"}}],"usage":{"prompt_tokens":20,"completion_tokens":4,"total_tokens":64}}',
  '{"choices":[{"index":0,"delta":{"content":"."},"finish_reason":"stop"}],"usage":{"prompt_tokens":20,"completion_tokens":5,"total_tokens":65,"prompt_tokens_details":{"cached_tokens":8}}}',
  '[DONE]',
];

describe('gamma: running usage totals', () => {
  it('takes the last running total and never sums, counting thinking tokens as output', () => {
    const usage = stream.reduce<TokenUsage | undefined>((seen, data) => gammaUsage.fromStreamEvent(seen, { data }), undefined);
    expect(usage).to.deep.equal({ inputTokens: 20, outputTokens: 45, cachedTokens: 8 });
  });

  it('reads a JSON answer, with null details counting 0', () => {
    expect(gammaUsage.fromBody({ usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5, prompt_tokens_details: null } })).to.deep.equal({
      inputTokens: 3, outputTokens: 2, cachedTokens: 0,
    });
    expect(gammaUsage.fromBody({ id: 'x' })).to.equal(undefined);
  });
});
