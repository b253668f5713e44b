import { expect } from 'chai';
import type {
  NativeChatAdapter,
  ProviderPlugin,
  SseEvent,
  StreamFixupDeclaration,
  UsageExtractor,
} from '../../src/plugins/plugin-contract.ts';
import { guardHooks, isPluginFault, PluginFault, upstreamJson } from '../../src/plugins/plugin-fault.ts';

/** A plugin (as JavaScript could write it: no types) whose hooks all return what `answer` gives. */
function pluginReturning(answer: () => unknown): ProviderPlugin {
  const hook = answer as never;
  return {
    contract: 1,
    vendor: 'shape',
    routes: { 'chat-completions': { path: '/chat/completions', format: 'chat-completions', auth: 'bearer' } },
    models: [
      {
        id: 'shape-1',
        listed: true,
        routes: ['chat-completions', 'chat'],
        pricing: { input: 1, cachedInput: 0, output: 1 },
      },
    ],
    streamFixups: [{ name: 'fix', route: 'chat-completions', models: ['shape/shape-1'], fixup: hook }],
    usageExtractors: [{ route: 'chat-completions', extractor: { fromBody: hook, fromStreamEvent: hook } }],
    nativeChat: { route: 'chat-completions', buildRequest: hook, readText: hook },
  };
}

const EVENT: SseEvent = { data: '{"a":1}' };

function hooks(answer: () => unknown): {
  fixup: StreamFixupDeclaration['fixup'];
  extractor: UsageExtractor;
  adapter: NativeChatAdapter;
} {
  const guarded = guardHooks(pluginReturning(answer));
  return {
    fixup: guarded.streamFixups![0]!.fixup,
    extractor: guarded.usageExtractors![0]!.extractor,
    adapter: guarded.nativeChat!,
  };
}

/** The fault a call raised, or a failure when it raised none. */
function faultOf(call: () => unknown): PluginFault {
  try {
    call();
  } catch (error) {
    if (isPluginFault(error)) return error;
    throw error;
  }
  throw new Error('no plugin fault');
}

describe('guardHooks: every hook result checked where the hook returns it', () => {
  describe('stream fixups', () => {
    it('accept undefined, null, the same event, a new event and a list of events (empty included)', () => {
      const same = hooks(() => EVENT).fixup;
      expect(same(EVENT, undefined)).to.equal(EVENT);
      for (const legal of [
        undefined,
        null,
        { data: 'x' },
        { data: '', event: 'delta', id: '7' },
        { data: 'x', event: undefined },
        [],
        [{ data: 'a' }, EVENT],
        { data: 'x', extra: 1 },
      ]) {
        expect(hooks(() => legal).fixup(EVENT, undefined), JSON.stringify(legal)).to.equal(legal);
      }
    });

    it('refuse anything else as the plugin fault of that fixup, saying what came back', () => {
      const cases: [unknown, string][] = [
        [42, 'returned 42;'],
        ['data: x', 'returned "data: x";'],
        [true, 'returned true;'],
        [{}, 'returned {};'],
        [{ data: 5 }, 'returned { data: 5 };'],
        [{ data: 'x', event: 5 }, 'returned { data: "x", event: 5 };'],
        [{ data: 'x', id: null }, 'returned { data: "x", id: null };'],
        [[{ data: 'x' }, 7], 'returned a list whose item 1 is 7;'],
        [[null], 'returned a list whose item 0 is null;'],
        [() => undefined, 'returned a function;'],
      ];
      for (const [value, message] of cases) {
        const fault = faultOf(() => hooks(() => value).fixup(EVENT, undefined));
        expect(fault, String(value)).to.include({ plugin: 'shape', hook: 'streamFixups.fix', failure: 'returned' });
        expect((fault.cause as Error).message)
          .to.contain(message)
          .and.to.contain('a stream fixup returns undefined, null, an event');
        expect(fault.message).to.equal(`plugin 'shape', hook 'streamFixups.fix' ${(fault.cause as Error).message}`);
      }
    });

    it('still turn a throw into the fault of that fixup', () => {
      const fault = faultOf(() =>
        hooks(() => {
          throw new Error('boom');
        }).fixup(EVENT, undefined),
      );
      expect(fault).to.include({ plugin: 'shape', hook: 'streamFixups.fix', failure: 'threw' });
      expect(fault.message).to.equal("plugin 'shape', hook 'streamFixups.fix' threw: boom");
    });
  });

  describe('usage extractors', () => {
    const usage = { inputTokens: 5, outputTokens: 3, cachedTokens: 0 };

    it('accept undefined, the value seen, and three token counts (further fields ignored)', () => {
      const seen = { inputTokens: Number.NaN, outputTokens: 0, cachedTokens: 0 };
      expect(hooks(() => seen).extractor.fromStreamEvent(seen, EVENT)).to.equal(seen);
      for (const legal of [
        undefined,
        usage,
        { ...usage, reasoningTokens: 2 },
        { inputTokens: 0, outputTokens: 0.5, cachedTokens: 0 },
      ]) {
        const { extractor } = hooks(() => legal);
        expect(extractor.fromBody({}), JSON.stringify(legal)).to.equal(legal);
        expect(extractor.fromStreamEvent(undefined, EVENT), JSON.stringify(legal)).to.equal(legal);
      }
    });

    it('refuse a string, the upstream field names, a missing, negative, NaN or infinite count', () => {
      const cases: [unknown, string][] = [
        ['many', 'returned "many";'],
        [{ input_tokens: 'many' }, 'returned { input_tokens: "many" };'],
        [{ ...usage, cachedTokens: undefined }, 'cachedTokens: undefined'],
        [{ ...usage, outputTokens: -1 }, 'outputTokens: -1'],
        [{ ...usage, inputTokens: Number.NaN }, 'inputTokens: NaN'],
        [{ ...usage, inputTokens: Infinity }, 'inputTokens: Infinity'],
        [{ ...usage, inputTokens: '5' }, 'inputTokens: "5"'],
        [null, 'returned null;'],
        [[usage], 'returned a list'],
      ];
      for (const [value, message] of cases) {
        const { extractor } = hooks(() => value);
        for (const [hook, call] of [
          ['usageExtractors[0].fromBody', () => extractor.fromBody({})],
          ['usageExtractors[0].fromStreamEvent', () => extractor.fromStreamEvent(undefined, EVENT)],
        ] as const) {
          const fault = faultOf(call);
          expect(fault, `${hook} ${JSON.stringify(value)}`).to.include({ plugin: 'shape', hook, failure: 'returned' });
          expect((fault.cause as Error).message)
            .to.contain(message)
            .and.to.contain('a usage extractor returns undefined or { inputTokens, outputTokens, cachedTokens }');
        }
      }
    });
  });

  describe('the native chat adapter', () => {
    const request = { upstreamModel: 'shape-1', input: 'hi', webSearch: false };

    it('buildRequest: accepts an object, refuses anything else', () => {
      const body = { model: 'shape-1' };
      expect(hooks(() => body).adapter.buildRequest(request)).to.equal(body);
      for (const value of ['{"model":"x"}', null, undefined, [body], 42]) {
        const fault = faultOf(() => hooks(() => value).adapter.buildRequest(request));
        expect(fault, String(value)).to.include({
          plugin: 'shape',
          hook: 'nativeChat.buildRequest',
          failure: 'returned',
        });
      }
    });

    it('buildRequest: a body JSON cannot carry (a BigInt, a cycle, a toJSON that is not an object) is its fault too', () => {
      const cyclic: Record<string, unknown> = {};
      cyclic.self = cyclic;
      expect(upstreamJson('shape', { model: 'x' })).to.equal('{"model":"x"}');
      for (const body of [{ n: 1n }, cyclic, { toJSON: () => 'text' }]) {
        const fault = faultOf(() => upstreamJson('shape', body));
        expect(fault).to.include({ plugin: 'shape', hook: 'nativeChat.buildRequest', failure: 'returned' });
      }
    });

    it('readText: accepts a string or undefined, refuses anything else', () => {
      expect(hooks(() => 'text').adapter.readText({})).to.equal('text');
      expect(hooks(() => undefined).adapter.readText({})).to.equal(undefined);
      for (const value of [null, 42, { text: 'x' }, ['x']]) {
        const fault = faultOf(() => hooks(() => value).adapter.readText({}));
        expect(fault, String(value)).to.include({ plugin: 'shape', hook: 'nativeChat.readText', failure: 'returned' });
        expect((fault.cause as Error).message).to.contain('nativeChat.readText returns a string or undefined');
      }
    });
  });

  it("leaves createState alone: the state is the plugin's own, whatever it is", () => {
    const guarded = guardHooks({
      ...pluginReturning(() => undefined),
      streamFixups: [
        {
          name: 'fix',
          route: 'chat-completions',
          models: ['shape/shape-1'],
          createState: () => 42,
          fixup: () => undefined,
        },
      ],
    });
    expect(guarded.streamFixups![0]!.createState!()).to.equal(42);
  });
});
