import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { cp, mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import ts from 'typescript';
import { loadPlugins } from '../../src/plugins/load-plugins.ts';
import { ModelRegistry } from '../../src/core/model-registry.ts';
import { PluginLoadError } from '../../src/plugins/validate-plugin.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const OMEGA = join(ROOT, 'test/fixtures/external-plugins/omega');

const declaration = (vendor: string, extra = '') =>
  `{ contract: 1, vendor: '${vendor}', routes: { 'chat-completions': { path: '/chat/completions', format: 'chat-completions', auth: 'bearer' } }, models: [{ id: '${vendor}-1', listed: true, routes: ['chat-completions'], pricing: { input: 1, cachedInput: 0.1, output: 2 } }]${extra} }`;

/** A plugins directory: its manifest and, per vendor, an `index.<ext>` with the given module text. */
async function pluginsDir(
  root: string,
  name: string,
  plugins: Record<string, { file: string; text: string }>,
): Promise<string> {
  const directory = join(root, name);
  await mkdir(directory, { recursive: true });
  await writeFile(join(directory, 'manifest.json'), JSON.stringify({ plugins: Object.keys(plugins) }));
  for (const [vendor, { file, text }] of Object.entries(plugins)) {
    await mkdir(join(directory, vendor));
    await writeFile(join(directory, vendor, file), text);
  }
  return directory;
}

const failure = (promise: Promise<unknown>) =>
  promise.then(
    () => expect.fail('expected a refusal'),
    (error: unknown) => error as Error,
  );

describe('loadPlugins with GATEWAY_PLUGIN_PATH directories', function () {
  this.timeout(30_000);
  let root: string;
  let builtIn: string;
  before(async () => {
    root = await mkdtemp(join(tmpdir(), 'gateway-plugin-path-'));
    builtIn = join(
      await pluginsDir(root, 'built-in', {
        local: { file: 'index.js', text: `export default ${declaration('local')};\n` },
      }),
      'manifest.json',
    );
  });
  after(async () => rm(root, { recursive: true, force: true }));

  it('loads the repository manifest, then each directory in order; compiled JS and TypeScript alike', async () => {
    const first = await pluginsDir(root, 'first', {
      'js-one': { file: 'index.js', text: `export default ${declaration('js-one')};\n` },
      'mjs-two': { file: 'index.mjs', text: `export default ${declaration('mjs-two')};\n` },
    });
    const plugins = await loadPlugins(builtIn, [first, dirname(OMEGA)]);
    expect(plugins.map((plugin) => plugin.vendor)).to.deep.equal(['local', 'js-one', 'mjs-two', 'omega']);
    expect(new ModelRegistry(plugins).catalog.map((entry) => entry.id)).to.deep.equal([
      'local/local-1',
      'js-one/js-one-1',
      'mjs-two/mjs-two-1',
      'omega-latest',
      'omega/omega-1',
    ]);
  });

  it('names the plugin, its directory and the field of a bad external plugin', async () => {
    const bad = await pluginsDir(root, 'bad', {
      acme: {
        file: 'index.js',
        text: `export default ${declaration('acme').replace("path: '/chat/completions'", "path: 'chat'")};\n`,
      },
    });
    const error = await failure(loadPlugins(builtIn, [bad]));
    expect(error).to.be.instanceOf(PluginLoadError);
    expect(error.message).to.equal(
      `plugin 'acme': routes.chat-completions.path: must be a path starting with '/' (in ${join(bad, 'acme', 'index.js')})`,
    );
  });

  it('goes on past a broken plugin: checks every plugin of every directory and refuses with one error carrying every problem', async () => {
    const first = await pluginsDir(root, 'several-broken', {
      acme: {
        file: 'index.js',
        text: `export default ${declaration('acme', ", colour: 'red'").replace("routes: ['chat-completions']", "routes: ['chat-completion']")};\n`,
      },
      fine: { file: 'index.js', text: `export default ${declaration('fine')};\n` },
      boom: { file: 'index.js', text: "throw new Error('no declaration here');\n" },
    });
    const second = await pluginsDir(root, 'more-broken', {
      zed: { file: 'index.mjs', text: `export default ${declaration('zed').replace('contract: 1, ', '')};\n` },
    });
    await writeFile(
      join(second, 'manifest.json'),
      JSON.stringify({ plugins: ['zed', 'Bad_Name', 'zed'], extra: true }),
    );
    const error = await failure(loadPlugins(builtIn, [first, second]));
    expect(error).to.be.instanceOf(PluginLoadError);
    const acme = join(first, 'acme', 'index.js');
    const manifest = join(second, 'manifest.json');
    expect((error as PluginLoadError).problems).to.deep.equal([
      `manifest ${manifest}: extra: unknown field (known: plugins)`,
      `manifest ${manifest}: plugins: 'zed' is listed twice`,
      `manifest ${manifest}: plugins[1]: 'Bad_Name' must be a folder name (lower case letters, digits, dashes)`,
      `plugin 'acme': colour: unknown field (known: contract, vendor, envPrefix, routes, models, aliases, streamFixups, usageExtractors, nativeChat) (in ${acme})`,
      `plugin 'acme': models[0].routes[0]: unknown route 'chat-completion' (known: chat, chat-completions, messages, count-tokens, responses) (in ${acme})`,
      `plugin 'boom': index.js: cannot be loaded: no declaration here (in ${join(first, 'boom', 'index.js')})`,
      `plugin 'zed': contract: missing: declare the contract version the plugin is written for (this gateway supports 1) (in ${join(second, 'zed', 'index.mjs')})`,
    ]);
    expect(error.message).to.equal((error as PluginLoadError).problems.join('; '));
  });

  it('refuses a plugin without a contract version, naming the supported ones', async () => {
    const old = await pluginsDir(root, 'old', {
      legacy: { file: 'index.js', text: `export default ${declaration('legacy').replace('contract: 1, ', '')};\n` },
    });
    const error = await failure(loadPlugins(builtIn, [old]));
    expect(error.message).to.equal(
      `plugin 'legacy': contract: missing: declare the contract version the plugin is written for (this gateway supports 1) (in ${join(old, 'legacy', 'index.js')})`,
    );
  });

  it('refuses a vendor listed by two directories, naming both', async () => {
    const a = await pluginsDir(root, 'twice-a', {
      same: { file: 'index.js', text: `export default ${declaration('same')};\n` },
    });
    const b = await pluginsDir(root, 'twice-b', {
      same: { file: 'index.js', text: `export default ${declaration('same')};\n` },
    });
    const error = await failure(loadPlugins(builtIn, [a, b]));
    expect(error.message).to.equal(
      `plugin 'same': vendor: claimed twice, by ${join(a, 'same')} and ${join(b, 'same')}`,
    );
  });

  it('refuses a model ID claimed by two plugins once the registry is built', async () => {
    const clash = await pluginsDir(root, 'clash', {
      mirror: {
        file: 'index.js',
        text: `export default ${declaration('mirror', ", aliases: [{ id: 'omega-latest', target: 'mirror/mirror-1', routes: ['chat-completions'] }]")};\n`,
      },
    });
    const plugins = await loadPlugins(builtIn, [dirname(OMEGA), clash]);
    expect(() => new ModelRegistry(plugins)).to.throw(
      PluginLoadError,
      `plugin 'mirror': aliases: 'omega-latest' on route chat-completions is already claimed by plugin 'omega' (${join(dirname(OMEGA), 'omega')}) (in ${join(clash, 'mirror')})`,
    );
  });

  it('refuses a GATEWAY_PLUGIN_PATH directory without a manifest, a missing folder and a folder without a module, naming each', async () => {
    expect((await failure(loadPlugins(builtIn, [join(root, 'nowhere')]))).message).to.equal(
      `manifest ${join(root, 'nowhere', 'manifest.json')}: GATEWAY_PLUGIN_PATH: the directory ${join(root, 'nowhere')} does not exist`,
    );
    const empty = join(root, 'empty');
    await mkdir(empty);
    expect((await failure(loadPlugins(builtIn, [empty]))).message).to.equal(
      `manifest ${join(empty, 'manifest.json')}: GATEWAY_PLUGIN_PATH: the directory ${empty} holds no manifest.json`,
    );
    await writeFile(join(empty, 'manifest.json'), JSON.stringify({ plugins: ['hollow'] }));
    expect((await failure(loadPlugins(builtIn, [empty]))).message).to.equal(
      `plugin 'hollow': folder: ${join(empty, 'hollow')} does not exist (${join(empty, 'manifest.json')} lists 'hollow': create the folder, or remove the entry)`,
    );
    await mkdir(join(empty, 'hollow'));
    expect((await failure(loadPlugins(builtIn, [empty]))).message).to.equal(
      `plugin 'hollow': module: the folder holds no plugin module: write index.ts (or compiled index.js / index.mjs) there (in ${join(empty, 'hollow')})`,
    );
  });

  it('refuses a manifest key it does not know, naming the file and the key meant, on one line', async () => {
    const typo = await pluginsDir(root, 'typo', {});
    await writeFile(join(typo, 'manifest.json'), JSON.stringify({ plugns: ['acme'] }));
    expect((await failure(loadPlugins(builtIn, [typo]))).message).to.equal(
      `manifest ${join(typo, 'manifest.json')}: plugns: unknown field: did you mean 'plugins'?`,
    );
    await writeFile(join(typo, 'manifest.json'), '{"plugins": [\n "acme",\n]}');
    expect((await failure(loadPlugins(builtIn, [typo]))).message).to.match(
      new RegExp(`^manifest ${join(typo, 'manifest.json')}: file: cannot be read as JSON: [^\n]+$`),
    );
  });

  it('names a missing plugins list beside an unknown manifest key that is not its misspelling', async () => {
    const other = await pluginsDir(root, 'other-key', {});
    await writeFile(join(other, 'manifest.json'), JSON.stringify({ vendors: ['acme'] }));
    const manifest = join(other, 'manifest.json');
    expect(((await failure(loadPlugins(builtIn, [other]))) as PluginLoadError).problems).to.deep.equal([
      `manifest ${manifest}: vendors: unknown field (known: plugins)`,
      `manifest ${manifest}: plugins: missing: list the plugin folder names, {"plugins": ["<vendor>", ...]}`,
    ]);
  });

  it('resolves model-gateway/plugin for an outside plugin with no node_modules, and says what to fix when it is not an ES module package', async () => {
    const text = `import { definePlugin } from 'model-gateway/plugin';\nexport default definePlugin(${declaration('lost')});\n`;
    const lost = await pluginsDir(root, 'lost', { lost: { file: 'index.js', text } });
    await writeFile(join(lost, 'package.json'), JSON.stringify({ type: 'module' }));
    expect((await loadPlugins(builtIn, [lost])).map((plugin) => plugin.vendor)).to.deep.equal(['local', 'lost']);
    const common = await pluginsDir(root, 'common', {
      common: { file: 'index.ts', text: text.replaceAll('lost', 'common') },
    });
    expect((await failure(loadPlugins(builtIn, [common]))).message).to.contain(
      'plugins are ES modules: give their directory a package.json with {"type": "module"}',
    );
  });

  it('compiled and run on plain node (no tsx preloaded), registers tsx on demand for a TypeScript plugin outside the repository', async () => {
    // The loader as a build would emit it: JavaScript, with its relative imports rewritten to .js.
    const compiled = join(root, 'compiled');
    await mkdir(join(compiled, 'plugins'), { recursive: true });
    await writeFile(join(compiled, 'package.json'), JSON.stringify({ type: 'module' }));
    await symlink(join(ROOT, 'node_modules'), join(compiled, 'node_modules'), 'dir');
    // Every module of src/plugins/ (the loader and what it imports).
    for (const file of (await readdir(join(ROOT, 'src/plugins')))
      .filter((name) => name.endsWith('.ts'))
      .map((name) => name.slice(0, -3))) {
      const source = await readFile(join(ROOT, 'src/plugins', `${file}.ts`), 'utf8');
      const options = {
        module: ts.ModuleKind.ESNext,
        target: ts.ScriptTarget.ES2022,
        rewriteRelativeImportExtensions: true,
        verbatimModuleSyntax: true,
      };
      await writeFile(
        join(compiled, 'plugins', `${file}.js`),
        ts.transpileModule(source, { compilerOptions: options }).outputText,
      );
    }
    // The omega plugin, copied outside the repository, importing the contract as `model-gateway/plugin`.
    const outside = join(root, 'outside');
    await cp(OMEGA, join(outside, 'omega'), { recursive: true });
    await writeFile(join(outside, 'manifest.json'), JSON.stringify({ plugins: ['omega'] }));
    await writeFile(join(outside, 'package.json'), JSON.stringify({ private: true, type: 'module' }));
    // No node_modules there: the loader maps model-gateway/plugin to its own contract.

    const script = `const { loadPlugins } = await import(${JSON.stringify(join(compiled, 'plugins', 'load-plugins.js'))});
const plugins = await loadPlugins(${JSON.stringify(builtIn)}, [${JSON.stringify(outside)}]);
console.log(JSON.stringify(plugins.map((plugin) => [plugin.vendor, plugin.streamFixups?.length ?? 0])));`;
    const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', script], {
      env: { PATH: process.env.PATH },
      cwd: root,
    });
    expect(JSON.parse(stdout)).to.deep.equal([
      ['local', 0],
      ['omega', 1],
    ]);
  });
});
