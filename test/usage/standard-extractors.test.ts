import { expect } from 'chai';
import type { SseEvent, TokenUsage, UsageExtractor } from '../../src/plugins/plugin-contract.ts';
import { charge } from '../../src/usage/pricing.ts';
import { standardExtractors } from '../../src/usage/standard-extractors.ts';
import { streamedText } from '../../src/usage/streamed-text.ts';
import { estimateUsage, promptText } from '../../src/usage/token-estimate.ts';
import { SseSplitter } from '../../src/sse/sse-splitter.ts';

/** Folds a recorded SSE stream (raw text) through an extractor, as the relay's tap does. */
function fold(extractor: UsageExtractor, stream: string): TokenUsage | undefined {
  const events = new SseSplitter().push(Buffer.from(stream)).flatMap((block) => (block.event ? [block.event] : []));
  return events.reduce<TokenUsage | undefined>((seen, event: SseEvent) => extractor.fromStreamEvent(seen, event), undefined);
}

const sse = (events: [string | undefined, unknown][]) => events.map(([name, data]) => `${name ? `event: ${name}\n` : ''}data: ${typeof data === 'string' ? data : JSON.stringify(data)}\n\n`).join('');

describe('standard usage extractors', () => {
  describe('Chat Completions', () => {
    const { fromBody } = standardExtractors['chat-completions'];
    it('reads JSON usage, cached tokens being part of the prompt', () => {
      expect(fromBody({ usage: { prompt_tokens: 2006, completion_tokens: 300, total_tokens: 2306, prompt_tokens_details: { cached_tokens: 1920 } } })).to.deep.equal({ inputTokens: 2006, outputTokens: 300, cachedTokens: 1920 });
      expect(fromBody({ usage: { prompt_tokens: 5, completion_tokens: 1, prompt_tokens_details: null } })).to.deep.equal({ inputTokens: 5, outputTokens: 1, cachedTokens: 0 });
      expect(fromBody({ id: 'x' })).to.equal(undefined);
      expect(fromBody({ usage: null })).to.equal(undefined);
    });
    it('takes the include_usage chunk of a stream, ignoring usage:null chunks and [DONE]', () => {
      const stream = sse([
        [undefined, { choices: [{ delta: { content: 'a' } }], usage: null }],
        [undefined, { choices: [], usage: { prompt_tokens: 10, completion_tokens: 4, total_tokens: 14, prompt_tokens_details: { cached_tokens: 3 } } }],
        [undefined, '[DONE]'],
      ]);
      expect(fold(standardExtractors['chat-completions'], stream)).to.deep.equal({ inputTokens: 10, outputTokens: 4, cachedTokens: 3 });
      expect(fold(standardExtractors['chat-completions'], sse([[undefined, { choices: [], usage: null }]]))).to.equal(undefined);
    });
  });

  describe('Responses', () => {
    const extractor = standardExtractors.responses;
    const usage = { input_tokens: 50, input_tokens_details: { cached_tokens: 20 }, output_tokens: 7, output_tokens_details: { reasoning_tokens: 2 }, total_tokens: 57 };
    it('reads JSON usage', () => {
      expect(extractor.fromBody({ usage })).to.deep.equal({ inputTokens: 50, outputTokens: 7, cachedTokens: 20 });
    });
    for (const terminal of ['response.completed', 'response.incomplete', 'response.failed']) {
      it(`takes the usage of ${terminal}`, () => {
        const stream = sse([
          ['response.created', { type: 'response.created', response: { usage: null } }],
          ['response.output_text.delta', { type: 'response.output_text.delta', delta: 'hi' }],
          [terminal, { type: terminal, response: { status: 'x', usage } }],
        ]);
        expect(fold(extractor, stream)).to.deep.equal({ inputTokens: 50, outputTokens: 7, cachedTokens: 20 });
      });
    }
  });

  describe('Messages', () => {
    const extractor = standardExtractors.messages;
    it('sums the three input counts of a JSON answer', () => {
      expect(extractor.fromBody({ usage: { input_tokens: 10, cache_creation_input_tokens: 100, cache_read_input_tokens: 1000, output_tokens: 5 } })).to.deep.equal({
        inputTokens: 1110, outputTokens: 5, cachedTokens: 1000,
      });
      expect(extractor.fromBody({ usage: { input_tokens: 3, cache_creation_input_tokens: null, cache_read_input_tokens: null, output_tokens: 1 } })).to.deep.equal({ inputTokens: 3, outputTokens: 1, cachedTokens: 0 });
    });
    it('takes message_start input and the LAST cumulative message_delta output, never summing', () => {
      const stream = sse([
        ['message_start', { type: 'message_start', message: { usage: { input_tokens: 12, cache_creation_input_tokens: 0, cache_read_input_tokens: 30, output_tokens: 1 } } }],
        ['ping', { type: 'ping' }],
        ['content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'Hi' } }],
        ['message_delta', { type: 'message_delta', delta: { stop_reason: null }, usage: { output_tokens: 20 } }],
        ['message_delta', { type: 'message_delta', delta: { stop_reason: 'end_turn' }, usage: { output_tokens: 41 } }],
        ['message_stop', { type: 'message_stop' }],
      ]);
      expect(fold(extractor, stream)).to.deep.equal({ inputTokens: 42, outputTokens: 41, cachedTokens: 30 });
    });
    it('lets a delta overwrite only the input counts it carries', () => {
      const stream = sse([
        ['message_start', { type: 'message_start', message: { usage: { input_tokens: 12, cache_creation_input_tokens: 5, cache_read_input_tokens: 30, output_tokens: 1 } } }],
        ['message_delta', { type: 'message_delta', usage: { input_tokens: 15, cache_read_input_tokens: null, output_tokens: 9 } }],
      ]);
      expect(fold(extractor, stream)).to.deep.equal({ inputTokens: 50, outputTokens: 9, cachedTokens: 30 });
    });
  });

  it('reports no usage for count_tokens', () => {
    expect(standardExtractors['count-tokens'].fromBody({ input_tokens: 12 })).to.equal(undefined);
  });
});

describe('pricing', () => {
  it('computes cost and charged tokens exactly', () => {
    const result = charge({ inputTokens: 1000, outputTokens: 500, cachedTokens: 400 }, { input: 2.5, cachedInput: 0.25, output: 15 });
    // (600 × 2.5 + 400 × 0.25 + 500 × 15) / 1M
    expect(result.costUsd).to.be.closeTo(0.0091, 1e-12);
    // 600 + 500 + ⌈400 × 0.1⌉
    expect(result).to.deep.include({ totalTokens: 1500, chargedTokens: 1140 });
    expect(charge({ inputTokens: 3, outputTokens: 0, cachedTokens: 3 }, { input: 3, cachedInput: 0.3, output: 15 }).chargedTokens).to.equal(1);
  });
});

describe('estimates', () => {
  it('collects the streamed text of each format', () => {
    expect(streamedText('chat-completions', JSON.stringify({ choices: [{ delta: { content: 'Hel', tool_calls: [{ function: { arguments: '{"a"' } }] } }] }))).to.equal('Hel{"a"');
    expect(streamedText('responses', JSON.stringify({ type: 'response.output_text.delta', delta: 'lo' }))).to.equal('lo');
    expect(streamedText('messages', JSON.stringify({ type: 'content_block_delta', delta: { type: 'text_delta', text: '!' } }))).to.equal('!');
    expect(streamedText('messages', '[DONE]')).to.equal('');
  });

  it('counts tokens with a real tokenizer over what was sent and received', async () => {
    const body = { model: 'x', system: 'Be brief.', messages: [{ role: 'user', content: [{ type: 'text', text: 'What is the capital of France?' }] }] };
    expect(promptText(body)).to.equal('Be brief.\nWhat is the capital of France?');
    const usage = await estimateUsage(body, 'The capital of France is Paris.');
    expect(usage.inputTokens).to.be.within(8, 14);
    expect(usage.outputTokens).to.be.within(6, 9);
    expect(usage.cachedTokens).to.equal(0);
  });
});
