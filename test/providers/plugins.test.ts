import { expect } from 'chai';
import { fileURLToPath } from 'node:url';
import { loadPlugins } from '../../src/plugins/load-plugins.ts';
import { ModelRegistry } from '../../src/plugins/model-registry.ts';
import type { NativeChatRequest, ProviderPlugin, RouteId } from '../../src/plugins/plugin-contract.ts';

const manifest = fileURLToPath(new URL('../../providers/manifest.json', import.meta.url));

// The sets exactly as the API specification lists them (§2.1–2.3).
const SET_C = [
  'alpha-latest', 'alpha/gen-6-astra', 'alpha/gen-6.1-sol', 'alpha/gen-6-sol', 'alpha/gen-6-luna', 'alpha/gen-5.6-terra', 'alpha/gen-5.6-luna', 'alpha/gen-5.5',
  'beta-latest', 'beta/beta-fable-5-1', 'beta/beta-opus-5-5', 'beta/beta-fable-5', 'beta/beta-opus-5', 'beta/beta-opus-4-8', 'beta/beta-opus-4-7', 'beta/beta-opus-4-6', 'beta/beta-sonnet-4-6',
  'gamma-latest', 'gamma/gamma-3.1-pro-preview', 'gamma/gamma-3.8-flash',
  'delta/delta-4.7', 'delta/delta-4.6', 'delta/delta-4.5', 'epsilon/epsilon-5.3-flash', 'epsilon/epsilon-5.2', 'zeta/zeta-k3',
];
const SET_M = ['beta-latest', 'beta-fable-5-1', 'beta-opus-5-5', 'beta-fable-5', 'beta-opus-5', 'beta-opus-4-8', 'beta-opus-4-7', 'beta-opus-4-6', 'beta-sonnet-4-6'];
const SET_R = [
  'alpha-latest', 'alpha/gen-6-astra', 'alpha/gen-6.1-sol', 'alpha/gen-6-sol', 'alpha/gen-6-luna', 'alpha/gen-5.6-terra', 'alpha/gen-5.6-luna', 'alpha/gen-5.5',
  'gen-6-astra', 'gen-6.1-sol', 'gen-6-sol', 'gen-6-luna', 'gen-5.6-terra', 'gen-5.6-luna', 'gen-5.5',
];
const CATALOG = [
  'alpha-latest', 'alpha/gen-6-astra', 'alpha/gen-5.6-terra', 'alpha/gen-5.6-luna', 'alpha/gen-5.5',
  'beta-latest', 'beta/beta-fable-5-1', 'beta/beta-fable-5', 'beta/beta-opus-5', 'beta/beta-opus-4-8', 'beta/beta-opus-4-7', 'beta/beta-opus-4-6', 'beta/beta-sonnet-4-6',
  'gamma-latest', 'gamma/gamma-3.1-pro-preview', 'gamma/gamma-3.8-flash',
  'delta/delta-4.7', 'delta/delta-4.6', 'delta/delta-4.5', 'epsilon/epsilon-5.3-flash', 'epsilon/epsilon-5.2', 'zeta/zeta-k3',
];

describe('the six provider plugins', () => {
  let plugins: ProviderPlugin[];
  let registry: ModelRegistry;
  before(async () => {
    plugins = await loadPlugins(manifest);
    registry = new ModelRegistry(plugins);
  });

  it('load from the manifest in catalog order', () => {
    expect(plugins.map((plugin) => plugin.vendor)).to.deep.equal(['alpha', 'beta', 'gamma', 'delta', 'epsilon', 'zeta']);
  });

  const sets: [RouteId, string[]][] = [
    ['chat', SET_C],
    ['chat-completions', SET_C],
    ['messages', SET_M],
    ['count-tokens', SET_M],
    ['responses', SET_R],
  ];
  for (const [route, set] of sets) {
    it(`accept exactly the spec's set on ${route}`, () => {
      expect(registry.acceptedIds(route)).to.have.members(set);
      expect(registry.acceptedIds(route)).to.have.length(set.length);
    });
  }

  it('list exactly the spec catalog, in its order, hidden IDs left out', () => {
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

  it('declare the epsilon fixup for streaming epsilon-5.3-flash on Chat Completions only', () => {
    expect(registry.streamFixups('chat-completions', 'epsilon/epsilon-5.3-flash')).to.have.length(1);
    expect(registry.streamFixups('chat-completions', 'epsilon/epsilon-5.2')).to.have.length(0);
  });

  it('declare web search on alpha, beta and gamma models only', () => {
    for (const plugin of plugins) {
      expect(plugin.models.every((model) => model.webSearch === ['alpha', 'beta', 'gamma'].includes(plugin.vendor) || (!model.webSearch && !['alpha', 'beta', 'gamma'].includes(plugin.vendor))), plugin.vendor).to.equal(true);
    }
  });

  describe('native chat adapters', () => {
    const request: NativeChatRequest = { upstreamModel: 'm-1', input: 'What is new?', temperature: 0.4, maxOutputTokens: 200, webSearch: true };
    const adapterOf = (vendor: string) => plugins.find((plugin) => plugin.vendor === vendor)!.nativeChat!;

    it('alpha: Responses with the low reasoning preset and the web search tool', () => {
      expect(adapterOf('alpha').route).to.equal('responses');
      expect(adapterOf('alpha').buildRequest(request)).to.deep.equal({
        model: 'm-1', input: 'What is new?', reasoning: { effort: 'low' }, temperature: 0.4, max_output_tokens: 200, tools: [{ type: 'web_search' }], stream: false,
      });
      const answer = { output: [{ type: 'reasoning', summary: [] }, { type: 'message', content: [{ type: 'output_text', text: 'Hello ' }, { type: 'output_text', text: 'world' }] }] };
      expect(adapterOf('alpha').readText(answer)).to.equal('Hello world');
    });

    it('beta: Messages with the low effort preset, max_tokens and the web search tool', () => {
      expect(adapterOf('beta').route).to.equal('messages');
      expect(adapterOf('beta').buildRequest(request)).to.deep.equal({
        model: 'm-1', max_tokens: 200, messages: [{ role: 'user', content: 'What is new?' }], output_config: { effort: 'low' }, temperature: 0.4,
        tools: [{ type: 'web_search_20250305', name: 'web_search' }],
      });
      expect(adapterOf('beta').buildRequest({ upstreamModel: 'm', input: 'x', webSearch: false })).to.deep.equal({
        model: 'm', max_tokens: 4096, messages: [{ role: 'user', content: 'x' }], output_config: { effort: 'low' },
      });
      expect(adapterOf('beta').readText({ content: [{ type: 'thinking', thinking: '…' }, { type: 'text', text: 'Hi' }] })).to.equal('Hi');
    });

    for (const vendor of ['gamma', 'delta', 'epsilon', 'zeta']) {
      it(`${vendor}: Chat Completions with reasoning_effort low`, () => {
        const body = adapterOf(vendor).buildRequest({ ...request, webSearch: vendor === 'gamma' });
        expect(adapterOf(vendor).route).to.equal('chat-completions');
        expect(body).to.deep.include({ model: 'm-1', messages: [{ role: 'user', content: 'What is new?' }], reasoning_effort: 'low', temperature: 0.4, max_completion_tokens: 200, stream: false });
        expect(Boolean(body.tools)).to.equal(vendor === 'gamma');
        expect(adapterOf(vendor).readText({ choices: [{ message: { role: 'assistant', content: 'Yes' } }] })).to.equal('Yes');
        expect(adapterOf(vendor).readText({ choices: [] })).to.equal(undefined);
      });
    }
  });
});
