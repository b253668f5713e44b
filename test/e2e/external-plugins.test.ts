import { expect } from 'chai';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';
import { startMockUpstream, type MockUpstream } from '../../mock-upstream/mock-upstream-server.ts';
import { writeJavaScriptPlugin } from '../helpers/external-plugin.ts';
import { GatewayProcess, startupFailure } from '../helpers/gateway-process.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const OMEGA_DIR = join(ROOT, 'test/fixtures/external-plugins');
const CLIENT_KEY = 'sk-external-plugins-0001-0123456789abcdef';

describe('plugins from outside the repository (GATEWAY_PLUGIN_PATH), in a gateway process', function () {
  this.timeout(60_000);
  let upstream: MockUpstream;
  let outside: string;
  let gateway: GatewayProcess;
  before(async () => {
    upstream = await startMockUpstream({ apiKey: 'upstream-key' });
    outside = await mkdtemp(join(tmpdir(), 'gateway-external-plugins-'));
    await writeJavaScriptPlugin(join(outside, 'plugins'));
    gateway = await GatewayProcess.start({
      GATEWAY_PLUGIN_PATH: `${OMEGA_DIR}:${join(outside, 'plugins')}`,
      GATEWAY_API_KEYS: CLIENT_KEY,
      GATEWAY_DATA_DIR: join(outside, 'data'),
      OMEGA_BASE_URL: upstream.url,
      OMEGA_API_KEY: 'upstream-key',
      SIGMA_BASE_URL: upstream.url,
      SIGMA_API_KEY: 'upstream-key',
    });
  });
  after(async () => {
    await gateway?.stop();
    await upstream?.close();
    await rm(outside, { recursive: true, force: true });
  });
  beforeEach(() => upstream.reset());

  const client = () => new OpenAI({ baseURL: `${gateway.url}/v1`, apiKey: CLIENT_KEY, maxRetries: 0 });

  it('lists the external plugins in the catalog after the built-in ones, in GATEWAY_PLUGIN_PATH order', async () => {
    const ids = [];
    for await (const model of client().models.list()) ids.push(model.id);
    expect(ids.slice(-3)).to.deep.equal(['omega-latest', 'omega/omega-1', 'sigma/sigma-2']);
    expect(ids.filter((id) => id.startsWith('alpha'))).to.have.length.greaterThan(0);
    expect(ids.indexOf('zeta/zeta-k3')).to.equal(ids.length - 4);
  });

  it('serves the TypeScript plugin on its routes: the alias, JSON and stream, and native chat', async () => {
    const answer = await client().chat.completions.create({
      model: 'omega-latest',
      messages: [{ role: 'user', content: 'Hello omega' }],
    });
    expect(answer.choices[0]!.message.content).to.equal('Mock reply to: Hello omega');
    const stream = await client().chat.completions.create({
      model: 'omega/omega-1',
      messages: [{ role: 'user', content: 'Hi' }],
      stream: true,
    });
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
    expect(text).to.equal('Mock reply to: Hi');
    const chat = await fetch(`${gateway.url}/v1/chat`, {
      method: 'POST',
      headers: { authorization: `Bearer ${CLIENT_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'omega/omega-1', input: 'Native hello' }),
    });
    expect(((await chat.json()) as { result: { text: string } }).result.text).to.equal('Mock reply to: Native hello');
    expect(upstream.requests.map((sent) => [sent.path, sent.body.model, sent.headers.authorization])).to.deep.equal([
      ['/v1/chat/completions', 'omega-1', 'Bearer upstream-key'],
      ['/v1/chat/completions', 'omega-1', 'Bearer upstream-key'],
      ['/v1/chat/completions', 'omega-1', 'Bearer upstream-key'],
    ]);
  });

  it('serves the compiled JavaScript plugin, sending its upstream model name', async () => {
    const answer = await client().chat.completions.create({
      model: 'sigma/sigma-2',
      messages: [{ role: 'user', content: 'Hello sigma' }],
    });
    expect(answer.choices[0]!.message.content).to.equal('Mock reply to: Hello sigma');
    expect(upstream.requests.map((sent) => sent.body.model)).to.deep.equal(['sigma-2-2026']);
  });

  it('refuses to start when an external plugin claims a built-in vendor, naming both directories', async () => {
    const clash = join(outside, 'clash');
    await mkdir(join(clash, 'alpha'), { recursive: true });
    await writeFile(join(clash, 'manifest.json'), JSON.stringify({ plugins: ['alpha'] }));
    const { code, output } = await startupFailure({
      GATEWAY_PLUGIN_PATH: clash,
      GATEWAY_DATA_DIR: join(outside, 'data-clash'),
    });
    expect(code).to.equal(1);
    expect(output).to.contain(
      `cannot start: plugin 'alpha': vendor: claimed twice, by ${join(ROOT, 'providers', 'alpha')} and ${join(clash, 'alpha')}`,
    );
  });
});

describe('broken external plugins refuse start-up with one line naming the file, the field and the intended one', function () {
  this.timeout(120_000);
  let outside: string;
  before(async () => (outside = await mkdtemp(join(tmpdir(), 'gateway-broken-plugins-'))));
  after(async () => rm(outside, { recursive: true, force: true }));

  const route = "'chat-completions': { path: '/chat/completions', format: 'chat-completions', auth: 'bearer' }";
  const model =
    "{ id: 'kappa-1', listed: true, routes: ['chat-completions'], pricing: { input: 1, cachedInput: 0.1, output: 4 } }";
  /**
   * A plugins directory holding one plugin `kappa` (index.js, no node_modules) with the given routes, model and extra
   * fields.
   */
  async function variant(
    name: string,
    { routes = route, models = model, extra = '', manifest = '{"plugins": ["kappa"]}', vendor = 'kappa' } = {},
  ): Promise<string> {
    const directory = join(outside, name);
    await mkdir(join(directory, vendor), { recursive: true });
    await writeFile(join(directory, 'package.json'), JSON.stringify({ private: true, type: 'module' }));
    await writeFile(join(directory, 'manifest.json'), manifest);
    await writeFile(
      join(directory, vendor, 'index.js'),
      `import { definePlugin } from 'model-gateway/plugin';\nexport default definePlugin({ contract: 1, vendor: '${vendor}', routes: { ${routes} }, models: [${models}]${extra} });\n`,
    );
    return directory;
  }
  const refusal = async (pluginPath: string) => {
    const { code, output } = await startupFailure({
      GATEWAY_PLUGIN_PATH: pluginPath,
      GATEWAY_DATA_DIR: join(outside, 'data'),
    });
    expect(code, output).to.equal(1);
    const lines = output.trim().split('\n');
    expect(lines, output).to.have.length(1);
    return lines[0]!;
  };

  it('an unknown (misspelled) field', async () => {
    const directory = await variant('unknown-field', {
      routes: route.replace("auth: 'bearer'", "auth: 'bearer', defaultHeader: { 'x-v': '1' }"),
    });
    expect(await refusal(directory)).to.equal(
      `model-gateway: cannot start: plugin 'kappa': routes.chat-completions.defaultHeader: unknown field: did you mean 'defaultHeaders'? (in ${join(directory, 'kappa', 'index.js')})`,
    );
  });

  it('a manifest typo', async () => {
    const directory = await variant('manifest-typo', { manifest: '{"plugns": ["kappa"]}' });
    expect(await refusal(directory)).to.equal(
      `model-gateway: cannot start: manifest ${join(directory, 'manifest.json')}: plugns: unknown field: did you mean 'plugins'?`,
    );
  });

  it('a folder the manifest lists that is missing', async () => {
    const directory = await variant('missing-folder', { manifest: '{"plugins": ["kappa", "lambda"]}' });
    expect(await refusal(directory)).to.equal(
      `model-gateway: cannot start: plugin 'lambda': folder: ${join(directory, 'lambda')} does not exist (${join(directory, 'manifest.json')} lists 'lambda': create the folder, or remove the entry)`,
    );
  });

  it("a route whose format is not its key's", async () => {
    const directory = await variant('route-format', {
      routes: route.replace("format: 'chat-completions'", "format: 'messages'"),
    });
    expect(await refusal(directory)).to.equal(
      `model-gateway: cannot start: plugin 'kappa': routes.chat-completions.format: is 'messages', but the route 'chat-completions' speaks 'chat-completions': declare format 'chat-completions', or declare this upstream under routes.messages (in ${join(directory, 'kappa', 'index.js')})`,
    );
  });

  it('an alias colliding with another external plugin', async () => {
    const directory = await variant('alias-collision', {
      extra: ", aliases: [{ id: 'omega-latest', target: 'kappa/kappa-1', routes: ['chat-completions'] }]",
    });
    expect(await refusal(`${OMEGA_DIR}:${directory}`)).to.equal(
      `model-gateway: cannot start: plugin 'kappa': aliases: 'omega-latest' on route chat-completions is already claimed by plugin 'omega' (${join(OMEGA_DIR, 'omega')}) (in ${join(directory, 'kappa')})`,
    );
  });

  it('a price without one of its keys', async () => {
    const directory = await variant('pricing-key', { models: model.replace('cachedInput: 0.1, ', '') });
    expect(await refusal(directory)).to.equal(
      `model-gateway: cannot start: plugin 'kappa': models[0].pricing.cachedInput: missing: USD per 1M tokens (a number >= 0) (in ${join(directory, 'kappa', 'index.js')})`,
    );
  });

  it('a good one starts, logging each plugin with its directory and model count, and warns for a base URL without a key', async () => {
    const directory = await variant('good');
    const gateway = await GatewayProcess.start({
      GATEWAY_PLUGIN_PATH: directory,
      GATEWAY_DATA_DIR: join(outside, 'data-good'),
      KAPPA_BASE_URL: 'http://127.0.0.1:9/v1',
    });
    try {
      const logs = gateway.logs.join('');
      expect(logs).to.contain(`plugin 'kappa' loaded from ${join(directory, 'kappa')}: 1 model(s)`);
      expect(logs).to.contain(`plugin 'alpha' loaded from ${join(ROOT, 'providers', 'alpha')}`);
      expect(logs).to.contain("provider 'kappa' has a base URL but no key: set KAPPA_API_KEY");
    } finally {
      await gateway.stop();
    }
  });
});
