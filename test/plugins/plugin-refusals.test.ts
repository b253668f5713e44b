import { expect } from 'chai';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runCli } from '../../src/cli/main.ts';
import { GatewayProcess, startupFailure } from '../helpers/gateway-process.ts';
import { writeJavaScriptPlugin } from '../helpers/external-plugin.ts';
import { TEST_KEY } from '../helpers/test-gateway.ts';

/** A compiled plugin declaration of `vendor`: one model on chat-completions and a latest alias to it. */
const declaration = (vendor: string) => ({
  contract: 1,
  vendor,
  routes: { 'chat-completions': { path: '/chat/completions', format: 'chat-completions', auth: 'bearer' } },
  models: [
    {
      id: `${vendor}-1`,
      listed: true,
      routes: ['chat-completions'],
      pricing: { input: 1, cachedInput: 0.1, output: 2 },
    },
  ],
  aliases: [{ id: `${vendor}-latest`, target: `${vendor}/${vendor}-1`, routes: ['chat-completions'] }],
});

/** A plugins directory (for GATEWAY_PLUGIN_PATH): its manifest, in this order, and each vendor's index.js. */
async function pluginsDir(directory: string, plugins: Record<string, string>): Promise<string> {
  await mkdir(directory, { recursive: true });
  await writeFile(join(directory, 'package.json'), JSON.stringify({ private: true, type: 'module' }));
  await writeFile(join(directory, 'manifest.json'), JSON.stringify({ plugins: Object.keys(plugins) }));
  for (const [vendor, text] of Object.entries(plugins)) {
    await mkdir(join(directory, vendor));
    await writeFile(join(directory, vendor, 'index.js'), text);
  }
  return directory;
}

const ROUTES = 'chat, chat-completions, messages, count-tokens, responses';
const PLUGIN_FIELDS = 'contract, vendor, envPrefix, routes, models, aliases, streamFixups, usageExtractors, nativeChat';

/** Two independent mistakes: an unknown top-level field, and a misspelled route id of the model. */
function twoMistakes(vendor: string): string {
  const plugin: Record<string, any> = { ...declaration(vendor), colour: 'red' };
  plugin.models[0].routes = ['chat-completion'];
  return `export default ${JSON.stringify(plugin)};\n`;
}

describe('plugin problems, all reported at once', function () {
  this.timeout(60_000);
  let root: string;
  let config: string;
  beforeEach(async () => {
    root = await mkdtemp(join(tmpdir(), 'gateway-plugin-refusals-'));
    config = join(root, 'gateway.yaml');
    await writeFile(config, '');
  });
  afterEach(async () => rm(root, { recursive: true, force: true }));

  it('start-up refuses a plugin folder with two independent mistakes, naming both, each on its own line, and exits 1', async () => {
    const directory = await pluginsDir(join(root, 'plugins'), { acme: twoMistakes('acme') });
    const file = join(directory, 'acme', 'index.js');
    const { code, output } = await startupFailure({
      GATEWAY_PLUGIN_PATH: directory,
      GATEWAY_CONFIG: config,
      GATEWAY_DATA_DIR: root,
    });
    expect(code).to.equal(1);
    // Nothing else: the alias to the model with the misspelled route is not refused for it as well.
    expect(output).to.equal(
      'model-gateway: cannot start:\n' +
        `  plugin 'acme': colour: unknown field (known: ${PLUGIN_FIELDS}) (in ${file})\n` +
        `  plugin 'acme': models[0].routes[0]: unknown route 'chat-completion' (known: ${ROUTES}) (in ${file})\n`,
    );
  });

  it('start-up refuses two broken plugins of one GATEWAY_PLUGIN_PATH directory, naming both (not the good one between them)', async () => {
    const directory = await pluginsDir(join(root, 'plugins'), {
      acme: twoMistakes('acme'),
      fine: `export default ${JSON.stringify(declaration('fine'))};\n`,
      broken: "throw new Error('the module fails as it is imported');\n",
    });
    const { code, output } = await startupFailure({
      GATEWAY_PLUGIN_PATH: directory,
      GATEWAY_CONFIG: config,
      GATEWAY_DATA_DIR: root,
    });
    expect(code).to.equal(1);
    const lines = output.trimEnd().split('\n');
    expect(lines[0]).to.equal('model-gateway: cannot start:');
    expect(lines.slice(1)).to.deep.equal([
      `  plugin 'acme': colour: unknown field (known: ${PLUGIN_FIELDS}) (in ${join(directory, 'acme', 'index.js')})`,
      `  plugin 'acme': models[0].routes[0]: unknown route 'chat-completion' (known: ${ROUTES}) (in ${join(directory, 'acme', 'index.js')})`,
      `  plugin 'broken': index.js: cannot be loaded: the module fails as it is imported (in ${join(directory, 'broken', 'index.js')})`,
    ]);
  });

  it('config check lists every problem of every plugin, and exits 1', async () => {
    const first = await pluginsDir(join(root, 'first'), { acme: twoMistakes('acme') });
    const second = await pluginsDir(join(root, 'second'), {
      bolt: `export default ${JSON.stringify({ ...declaration('bolt'), vendor: 'volt' })};\n`,
    });
    let out = '';
    let err = '';
    const code = await runCli(
      ['config', 'check', config],
      { out: (text) => (out += text), err: (text) => (err += text) },
      { GATEWAY_PLUGIN_PATH: `${first}:${second}` },
    );
    expect(code).to.equal(1);
    expect(out).to.equal('');
    expect(err.trimEnd().split('\n')).to.deep.equal([
      `${config}: invalid`,
      `  plugin 'acme': colour: unknown field (known: ${PLUGIN_FIELDS}) (in ${join(first, 'acme', 'index.js')})`,
      `  plugin 'acme': models[0].routes[0]: unknown route 'chat-completion' (known: ${ROUTES}) (in ${join(first, 'acme', 'index.js')})`,
      `  plugin 'bolt': vendor: must equal the plugin's folder and manifest name 'bolt', got "volt" (in ${join(second, 'bolt', 'index.js')})`,
    ]);
  });

  it('a valid plugin set still starts, with the outside plugin in its catalog', async () => {
    const directory = join(root, 'good');
    await writeJavaScriptPlugin(directory);
    const gateway = await GatewayProcess.start({
      GATEWAY_PLUGIN_PATH: directory,
      GATEWAY_CONFIG: config,
      GATEWAY_DATA_DIR: root,
      GATEWAY_API_KEYS: TEST_KEY,
    });
    try {
      expect(gateway.logs.join('')).to.contain(`plugin 'sigma' loaded from ${join(directory, 'sigma')}`);
      const models = (await (
        await fetch(`${gateway.url}/v1/models`, { headers: { authorization: `Bearer ${TEST_KEY}` } })
      ).json()) as { data: { id: string }[] };
      expect(models.data.map((model) => model.id)).to.include('sigma/sigma-2');
    } finally {
      expect(await gateway.stop()).to.equal(0);
    }
  });
});
