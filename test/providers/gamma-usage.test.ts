import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { gammaUsage } from '../../providers/gamma/usage.ts';
import type { TokenUsage } from '../../src/plugins/plugin-contract.ts';

// Recorded shape: running totals on every chunk, thinking tokens (212) only in total_tokens.
const chunks = readFileSync(
  new URL('../../providers/gamma/__fixtures__/running-usage.chunks.txt', import.meta.url),
  'utf8',
)
  .trimEnd()
  .split('\n');
const fold = (lines: string[]) =>
  lines.reduce<TokenUsage | undefined>((seen, data) => gammaUsage.fromStreamEvent(seen, { data }), undefined);

describe('gamma: running usage totals', () => {
  it('takes the last running total and never sums, counting thinking tokens as output', () => {
    expect(fold(chunks)).to.deep.equal({ inputTokens: 1290, outputTokens: 57 + 212, cachedTokens: 1024 });
  });

  it('holds the running total after each chunk, so a cut-off stream records what was seen last', () => {
    expect(fold(chunks.slice(0, 2))).to.deep.equal({ inputTokens: 1290, outputTokens: 17 + 212, cachedTokens: 1024 });
  });

  it('keeps the last usage over chunks without one, null usage, [DONE] and data that is not JSON', () => {
    const later = [
      '{"choices":[],"usage":null}',
      '{"choices":[{"index":0,"delta":{}}]}',
      'not json "usage"',
      'null',
      '[DONE]',
    ];
    expect(fold([...chunks.slice(0, 4), ...later])).to.deep.equal(fold(chunks));
  });

  it('reads a JSON answer, with missing or null cache details counting 0', () => {
    expect(
      gammaUsage.fromBody({
        usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5, prompt_tokens_details: null },
      }),
    ).to.deep.equal({
      inputTokens: 3,
      outputTokens: 2,
      cachedTokens: 0,
    });
    expect(
      gammaUsage.fromBody({ usage: { prompt_tokens: 40, completion_tokens: 10, total_tokens: 90 } }),
    ).to.deep.equal({
      inputTokens: 40,
      outputTokens: 50,
      cachedTokens: 0,
    });
    expect(
      gammaUsage.fromBody({
        usage: {
          prompt_tokens: 40,
          completion_tokens: 10,
          total_tokens: 50,
          prompt_tokens_details: { cached_tokens: null },
        },
      }),
    ).to.deep.equal({ inputTokens: 40, outputTokens: 10, cachedTokens: 0 });
    expect(gammaUsage.fromBody({ id: 'x' })).to.equal(undefined);
    expect(gammaUsage.fromBody(null)).to.equal(undefined);
  });
});
