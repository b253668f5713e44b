import { expect } from 'chai';
import { fileURLToPath } from 'node:url';
import { loadPlugins } from '../../src/plugins/load-plugins.ts';
import { ModelRegistry } from '../../src/core/model-registry.ts';
import type { ModelIdForm, NativeChatRequest, ProviderPlugin, RouteId } from '../../src/plugins/plugin-contract.ts';

const manifest = fileURLToPath(new URL('../../providers/manifest.json', import.meta.url));

// The sets exactly as the API specification lists them (§2.1–2.3).
const SET_C = [
  'alpha-latest',
  'alpha/gen-6-astra',
  'alpha/gen-6.1-sol',
  'alpha/gen-6-sol',
  'alpha/gen-6-luna',
  'alpha/gen-5.6-terra',
  'alpha/gen-5.6-luna',
  'alpha/gen-5.5',
  'beta-latest',
  'beta/beta-fable-5-1',
  'beta/beta-opus-5-5',
  'beta/beta-fable-5',
  'beta/beta-opus-5',
  'beta/beta-opus-4-8',
  'beta/beta-opus-4-7',
  'beta/beta-opus-4-6',
  'beta/beta-sonnet-4-6',
  'gamma-latest',
  'gamma/gamma-3.1-pro-preview',
  'gamma/gamma-3.8-flash',
  'delta/delta-4.7',
  'delta/delta-4.6',
  'delta/delta-4.5',
  'epsilon/epsilon-5.3-flash',
  'epsilon/epsilon-5.2',
  'zeta/zeta-k3',
];
const SET_M = [
  'beta-latest',
  'beta-fable-5-1',
  'beta-opus-5-5',
  'beta-fable-5',
  'beta-opus-5',
  'beta-opus-4-8',
  'beta-opus-4-7',
  'beta-opus-4-6',
  'beta-sonnet-4-6',
];
const SET_R = [
  'alpha-latest',
  'alpha/gen-6-astra',
  'alpha/gen-6.1-sol',
  'alpha/gen-6-sol',
  'alpha/gen-6-luna',
  'alpha/gen-5.6-terra',
  'alpha/gen-5.6-luna',
  'alpha/gen-5.5',
  'gen-6-astra',
  'gen-6.1-sol',
  'gen-6-sol',
  'gen-6-luna',
  'gen-5.6-terra',
  'gen-5.6-luna',
  'gen-5.5',
];
const CATALOG = [
  'alpha-latest',
  'alpha/gen-6-astra',
  'alpha/gen-5.6-terra',
  'alpha/gen-5.6-luna',
  'alpha/gen-5.5',
  'beta-latest',
  'beta/beta-fable-5-1',
  'beta/beta-fable-5',
  'beta/beta-opus-5',
  'beta/beta-opus-4-8',
  'beta/beta-opus-4-7',
  'beta/beta-opus-4-6',
  'beta/beta-sonnet-4-6',
  'gamma-latest',
  'gamma/gamma-3.1-pro-preview',
  'gamma/gamma-3.8-flash',
  'delta/delta-4.7',
  'delta/delta-4.6',
  'delta/delta-4.5',
  'epsilon/epsilon-5.3-flash',
  'epsilon/epsilon-5.2',
  'zeta/zeta-k3',
];

/** The IDs a route accepts, computed from the declarations alone: aliases, then each model in its route's spellings. */
function declaredIds(plugins: readonly ProviderPlugin[], route: RouteId): string[] {
  return plugins.flatMap((plugin) => {
    const forms: readonly ModelIdForm[] =
      route === 'chat' ? ['prefixed'] : (plugin.routes[route]?.modelIds ?? ['prefixed']);
    const aliases = (plugin.aliases ?? []).filter((alias) => alias.routes.includes(route)).map((alias) => alias.id);
    const models = plugin.models
      .filter((model) => model.routes.includes(route))
      .flatMap((model) => forms.map((form) => (form === 'prefixed' ? `${plugin.vendor}/${model.id}` : model.id)));
    return [...aliases, ...models];
  });
}

/** The catalog from the declarations alone: per provider its listed aliases, then its listed models. */
function declaredCatalog(plugins: readonly ProviderPlugin[]): string[] {
  return plugins.flatMap((plugin) => [
    ...(plugin.aliases ?? []).filter((alias) => alias.listed !== false).map((alias) => alias.id),
    ...plugin.models.filter((model) => model.listed).map((model) => `${plugin.vendor}/${model.id}`),
  ]);
}

describe('the six provider plugins', () => {
  let plugins: ProviderPlugin[];
  let registry: ModelRegistry;
  before(async () => {
    plugins = await loadPlugins(manifest);
    registry = new ModelRegistry(plugins);
  });
  const pluginOf = (vendor: string) => plugins.find((plugin) => plugin.vendor === vendor)!;

  it('load from the manifest in catalog order', () => {
    expect(plugins.map((plugin) => plugin.vendor)).to.deep.equal([
      'alpha',
      'beta',
      'gamma',
      'delta',
      'epsilon',
      'zeta',
    ]);
  });

  describe('declare exactly the spec sets', () => {
    it('Set C on chat and chat-completions, in catalog order', () => {
      expect(declaredIds(plugins, 'chat')).to.deep.equal(SET_C);
      expect(declaredIds(plugins, 'chat-completions')).to.deep.equal(SET_C);
    });

    it('Set M on messages and count-tokens (bare IDs)', () => {
      expect(declaredIds(plugins, 'messages')).to.deep.equal(SET_M);
      expect(declaredIds(plugins, 'count-tokens')).to.deep.equal(SET_M);
    });

    it('Set R on responses, prefixed and native', () => {
      expect(declaredIds(plugins, 'responses')).to.have.members(SET_R).and.to.have.length(SET_R.length);
    });

    it('the catalog, in its order, hidden IDs left out', () => {
      expect(declaredCatalog(plugins)).to.deep.equal(CATALOG);
      const hidden = plugins.flatMap((plugin) =>
        plugin.models.filter((model) => !model.listed).map((model) => `${plugin.vendor}/${model.id}`),
      );
      expect(hidden).to.deep.equal(['alpha/gen-6.1-sol', 'alpha/gen-6-sol', 'alpha/gen-6-luna', 'beta/beta-opus-5-5']);
    });
  });

  const sets: [RouteId, string[]][] = [
    ['chat', SET_C],
    ['chat-completions', SET_C],
    ['messages', SET_M],
    ['count-tokens', SET_M],
    ['responses', SET_R],
  ];
  for (const [route, set] of sets) {
    it(`make the registry accept exactly the spec's set on ${route}`, () => {
      expect(registry.acceptedIds(route)).to.have.members(set);
      expect(registry.acceptedIds(route)).to.have.length(set.length);
    });
  }

  it('make the registry list exactly the spec catalog', () => {
    expect(registry.catalog.map((entry) => entry.id)).to.deep.equal(CATALOG);
    expect(registry.catalog.every((entry) => entry.owned_by === entry.id.split(/[/-]/)[0])).to.equal(true);
  });

  it('resolve the aliases as the spec says, on each route', () => {
    expect(registry.resolve('chat-completions', 'alpha-latest').canonicalId).to.equal('alpha/gen-6-astra');
    expect(registry.resolve('chat', 'beta-latest').canonicalId).to.equal('beta/beta-fable-5-1');
    expect(registry.resolve('chat-completions', 'gamma-latest').canonicalId).to.equal('gamma/gamma-3.1-pro-preview');
    expect(registry.resolve('messages', 'beta-latest').canonicalId).to.equal('beta/beta-fable-5-1');
    expect(registry.resolve('count-tokens', 'beta-latest').canonicalId).to.equal('beta/beta-fable-5-1');
    expect(registry.resolve('responses', 'alpha-latest').canonicalId).to.equal('alpha/gen-6-astra');
  });

  it('make native and prefixed Responses IDs one model entry', () => {
    for (const id of SET_R.filter((id) => !id.includes('/') && id !== 'alpha-latest')) {
      expect(registry.resolve('responses', id).canonicalId).to.equal(`alpha/${id}`);
      expect(registry.resolve('responses', id).model).to.equal(registry.resolve('responses', `alpha/${id}`).model);
    }
  });

  it('route every Set C ID to its own vendor', () => {
    for (const id of SET_C) {
      const vendor = id.includes('/') ? id.split('/')[0] : id.replace('-latest', '');
      expect(registry.resolve('chat-completions', id).plugin.vendor, id).to.equal(vendor);
    }
  });

  it('declare the upstream paths, formats and auth of each route', () => {
    const bearerChat = { path: '/chat/completions', format: 'chat-completions', auth: 'bearer' };
    for (const plugin of plugins) expect(plugin.routes['chat-completions'], plugin.vendor).to.deep.equal(bearerChat);
    expect(pluginOf('alpha').routes.responses).to.deep.equal({
      path: '/responses',
      format: 'responses',
      auth: 'bearer',
      modelIds: ['prefixed', 'native'],
    });
    const messagesLike = {
      auth: 'x-api-key',
      modelIds: ['native'],
      forwardHeaders: ['anthropic-version', 'anthropic-beta'],
      defaultHeaders: { 'anthropic-version': '2023-06-01' },
    };
    expect(pluginOf('beta').routes.messages).to.deep.equal({ path: '/messages', format: 'messages', ...messagesLike });
    expect(pluginOf('beta').routes['count-tokens']).to.deep.equal({
      path: '/messages/count_tokens',
      format: 'count-tokens',
      ...messagesLike,
    });
    expect(plugins.map((plugin) => Object.keys(plugin.routes).sort().join(','))).to.deep.equal([
      'chat-completions,responses',
      'chat-completions,count-tokens,messages',
      'chat-completions',
      'chat-completions',
      'chat-completions',
      'chat-completions',
    ]);
  });

  it('send the native model name upstream', () => {
    for (const plugin of plugins) {
      for (const model of plugin.models) {
        for (const route of model.routes) {
          const resolved = registry.resolve(
            route,
            route === 'messages' || route === 'count-tokens' ? model.id : `${plugin.vendor}/${model.id}`,
          );
          expect(registry.upstreamModel(resolved, route), `${model.id} on ${route}`).to.equal(model.id);
        }
      }
    }
  });

  it('price every model with distinct numbers, cached input at about a tenth of input, flagships first', () => {
    const prices = plugins.flatMap((plugin) => plugin.models.map((model) => model.pricing));
    expect(new Set(prices.map((price) => JSON.stringify(price))).size).to.equal(prices.length);
    for (const price of prices) expect(price.cachedInput / price.input).to.be.closeTo(0.1, 0.001);
    for (const plugin of plugins) {
      const flagship = plugin.aliases?.[0]?.target;
      if (!flagship) continue;
      const target = plugin.models.find((model) => `${plugin.vendor}/${model.id}` === flagship)!;
      expect(
        plugin.models.every((model) => model.pricing.output <= target.pricing.output),
        plugin.vendor,
      ).to.equal(true);
    }
  });

  it('declare the epsilon fixup for streaming epsilon-5.3-flash on Chat Completions only', () => {
    expect(registry.streamFixups('chat-completions', 'epsilon/epsilon-5.3-flash')).to.have.length(1);
    expect(registry.streamFixups('chat-completions', 'epsilon/epsilon-5.2')).to.have.length(0);
    expect(plugins.filter((plugin) => plugin.streamFixups?.length).map((plugin) => plugin.vendor)).to.deep.equal([
      'epsilon',
    ]);
  });

  it('declare the running-usage extractor on gamma Chat Completions only', () => {
    expect(plugins.filter((plugin) => plugin.usageExtractors?.length).map((plugin) => plugin.vendor)).to.deep.equal([
      'gamma',
    ]);
    expect(pluginOf('gamma').usageExtractors)
      .to.have.length(1)
      .and.to.have.nested.property('[0].route', 'chat-completions');
  });

  it('declare web search on alpha, beta and gamma models only', () => {
    for (const plugin of plugins) {
      const expected = ['alpha', 'beta', 'gamma'].includes(plugin.vendor);
      for (const model of plugin.models)
        expect(Boolean(model.webSearch), `${plugin.vendor}/${model.id}`).to.equal(expected);
    }
  });

  describe('native chat adapters', () => {
    const request: NativeChatRequest = {
      upstreamModel: 'm-1',
      input: 'What is new?',
      temperature: 0.4,
      maxOutputTokens: 200,
      webSearch: true,
    };
    const bare: NativeChatRequest = { upstreamModel: 'm-1', input: 'What is new?', webSearch: false };
    const adapterOf = (vendor: string) => pluginOf(vendor).nativeChat!;

    it('alpha: Responses with the low reasoning preset and the web search tool', () => {
      expect(adapterOf('alpha').route).to.equal('responses');
      expect(adapterOf('alpha').buildRequest(request)).to.deep.equal({
        model: 'm-1',
        input: 'What is new?',
        reasoning: { effort: 'low' },
        temperature: 0.4,
        max_output_tokens: 200,
        tools: [{ type: 'web_search' }],
        stream: false,
      });
      expect(adapterOf('alpha').buildRequest(bare)).to.deep.equal({
        model: 'm-1',
        input: 'What is new?',
        reasoning: { effort: 'low' },
        stream: false,
      });
      const answer = {
        id: 'resp_1',
        object: 'response',
        status: 'completed',
        model: 'gen-6-astra',
        output: [
          { type: 'reasoning', id: 'rs_1', summary: [] },
          { type: 'web_search_call', id: 'ws_1', status: 'completed', action: { type: 'search', query: 'news' } },
          {
            type: 'message',
            id: 'msg_1',
            role: 'assistant',
            status: 'completed',
            content: [
              { type: 'output_text', text: 'Hello ', annotations: [] },
              { type: 'output_text', text: 'world', annotations: [] },
            ],
          },
        ],
        usage: { input_tokens: 12, output_tokens: 30, total_tokens: 42 },
      };
      expect(adapterOf('alpha').readText(answer)).to.equal('Hello world');
      expect(
        adapterOf('alpha').readText({ output: [{ type: 'message', content: [{ type: 'refusal', refusal: 'No.' }] }] }),
      ).to.equal(undefined);
      expect(adapterOf('alpha').readText(null)).to.equal(undefined);
    });

    it('beta: Messages with the low effort preset, max_tokens and the web search tool', () => {
      expect(adapterOf('beta').route).to.equal('messages');
      expect(adapterOf('beta').buildRequest(request)).to.deep.equal({
        model: 'm-1',
        max_tokens: 200,
        messages: [{ role: 'user', content: 'What is new?' }],
        output_config: { effort: 'low' },
        temperature: 0.4,
        tools: [{ type: 'web_search_20250305', name: 'web_search' }],
      });
      expect(adapterOf('beta').buildRequest(bare)).to.deep.equal({
        model: 'm-1',
        max_tokens: 1024,
        messages: [{ role: 'user', content: 'What is new?' }],
        output_config: { effort: 'low' },
      });
      const answer = {
        id: 'msg_1',
        type: 'message',
        role: 'assistant',
        model: 'beta-fable-5-1',
        stop_reason: 'end_turn',
        content: [
          { type: 'server_tool_use', id: 'srvtoolu_1', name: 'web_search', input: { query: 'news' } },
          { type: 'web_search_tool_result', tool_use_id: 'srvtoolu_1', content: [] },
          { type: 'text', text: 'Hi, ' },
          { type: 'text', text: 'here is the news.', citations: [] },
        ],
        usage: { input_tokens: 10, output_tokens: 8 },
      };
      expect(adapterOf('beta').readText(answer)).to.equal('Hi, here is the news.');
      expect(adapterOf('beta').readText({ content: [{ type: 'tool_use', id: 't', name: 'x', input: {} }] })).to.equal(
        undefined,
      );
    });

    for (const vendor of ['gamma', 'delta', 'epsilon', 'zeta']) {
      it(`${vendor}: Chat Completions with reasoning_effort low`, () => {
        expect(adapterOf(vendor).route).to.equal('chat-completions');
        const body = adapterOf(vendor).buildRequest(request);
        const search = vendor === 'gamma' ? { tools: [{ type: 'function', function: { name: 'googleSearch' } }] } : {};
        expect(body).to.deep.equal({
          model: 'm-1',
          messages: [{ role: 'user', content: 'What is new?' }],
          reasoning_effort: 'low',
          temperature: 0.4,
          max_tokens: 200,
          ...search,
          stream: false,
        });
        expect(adapterOf(vendor).buildRequest(bare)).to.deep.equal({
          model: 'm-1',
          messages: [{ role: 'user', content: 'What is new?' }],
          reasoning_effort: 'low',
          stream: false,
        });
        const answer = {
          id: 'chatcmpl-1',
          object: 'chat.completion',
          created: 1763856000,
          model: 'm-1',
          choices: [
            {
              index: 0,
              message: { role: 'assistant', content: 'Yes', refusal: null },
              finish_reason: 'stop',
              logprobs: null,
            },
          ],
          usage: { prompt_tokens: 5, completion_tokens: 1, total_tokens: 6 },
        };
        expect(adapterOf(vendor).readText(answer)).to.equal('Yes');
        expect(
          adapterOf(vendor).readText({
            choices: [{ index: 0, message: { role: 'assistant', content: null, tool_calls: [] } }],
          }),
        ).to.equal(undefined);
        expect(adapterOf(vendor).readText({ choices: [] })).to.equal(undefined);
      });
    }
  });
});
