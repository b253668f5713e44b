import { expect } from 'chai';
import { ModelRegistry } from '../../../src/core/model-registry.ts';
import { MappedStream } from '../../../src/data-plane/adapters/mapped-stream.ts';
import { adaptedErrorAnswer, ROUTE_SHAPES } from '../../../src/data-plane/adapters/route-shapes.ts';
import { fallbackTable, nextFallback } from '../../../src/data-plane/routes/model-fallbacks.ts';
import { FixupChain, SseSplitter } from '../../../src/data-plane/sse/sse-relay.ts';
import type { AdapterContext, ProviderPlugin, SseEvent, StreamMapping } from '../../../src/plugins/plugin-contract.ts';
import { samplePlugins } from '../../plugins/sample-plugins.ts';

const CONTEXT: AdapterContext = {
  route: 'chat-completions',
  model: 'acme/one',
  upstreamModel: 'one',
  stream: true,
  requestId: 'r1',
  created: 7,
};
const USAGE = { inputTokens: 12, outputTokens: 5, cachedTokens: 2 };

/** Splits SSE text into its blocks, as the relay does. */
const blocksOf = (text: string) => new SseSplitter().push(Buffer.from(text, 'utf8'));

/** A vendor whose `say` events become one chunk each, its `end` the finish; a `both` event becomes two. */
const MAPPING: StreamMapping<{ n: number }> = {
  terminal: 'end',
  createState: () => ({ n: 0 }),
  map: (event, state) => {
    state.n += 1;
    if (event.event === 'say')
      return {
        data: JSON.stringify({ id: 'c1', created: 5, model: 'one', n: state.n, text: JSON.parse(event.data).text }),
      };
    if (event.event === 'both') return [{ data: '{"part":1}' }, { data: '{"part":2}', event: 'named' }];
    if (event.event === 'end') return { data: '{"finish":"stop"}' };
    return null;
  },
};

function mapped(text: string, options: { includeUsage?: boolean; fixups?: FixupChain } = {}) {
  const seen: SseEvent[] = [];
  const closing = (opening: string | undefined) =>
    ROUTE_SHAPES['chat-completions'].closing(USAGE, opening, options.includeUsage ?? false);
  const stream = new MappedStream(MAPPING, CONTEXT, closing, options.fixups ?? new FixupChain([]), (event) =>
    seen.push(event),
  );
  const out = blocksOf(text).flatMap((block) => stream.blocks(block));
  return { stream, seen, text: out.map((block) => block.raw.toString('utf8')).join('') };
}

describe('a vendor stream mapped to the route', () => {
  it("writes each mapped event whole (none of the vendor's lines), any number per event, in order, with its state", () => {
    const { text, seen, stream } = mapped(
      'event: say\nid: 9\ndata: {"text":"Hi"}\r\n\r\nevent: noise\ndata: x\n\nevent: both\ndata: {}\n\n',
    );
    expect(text).to.equal(
      'data: {"id":"c1","created":5,"model":"one","n":1,"text":"Hi"}\n\ndata: {"part":1}\n\nevent: named\ndata: {"part":2}\n\n',
    );
    expect(seen.map((event) => event.data)).to.deep.equal([
      '{"id":"c1","created":5,"model":"one","n":1,"text":"Hi"}',
      '{"part":1}',
      '{"part":2}',
    ]);
    expect(stream.complete).to.equal(false);
  });

  it("closes with the route's own events after the terminal one, and lets nothing after it out", () => {
    const { text, stream } = mapped(
      'event: say\ndata: {"text":"Hi"}\n\nevent: end\ndata: {}\n\nevent: say\ndata: {"text":"late"}\n\ndata: [DONE]\n\n',
    );
    expect(text).to.equal(
      'data: {"id":"c1","created":5,"model":"one","n":1,"text":"Hi"}\n\ndata: {"finish":"stop"}\n\ndata: [DONE]\n\n',
    );
    expect(stream.complete).to.equal(true);
  });

  it("writes the include_usage chunk from the vendor's usage when the client asked, with the first chunk's id, time and model", () => {
    const { text } = mapped('event: say\ndata: {"text":"Hi"}\n\nevent: end\ndata: {}\n\n', { includeUsage: true });
    const events = text.split('\n\n').filter(Boolean);
    expect(events.at(-1)).to.equal('data: [DONE]');
    expect(JSON.parse(events.at(-2)!.slice('data: '.length))).to.deep.equal({
      id: 'c1',
      object: 'chat.completion.chunk',
      created: 5,
      model: 'one',
      choices: [],
      usage: { prompt_tokens: 12, completion_tokens: 5, total_tokens: 17, prompt_tokens_details: { cached_tokens: 2 } },
    });
  });

  it("passes comments (keep-alives) through, and runs the route's stream fixups on the mapped events", () => {
    const upper = new FixupChain([
      {
        name: 'upper',
        route: 'chat-completions',
        models: ['acme/one'],
        fixup: (event) => ({ ...event, data: event.data.toUpperCase() }),
      },
    ]);
    const { text } = mapped(': keep-alive\n\nevent: both\ndata: {}\n\n', { fixups: upper });
    expect(text).to.equal(': keep-alive\n\ndata: {"PART":1}\n\nevent: named\ndata: {"PART":2}\n\n');
  });
});

describe("what the gateway writes in the route's shape for an adapter", () => {
  it('the usage field of a JSON answer, per format', () => {
    const answer = (format: 'chat-completions' | 'messages' | 'responses') => {
      const body: Record<string, unknown> = { usage: "the adapter's, replaced" };
      ROUTE_SHAPES[format].writeUsage(body, USAGE);
      return body.usage;
    };
    expect(answer('chat-completions')).to.deep.equal({
      prompt_tokens: 12,
      completion_tokens: 5,
      total_tokens: 17,
      prompt_tokens_details: { cached_tokens: 2 },
    });
    expect(answer('messages')).to.deep.equal({ input_tokens: 10, output_tokens: 5, cache_read_input_tokens: 2 });
    expect(answer('responses')).to.deep.equal({
      input_tokens: 12,
      input_tokens_details: { cached_tokens: 2 },
      output_tokens: 5,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: 17,
    });
  });

  it("a vendor's error in the route's envelope, in the adapter's words or the gateway's", () => {
    const told = adaptedErrorAnswer(
      'chat-completions',
      503,
      { message: 'busy', code: 'overloaded', status: 429 },
      'acme',
    );
    expect(told.status).to.equal(429);
    expect(JSON.parse(told.bytes.toString('utf8'))).to.deep.equal({
      error: { message: 'busy', type: 'rate_limit_error', param: null, code: 'overloaded' },
    });
    const untold = adaptedErrorAnswer('messages', 500, undefined, 'acme');
    expect(untold.status).to.equal(500);
    expect(JSON.parse(untold.bytes.toString('utf8'))).to.deep.equal({
      type: 'error',
      error: { type: 'api_error', message: "Upstream provider 'acme' answered 500" },
    });
    expect(
      JSON.parse(adaptedErrorAnswer('responses', 400, { message: 'no' }, 'acme').bytes.toString('utf8')).error.type,
    ).to.equal('invalid_request_error');
  });
});

describe('fallbacks keep to models served alike', () => {
  const [acme, bolt] = samplePlugins();
  // bolt adapts chat-completions: the same wire format for the client, another way to its vendor.
  const adapter = {
    buildRequest: () => ({ body: {} }),
    mapAnswer: () => ({}),
    usage: { fromBody: () => undefined, fromStreamEvent: () => undefined },
  };
  const adaptedBolt: ProviderPlugin = {
    ...bolt!,
    routes: { ...bolt!.routes, 'chat-completions': { ...bolt!.routes['chat-completions']!, adapter } },
  };
  const registry = new ModelRegistry([acme!, adaptedBolt]);

  it('refuses at load a fallback served the other way on every route the model shares with it', () => {
    expect(() => fallbackTable(registry, { 'acme/one': ['bolt/bolt-1'] })).to.throw(
      "'bolt/bolt-1' serves none of the routes of 'acme/one' in the same wire format (both forwarded, or both through a plugin's adapter)",
    );
  });

  it('skips such a fallback on a request', () => {
    const requested = registry.resolve('chat-completions', 'acme/one');
    expect(
      nextFallback(registry, ['bolt/bolt-1', 'acme/two'], 0, 'chat-completions', requested, () => true)?.resolved
        .canonicalId,
    ).to.equal('acme/two');
  });
});
