import { expect } from 'chai';
import { mkdtemp, mkdir, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadPlugins } from '../../src/plugins/load-plugins.ts';
import { PluginLoadError, validatePlugin } from '../../src/plugins/validate-plugin.ts';
import { samplePlugins } from './sample-plugins.ts';

function withChange(change: (plugin: Record<string, any>) => void) {
  const { nativeChat, ...data } = samplePlugins()[0]!;
  const plugin = { ...structuredClone(data), nativeChat } as Record<string, any>;
  change(plugin);
  return () => validatePlugin('acme', plugin);
}

describe('validatePlugin', () => {
  it('accepts a well-formed plugin', () => {
    expect(validatePlugin('acme', samplePlugins()[0]).vendor).to.equal('acme');
  });

  const cases: [string, (plugin: Record<string, any>) => void, string][] = [
    [
      'a plugin without a contract version',
      (p) => delete p.contract,
      "plugin 'acme': contract: missing: declare the contract version the plugin is written for (this gateway supports 1)",
    ],
    [
      'an unsupported contract version',
      (p) => (p.contract = 2),
      "plugin 'acme': contract: version 2 is not supported (this gateway supports 1)",
    ],
    ['a vendor that is not its folder name', (p) => (p.vendor = 'other'), "plugin 'acme': vendor: must equal"],
    [
      'an unknown route',
      (p) => (p.routes.embeddings = { path: '/e', format: 'responses', auth: 'bearer' }),
      'routes.embeddings: unknown route',
    ],
    ['a bad wire format', (p) => (p.routes.responses.format = 'xml'), 'routes.responses.format'],
    ['a duplicate model', (p) => p.models.push({ ...p.models[0] }), "models[3].id: duplicate model ID 'one'"],
    [
      'a model on an undeclared route',
      (p) => (p.models[0].routes = ['messages']),
      "models[0].routes[0]: route 'messages' is not declared",
    ],
    ['a model on chat without an adapter', (p) => delete p.nativeChat, 'declares no nativeChat adapter'],
    ['a model without pricing', (p) => delete p.models[1].pricing, 'models[1].pricing: missing'],
    [
      'a price missing one key',
      (p) => delete p.models[0].pricing.cachedInput,
      "plugin 'acme': models[0].pricing.cachedInput: missing: USD per 1M tokens (a number >= 0)",
    ],
    [
      'a misspelled route field',
      (p) => (p.routes.responses.defaultHeader = { 'x-v': '1' }),
      "plugin 'acme': routes.responses.defaultHeader: unknown field: did you mean 'defaultHeaders'?",
    ],
    [
      'a misspelled plugin field',
      (p) => (p.streamFixup = []),
      "plugin 'acme': streamFixup: unknown field: did you mean 'streamFixups'?",
    ],
    [
      'an unknown field with nothing close',
      (p) => (p.models[0].colour = 'red'),
      "plugin 'acme': models[0].colour: unknown field (known: id, upstreamModel",
    ],
    [
      'a misspelled price',
      (p) => (p.models[0].pricing.ouput = 1),
      "plugin 'acme': models[0].pricing.ouput: unknown field: did you mean 'output'?",
    ],
    [
      "a route whose format is not its key's",
      (p) => (p.routes.responses.format = 'messages'),
      "plugin 'acme': routes.responses.format: is 'messages', but the route 'responses' speaks 'responses': declare format 'responses', or declare this upstream under routes.messages",
    ],
    [
      'an alias to an unknown model',
      (p) => (p.aliases[0].target = 'acme/zzz'),
      "aliases[0].target: 'acme/zzz' is not one of the plugin's models",
    ],
    [
      'an alias whose target misses a route',
      (p) => (p.aliases[0].target = 'acme/hidden'),
      "aliases[0].target: 'acme/hidden' does not serve the alias's route(s) chat, responses",
    ],
    ['a duplicate alias', (p) => p.aliases.push({ ...p.aliases[0] }), "aliases: duplicate alias 'acme-latest'"],
    [
      'a fixup on a model of another route',
      (p) => (p.streamFixups = [{ name: 'x', route: 'responses', models: ['acme/hidden'], fixup: () => undefined }]),
      'streamFixups[0].models',
    ],
    [
      "a route forwarding the client's Authorization header",
      (p) => (p.routes.responses.forwardHeaders = ['openai-beta', 'authorization']),
      'routes.responses.forwardHeaders: must not name authorization or x-api-key',
    ],
    [
      "a route forwarding the client's x-api-key header",
      (p) => (p.routes.responses.forwardHeaders = ['x-api-key']),
      'routes.responses.forwardHeaders: must not name authorization or x-api-key',
    ],
    [
      'an unknown auth style',
      (p) => (p.routes.responses.auth = 'basic'),
      "routes.responses.auth: must be 'bearer', 'x-api-key', { header",
    ],
    [
      'an auth header in upper case',
      (p) => (p.routes.responses.auth = { header: 'X-Acme-Key' }),
      'routes.responses.auth.header: must be a lower case header name',
    ],
    [
      'an auth header the gateway sets',
      (p) => (p.routes.responses.auth = { header: 'content-type' }),
      "routes.responses.auth.header: 'content-type' is set by the gateway itself",
    ],
    [
      'an auth with both header and query',
      (p) => (p.routes.responses.auth = { header: 'x-k', query: 'key' }),
      'routes.responses.auth: give exactly one of header or query',
    ],
    [
      'a query auth with a prefix',
      (p) => (p.routes.responses.auth = { query: 'key', prefix: 'x' }),
      'routes.responses.auth.prefix: only a header credential takes a prefix',
    ],
    [
      'a bad query parameter name',
      (p) => (p.routes.responses.auth = { query: 'a b' }),
      'routes.responses.auth.query: must be a query parameter name',
    ],
    [
      'an unknown auth field',
      (p) => (p.routes.responses.auth = { header: 'x-k', scheme: 'x' }),
      'routes.responses.auth.scheme: unknown field',
    ],
    [
      'a default Authorization header',
      (p) => (p.routes.responses.defaultHeaders = { Authorization: 'Bearer k' }),
      "routes.responses.defaultHeaders: must not set 'Authorization': credentials come from the endpoint's configured key",
    ],
    [
      'a default x-api-key header',
      (p) => (p.routes.responses.defaultHeaders = { 'x-api-key': 'k' }),
      "routes.responses.defaultHeaders: must not set 'x-api-key'",
    ],
    [
      'a default of the declared credential header',
      (p) => (
        (p.routes.responses.auth = { header: 'x-acme-key' }),
        (p.routes.responses.defaultHeaders = { 'x-acme-key': 'k' })
      ),
      "routes.responses.defaultHeaders: must not set 'x-acme-key'",
    ],
    [
      'a route forwarding the declared credential header',
      (p) => (
        (p.routes.responses.auth = { header: 'x-acme-key' }),
        (p.routes.responses.forwardHeaders = ['x-acme-key'])
      ),
      'routes.responses.forwardHeaders: must not name authorization or x-api-key or x-acme-key',
    ],
    [
      'a fixup that is not a function',
      (p) => (p.streamFixups = [{ name: 'x', route: 'chat-completions', models: ['acme/one'], fixup: 'no' }]),
      'streamFixups[0].fixup: must be a function',
    ],
  ];
  it("accepts a credential in a header of the vendor's choosing (with a prefix) or in a query parameter", () => {
    expect(() => withChange((p) => (p.routes.responses.auth = { header: 'x-acme-key' }))()).not.to.throw();
    expect(() =>
      withChange((p) => (p.routes.responses.auth = { header: 'authorization', prefix: 'Token ' }))(),
    ).not.to.throw();
    expect(() => withChange((p) => (p.routes.responses.auth = { query: 'key' }))()).not.to.throw();
  });

  for (const [name, change, message] of cases) {
    it(`refuses ${name}, naming the plugin and the field`, () => {
      expect(withChange(change)).to.throw(PluginLoadError, message);
    });
  }

  /** The problems `change` makes the sample plugin refused for, one line each. */
  const problemsOf = (change: (plugin: Record<string, any>) => void): readonly string[] => {
    try {
      withChange(change)();
    } catch (error) {
      expect(error).to.be.instanceOf(PluginLoadError);
      return (error as PluginLoadError).problems;
    }
    return expect.fail('expected a refusal');
  };

  it('reports every independent problem of a plugin at once, each naming the field, with the message joining them', () => {
    let error: PluginLoadError | undefined;
    try {
      withChange((p) => {
        p.colour = 'red';
        p.models[1].routes = ['chat-completion'];
        p.routes.responses.path = 'responses';
        p.models[0].pricing = { input: 1, cachedInput: 0.1, ouput: 2 };
      })();
    } catch (caught) {
      error = caught as PluginLoadError;
    }
    expect(error).to.be.instanceOf(PluginLoadError);
    expect(error!.problems).to.deep.equal([
      "plugin 'acme': colour: unknown field (known: contract, vendor, envPrefix, routes, models, aliases, streamFixups, usageExtractors, nativeChat)",
      "plugin 'acme': routes.responses.path: must be a path starting with '/'",
      "plugin 'acme': models[0].pricing.ouput: unknown field: did you mean 'output'?",
      "plugin 'acme': models[0].pricing.output: missing: USD per 1M tokens (a number >= 0)",
      "plugin 'acme': models[1].routes[0]: unknown route 'chat-completion' (known: chat, chat-completions, messages, count-tokens, responses)",
    ]);
    expect(error!.message).to.equal(error!.problems.join('; '));
    // The first problem's parts, as a single problem's error has them.
    expect([error!.plugin, error!.field]).to.deep.equal(['acme', 'colour']);
  });

  it('names every unknown field of an object, not only the first', () => {
    expect(
      problemsOf((p) => Object.assign(p.routes.responses, { defaultHeader: {}, forwardHeader: [] })),
    ).to.deep.equal([
      "plugin 'acme': routes.responses.defaultHeader: unknown field: did you mean 'defaultHeaders'?",
      "plugin 'acme': routes.responses.forwardHeader: unknown field: did you mean 'forwardHeaders'?",
    ]);
  });

  it("reports every problem of a route's auth, but not a missing header beside a misspelled one", () => {
    expect(problemsOf((p) => (p.routes.responses.auth = { header: 'X-Acme-Key', prefix: 'a\nb' }))).to.deep.equal([
      "plugin 'acme': routes.responses.auth.header: must be a lower case header name",
      "plugin 'acme': routes.responses.auth.prefix: must be text without line breaks",
    ]);
    expect(problemsOf((p) => (p.routes.responses.auth = { heder: 'x-acme-key' })))
      .to.have.length(1)
      .and.to.match(/auth\.heder: unknown field/);
  });

  // A check that needs an earlier one to pass is skipped when it fails: one mistake, one problem.
  const dependent: [string, (plugin: Record<string, any>) => void, string][] = [
    [
      'a missing contract (not also an unsupported version)',
      (p) => delete p.contract,
      "plugin 'acme': contract: missing",
    ],
    [
      'routes of the wrong type (not every route named by a model, the adapter or a fixup)',
      (p) => (p.routes = []),
      "plugin 'acme': routes: must be an object keyed by route",
    ],
    [
      'a misspelled route key (not every model on the route it meant)',
      (p) => ((p.routes['chat-completion'] = p.routes['chat-completions']), delete p.routes['chat-completions']),
      "plugin 'acme': routes.chat-completion: unknown route: did you mean 'chat-completions'?",
    ],
    [
      'a misspelled route of a model (not the alias to it, nor its fixups)',
      (p) => (
        (p.models[0].routes = ['chat', 'chat-completion', 'responses']),
        (p.streamFixups = [{ name: 'x', route: 'responses', models: ['acme/one'], fixup: () => undefined }])
      ),
      "plugin 'acme': models[0].routes[1]: unknown route 'chat-completion'",
    ],
    [
      'a model without a valid ID (not the alias to it)',
      (p) => (p.models[0].id = 'acme/one'),
      "plugin 'acme': models[0].id: must be a model name without the vendor prefix",
    ],
    [
      'models of the wrong type (not the alias targets)',
      (p) => (p.models = {}),
      "plugin 'acme': models: must be a non-empty list",
    ],
    [
      'a price of the wrong type (once, not also missing)',
      (p) => (p.models[1].pricing = { ...p.models[1].pricing, input: '1' }),
      'plugin \'acme\': models[1].pricing.input: must be USD per 1M tokens (a number >= 0), got "1"',
    ],
    [
      'defaultHeaders of the wrong type (not also a credential)',
      (p) => (p.routes.responses.defaultHeaders = 'Authorization'),
      "plugin 'acme': routes.responses.defaultHeaders: must map header names to strings",
    ],
    [
      'an alias that is not an object (nor its ID read)',
      (p) => p.aliases.push(null),
      "plugin 'acme': aliases[1]: must be an object",
    ],
    [
      'a fixup whose route is unknown (not its models on that route)',
      (p) => (p.streamFixups = [{ name: 'x', route: 'messages', models: ['acme/one'], fixup: () => undefined }]),
      "plugin 'acme': streamFixups[0].route: 'messages' is not one of the plugin's routes",
    ],
  ];
  for (const [name, change, problem] of dependent) {
    it(`reports ${name} as one problem`, () => {
      const problems = problemsOf(change);
      expect(problems[0]).to.contain(problem);
      expect(problems, problems.join('\n')).to.have.length(1);
    });
  }

  it("checks a bad auth's route for the credential names that hold whatever the auth", () => {
    expect(
      problemsOf(
        (p) => (
          (p.routes.responses.auth = 'basic'),
          (p.routes.responses.defaultHeaders = { Authorization: 'Bearer k' })
        ),
      ),
    ).to.deep.equal([
      "plugin 'acme': routes.responses.auth: must be 'bearer', 'x-api-key', { header: '<lower case name>', prefix?: '<text before the key>' } or { query: '<parameter>' }",
      "plugin 'acme': routes.responses.defaultHeaders: must not set 'Authorization': credentials come from the endpoint's configured key, sent as the route's auth declares",
    ]);
  });
});

describe('loadPlugins', () => {
  it('names the plugin whose module cannot be loaded', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'gateway-manifest-'));
    await mkdir(join(dir, 'acme'));
    await writeFile(join(dir, 'manifest.json'), JSON.stringify({ plugins: ['acme'] }));
    await writeFile(
      join(dir, 'acme', 'index.ts'),
      'export default { contract: 1, vendor: "acme", routes: {}, models: [] };',
    );
    const error = await loadPlugins(join(dir, 'manifest.json')).then(
      () => undefined,
      (caught: unknown) => caught,
    );
    expect(error).to.be.instanceOf(PluginLoadError);
    expect((error as Error).message).to.equal(
      `plugin 'acme': models: must be a non-empty list (in ${join(dir, 'acme', 'index.ts')})`,
    );
  });

  it('refuses a manifest listing a plugin twice', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'gateway-manifest-'));
    await writeFile(join(dir, 'manifest.json'), JSON.stringify({ plugins: ['acme', 'acme'] }));
    const error = await loadPlugins(join(dir, 'manifest.json')).then(
      () => undefined,
      (caught: unknown) => caught,
    );
    expect((error as Error).message).to.contain("'acme' is listed twice");
  });
});
