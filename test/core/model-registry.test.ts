import { expect } from 'chai';
import { isGatewayError } from '../../src/core/gateway-errors.ts';
import { ModelRegistry } from '../../src/core/model-registry.ts';
import { PluginLoadError } from '../../src/plugins/validate-plugin.ts';
import { samplePlugins } from '../plugins/sample-plugins.ts';

function rejection(action: () => unknown): string[] {
  try {
    action();
  } catch (error) {
    if (isGatewayError(error)) return [...(error.errors ?? [])];
    throw error;
  }
  throw new Error('expected a rejection');
}

describe('ModelRegistry', () => {
  const registry = new ModelRegistry(samplePlugins());

  it('lists listed aliases ahead of listed models, per plugin in manifest order', () => {
    expect(registry.catalog.map((entry) => entry.id)).to.deep.equal([
      'acme-latest',
      'acme/one',
      'acme/two',
      'bolt-latest',
      'bolt/bolt-1',
    ]);
    expect(registry.catalog[1]).to.deep.equal({ id: 'acme/one', object: 'model', owned_by: 'acme' });
  });

  it('resolves aliases, hidden models and native spellings to one canonical model', () => {
    expect(registry.resolve('chat-completions', 'acme-latest')).to.include({
      canonicalId: 'acme/one',
      alias: 'acme-latest',
    });
    expect(registry.resolve('chat-completions', 'acme/hidden')).to.include({ canonicalId: 'acme/hidden' });
    expect(registry.resolve('responses', 'one').canonicalId).to.equal('acme/one');
    expect(registry.resolve('responses', 'acme/one').canonicalId).to.equal('acme/one');
    expect(registry.resolve('messages', 'bolt-latest').canonicalId).to.equal('bolt/bolt-1');
  });

  it('names the upstream model per route', () => {
    expect(registry.upstreamModel(registry.resolve('chat-completions', 'acme/hidden'), 'chat-completions')).to.equal(
      'hidden-2026',
    );
    expect(registry.upstreamModel(registry.resolve('responses', 'two'), 'responses')).to.equal('two-r');
    expect(registry.upstreamModel(registry.resolve('chat-completions', 'acme/two'), 'chat-completions')).to.equal(
      'two',
    );
  });

  it('points a model that another route serves to that route', () => {
    expect(rejection(() => registry.resolve('responses', 'bolt/bolt-1'))).to.deep.equal([
      "Field 'model': 'bolt/bolt-1' is not available on /v1/responses; it is served on /v1/chat/completions",
    ]);
    expect(rejection(() => registry.resolve('responses', 'bolt-latest'))[0]).to.contain('/v1/chat/completions');
    expect(rejection(() => registry.resolve('chat-completions', 'bolt-1'))).to.deep.equal([
      "Field 'model': 'bolt-1' is not a model ID on /v1/chat/completions; use 'bolt/bolt-1'",
    ]);
  });

  it('rejects unknown IDs and vendor-prefixed aliases with a hint', () => {
    expect(rejection(() => registry.resolve('chat-completions', 'nope'))).to.deep.equal([
      "Field 'model': unknown model 'nope'; GET /v1/models lists the models",
    ]);
    expect(rejection(() => registry.resolve('chat-completions', 'acme/acme-latest'))[0]).to.contain(
      "use the alias 'acme-latest'",
    );
  });

  it('lets the operator retarget an alias, within the routes its target serves', () => {
    expect(
      new ModelRegistry(samplePlugins(), { 'acme-latest': 'acme/two' }).resolve('responses', 'acme-latest').canonicalId,
    ).to.equal('acme/two');
    expect(() => new ModelRegistry(samplePlugins(), { 'acme-latest': 'acme/hidden' })).to.throw(
      PluginLoadError,
      "does not serve the alias's route(s) chat, responses",
    );
    expect(() => new ModelRegistry(samplePlugins(), { 'nope-latest': 'acme/one' })).to.throw(
      PluginLoadError,
      'nope-latest',
    );
  });

  it('refuses an ID claimed by two plugins on one route', () => {
    const [acme, bolt] = samplePlugins();
    const clash = {
      ...bolt!,
      aliases: [{ id: 'acme-latest', target: 'bolt/bolt-1', routes: ['chat-completions' as const] }],
    };
    expect(() => new ModelRegistry([acme!, clash])).to.throw(
      PluginLoadError,
      "plugin 'bolt': aliases: 'acme-latest' on route chat-completions is already claimed by plugin 'acme'",
    );
  });
});
