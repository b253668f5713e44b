import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import type { SseEvent, TokenUsage, UsageExtractor, WireFormat } from '../../src/plugins/plugin-contract.ts';
import { SseSplitter } from '../../src/data-plane/sse/sse-relay.ts';
import { hasUsageObject } from '../../src/core/formats/format-reading.ts';
import { WIRE_FORMATS } from '../../src/core/formats/index.ts';
import {
  estimateInputTokens,
  estimateOutputTokens,
  estimateUsage,
  promptText,
} from '../../src/usage/token-estimate.ts';

const standardExtractors = Object.fromEntries(
  Object.entries(WIRE_FORMATS).map(([format, rules]) => [format, rules.usage]),
) as Record<WireFormat, UsageExtractor>;
const streamedText = (format: WireFormat, event: SseEvent | string) =>
  WIRE_FORMATS[format].textOf(typeof event === 'string' ? event : event.data);

const fixture = (name: string) => readFileSync(new URL(`./__fixtures__/${name}`, import.meta.url), 'utf8');
const json = (name: string): unknown => JSON.parse(fixture(name));

/** The events of a recorded stream, parsed as the relay's splitter parses them (fed in small pieces). */
function eventsOf(name: string): SseEvent[] {
  const bytes = Buffer.from(fixture(name));
  const splitter = new SseSplitter();
  const events: SseEvent[] = [];
  for (let offset = 0; offset < bytes.length; offset += 37) {
    for (const block of splitter.push(bytes.subarray(offset, offset + 37))) if (block.event) events.push(block.event);
  }
  return events;
}

/** Folds a recorded stream through an extractor, event by event, as the relay's usage tap does. */
const fold = (extractor: UsageExtractor, name: string): TokenUsage | undefined =>
  eventsOf(name).reduce<TokenUsage | undefined>((seen, event) => extractor.fromStreamEvent(seen, event), undefined);

const usage = (inputTokens: number, outputTokens: number, cachedTokens: number): TokenUsage => ({
  inputTokens,
  outputTokens,
  cachedTokens,
});

describe('standard usage extractors', () => {
  it('has one extractor per wire format', () => {
    expect(Object.keys(standardExtractors).sort()).to.deep.equal(
      (['chat-completions', 'count-tokens', 'messages', 'responses'] satisfies WireFormat[]).sort(),
    );
  });

  describe('chat-completions', () => {
    const extractor = standardExtractors['chat-completions'];

    it('reads a JSON answer; cached tokens are part of prompt_tokens', () => {
      expect(extractor.fromBody(json('chat-completions.json'))).to.deep.equal(usage(2006, 300, 1920));
    });

    it('treats null or missing details as zero cached tokens', () => {
      expect(extractor.fromBody(json('chat-completions.null-details.json'))).to.deep.equal(usage(12, 3, 0));
      expect(extractor.fromBody({ usage: { prompt_tokens: 5, completion_tokens: 1 } })).to.deep.equal(usage(5, 1, 0));
    });

    it('finds no usage where there is none', () => {
      expect(extractor.fromBody({ id: 'x', choices: [] })).to.equal(undefined);
      expect(extractor.fromBody({ usage: null })).to.equal(undefined);
      expect(extractor.fromBody(null)).to.equal(undefined);
      expect(extractor.fromBody('text')).to.equal(undefined);
    });

    it('takes the include_usage chunk of a stream, past usage:null chunks, obfuscation and [DONE]', () => {
      expect(fold(extractor, 'chat-completions.include-usage.sse')).to.deep.equal(usage(1536, 19, 1280));
    });

    it('finds no usage in a stream without the usage chunk', () => {
      expect(fold(extractor, 'chat-completions.no-usage.sse')).to.equal(undefined);
    });

    it('takes the last of running totals sent on every chunk, never their sum', () => {
      expect(fold(extractor, 'chat-completions.running-totals.sse')).to.deep.equal(usage(42, 5, 0));
    });

    it('keeps what it saw across [DONE], non-JSON data and a usage chunk without counts', () => {
      const seen = usage(1, 2, 0);
      for (const data of [
        '[DONE]',
        'not json {"usage":{',
        '{"usage":{"note":"no counts"}}',
        '{"choices":[],"usage":null}',
      ]) {
        expect(extractor.fromStreamEvent(seen, { data })).to.equal(seen);
      }
    });

    it('only parses chunks whose usage is an object', () => {
      expect(hasUsageObject('{"usage":null}')).to.equal(false);
      expect(hasUsageObject('{"choices":[{"delta":{"content":"\\"usage\\": {"}}]}')).to.equal(false);
      expect(hasUsageObject('{"usage" : \n {"prompt_tokens":1}}')).to.equal(true);
      expect(hasUsageObject('{"a":{"usage":null},"usage":{}}')).to.equal(true);
    });
  });

  describe('responses', () => {
    const extractor = standardExtractors.responses;

    it('reads a JSON answer; cached tokens are part of input_tokens', () => {
      expect(extractor.fromBody(json('responses.json'))).to.deep.equal(usage(5120, 214, 4096));
    });

    it('takes response.completed of a stream', () => {
      expect(fold(extractor, 'responses.stream.sse')).to.deep.equal(usage(2200, 9, 2048));
    });

    it('takes response.incomplete, with null input details', () => {
      expect(fold(extractor, 'responses.incomplete.sse')).to.deep.equal(usage(31, 16, 0));
    });

    it('takes response.failed from data-only frames ending in [DONE]', () => {
      expect(fold(extractor, 'responses.failed.data-only.sse')).to.deep.equal(usage(77, 2, 0));
    });

    it('ignores usage outside the terminal events', () => {
      const data = JSON.stringify({
        type: 'response.in_progress',
        response: { usage: { input_tokens: 9, output_tokens: 9 } },
      });
      expect(extractor.fromStreamEvent(undefined, { event: 'response.in_progress', data })).to.equal(undefined);
      expect(extractor.fromStreamEvent(undefined, { data })).to.equal(undefined);
    });
  });

  describe('messages', () => {
    const extractor = standardExtractors.messages;

    it('sums the three input counts of a JSON answer; cached = cache reads', () => {
      expect(extractor.fromBody(json('messages.json'))).to.deep.equal(usage(1110, 12, 1000));
    });

    it('treats null cache counts as zero', () => {
      expect(extractor.fromBody(json('messages.null-cache.json'))).to.deep.equal(usage(3, 1, 0));
    });

    it('takes message_start input and the last of two cumulative message_delta outputs, never their sum', () => {
      // 20 then 41 cumulative: 41, not 61 (nor 62 with message_start's 1); input 12 + 0 + 30.
      expect(fold(extractor, 'messages.stream.sse')).to.deep.equal(usage(42, 41, 30));
    });

    it('lets a message_delta overwrite with the counts it repeats (tool use, cache writes)', () => {
      expect(fold(extractor, 'messages.tool-use.sse')).to.deep.equal(usage(2520, 89, 0));
    });

    it('lets a message_delta overwrite only the input counts it carries', () => {
      const start = {
        type: 'message_start',
        message: {
          usage: { input_tokens: 12, cache_creation_input_tokens: 5, cache_read_input_tokens: 30, output_tokens: 1 },
        },
      };
      const delta = {
        type: 'message_delta',
        usage: { input_tokens: 15, cache_read_input_tokens: null, output_tokens: 9 },
      };
      const seen = extractor.fromStreamEvent(undefined, { event: 'message_start', data: JSON.stringify(start) });
      expect(extractor.fromStreamEvent(seen, { event: 'message_delta', data: JSON.stringify(delta) })).to.deep.equal(
        usage(50, 9, 30),
      );
    });

    it('keeps the input counts when a delta follows usage it did not produce', () => {
      const delta = JSON.stringify({ type: 'message_delta', usage: { output_tokens: 7 } });
      expect(extractor.fromStreamEvent(usage(130, 1, 100), { event: 'message_delta', data: delta })).to.deep.equal(
        usage(130, 7, 100),
      );
    });

    it('has message_start counts for a stream cut off before any message_delta', () => {
      expect(fold(extractor, 'messages.cut-short.sse')).to.deep.equal(usage(25, 1, 0));
    });
  });

  describe('count-tokens', () => {
    it('reports no usage: the request is recorded with zero tokens', () => {
      expect(standardExtractors['count-tokens'].fromBody(json('count-tokens.json'))).to.equal(undefined);
      expect(standardExtractors['count-tokens'].fromStreamEvent(undefined, { data: '{"input_tokens":3}' })).to.equal(
        undefined,
      );
    });
  });
});

describe('streamed text and estimates', () => {
  const textOf = (format: WireFormat, name: string) =>
    eventsOf(name)
      .map((event) => streamedText(format, event))
      .join('');

  it('collects the generated text of each format from its stream', () => {
    expect(textOf('chat-completions', 'chat-completions.running-totals.sse')).to.equal('The sky is blue.');
    expect(textOf('responses', 'responses.stream.sse')).to.equal('Two plus two is four.');
    expect(textOf('messages', 'messages.stream.sse')).to.equal('Hello! How can I help you today?');
    expect(textOf('messages', 'messages.tool-use.sse')).to.equal(
      'The user wants the weather.{"location": "San Francisco, CA"}',
    );
    expect(textOf('count-tokens', 'messages.stream.sse')).to.equal('');
  });

  it('counts tool call names and arguments, and skips what is not text', () => {
    const chunk = {
      choices: [{ delta: { content: 'Hel', tool_calls: [{ index: 0, function: { name: 'f', arguments: '{"a"' } }] } }],
    };
    expect(streamedText('chat-completions', JSON.stringify(chunk))).to.equal('Helf{"a"');
    expect(streamedText('chat-completions', '[DONE]')).to.equal('');
    expect(
      streamedText('responses', JSON.stringify({ type: 'response.function_call_arguments.delta', delta: '{"x":1}' })),
    ).to.equal('{"x":1}');
    expect(streamedText('responses', JSON.stringify({ type: 'response.audio.delta', delta: 'UklGRg==' }))).to.equal('');
  });

  it('takes prompt text from messages, system, instructions and input, leaving out ids and images', () => {
    const body = {
      model: 'acme/model-1',
      system: 'Be brief.',
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'What is in the picture?' },
            { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVBORw0KGgo=' } },
          ],
        },
        { role: 'user', content: [{ type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0KGgo=' } }] },
      ],
    };
    expect(promptText(body)).to.equal('Be brief.\nWhat is in the picture?');
    expect(promptText({ instructions: 'Answer in French.', input: 'Hello' })).to.equal('Answer in French.\nHello');
  });

  it('counts tokens with a real tokenizer, special-token text included', async () => {
    const body = {
      model: 'x',
      system: 'Be brief.',
      messages: [{ role: 'user', content: 'What is the capital of France?' }],
    };
    const estimate = await estimateUsage(body, 'The capital of France is Paris.');
    expect(estimate.inputTokens).to.equal(await estimateInputTokens(body));
    expect(estimate.inputTokens).to.be.within(8, 14);
    expect(estimate.outputTokens).to.be.within(6, 9);
    expect(estimate.cachedTokens).to.equal(0);
    expect(await estimateOutputTokens('')).to.equal(0);
    expect(await estimateOutputTokens('text with <|endoftext|> inside')).to.be.greaterThan(3);
  });
});
