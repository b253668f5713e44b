import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { copyFile, mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { runCli } from '../../src/cli/main.ts';
import { ScriptedUpstream } from '../helpers/scripted-upstream.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

async function cli(argv: string[], env: NodeJS.ProcessEnv = {}): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await runCli(argv, { out: (text) => (out += text), err: (text) => (err += text) }, env);
  return { code, out, err };
}

const manifestOf = async (directory: string) =>
  (JSON.parse(await readFile(join(directory, 'manifest.json'), 'utf8')) as { plugins: string[] }).plugins;

describe('CLI: plugin new and plugin test', function () {
  this.timeout(60_000);
  let root: string;
  beforeEach(async () => (root = await mkdtemp(join(tmpdir(), 'gateway-plugin-cli-'))));
  afterEach(async () => rm(root, { recursive: true, force: true }));

  it('scaffolds a working plugin of each format outside the repository, which passes the conformance suite untouched', async () => {
    const plugins = join(root, 'plugins');
    for (const format of ['chat-completions', 'messages', 'responses']) {
      const created = await cli([
        'plugin',
        'new',
        `acme-${format.split('-')[0]}`,
        '--format',
        format,
        '--dir',
        plugins,
      ]);
      expect(created.code, created.err).to.equal(0);
      expect(created.out).to.contain(`Created ${join(plugins, `acme-${format.split('-')[0]}`)}/ (${format})`);
    }
    expect(await manifestOf(plugins)).to.deep.equal(['acme-chat', 'acme-messages', 'acme-responses']);
    expect((await readdir(join(plugins, 'acme-chat'), { recursive: true })).sort()).to.deep.equal([
      '__fixtures__',
      '__fixtures__/chat-completions-stream.chunks.txt',
      '__fixtures__/chat-completions-stream.fixture.json',
      'index.ts',
    ]);
    // A plugin package: built to dist/ against the installed gateway's contract, with no path into this checkout.
    const gatewayTypeScript = (
      JSON.parse(await readFile(join(ROOT, 'package.json'), 'utf8')) as { devDependencies: Record<string, string> }
    ).devDependencies.typescript;
    expect(JSON.parse(await readFile(join(plugins, 'package.json'), 'utf8'))).to.deep.include({
      name: 'plugins',
      private: true,
      type: 'module',
      files: ['dist'],
      scripts: {
        typecheck: 'tsc -p tsconfig.json --noEmit',
        build: 'node prepare-dist.mjs && tsc -p tsconfig.json',
        prepack: 'npm run build',
      },
      devDependencies: { 'model-gateway': `file:${relative(plugins, ROOT)}`, typescript: gatewayTypeScript },
    });
    const tsconfigText = await readFile(join(plugins, 'tsconfig.json'), 'utf8');
    expect(tsconfigText).not.to.contain(ROOT.replace(/\/$/, ''));
    const tsconfig = JSON.parse(tsconfigText) as { compilerOptions: Record<string, unknown> };
    expect(tsconfig.compilerOptions)
      .to.deep.include({ strict: true, rootDir: '.', outDir: 'dist', noEmitOnError: true })
      .and.not.to.have.property('paths');
    expect(tsconfig.compilerOptions).not.to.have.property('noEmit');
    expect(await readFile(join(plugins, '.gitignore'), 'utf8')).to.equal('node_modules/\ndist/\n*.tgz\n');
    // npm run build, once npm install has linked the gateway (its file: devDependency) and typescript (the gateway's
    // here).
    await mkdir(join(plugins, 'node_modules'));
    await symlink(ROOT, join(plugins, 'node_modules', 'model-gateway'), 'dir');
    await promisify(execFile)(process.execPath, ['prepare-dist.mjs'], { cwd: plugins });
    await promisify(execFile)(
      process.execPath,
      [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.json'],
      { cwd: plugins },
    );
    expect((await readdir(join(plugins, 'dist'), { recursive: true })).sort()).to.deep.equal([
      'acme-chat',
      'acme-chat/__fixtures__',
      'acme-chat/__fixtures__/chat-completions-stream.chunks.txt',
      'acme-chat/__fixtures__/chat-completions-stream.fixture.json',
      'acme-chat/index.js',
      'acme-messages',
      'acme-messages/__fixtures__',
      'acme-messages/__fixtures__/messages-stream.chunks.txt',
      'acme-messages/__fixtures__/messages-stream.fixture.json',
      'acme-messages/index.js',
      'acme-responses',
      'acme-responses/__fixtures__',
      'acme-responses/__fixtures__/responses-stream.chunks.txt',
      'acme-responses/__fixtures__/responses-stream.fixture.json',
      'acme-responses/index.js',
      'manifest.json',
      'package.json',
    ]);
    expect(JSON.parse(await readFile(join(plugins, 'dist', 'package.json'), 'utf8'))).to.deep.equal({ type: 'module' });
    // The contract came through npm's symlink into this checkout, as a package: the compiler emitted nothing there.
    expect(existsSync(join(ROOT, 'src', 'plugins', 'plugin-contract.js'))).to.equal(false);
    const compiled = await cli(['plugin', 'test', join(plugins, 'dist')]);
    expect(compiled.out).to.match(
      /^✔ acme-chat: 8 checks passed .*\n✔ acme-messages: 10 checks passed .*\n✔ acme-responses: 10 checks passed .*\n$/,
    );
    const index = await readFile(join(plugins, 'acme-messages', 'index.ts'), 'utf8');
    expect(index).to.contain("import { definePlugin } from 'model-gateway/plugin';").and.to.contain('contract: 1,');
    expect(index).to.contain("aliases: [{ id: 'acme-messages-latest', target: 'acme-messages/acme-messages-1'");

    // As an author outside the repository would, with no install step: the gateway maps model-gateway/plugin itself.
    const tested = await cli(['plugin', 'test', plugins]);
    expect(tested.out).to.match(
      /^✔ type check: acme-chat, acme-messages, acme-responses\n✔ acme-chat: 8 checks passed .*\n✔ acme-messages: 10 checks passed .*\n✔ acme-responses: 10 checks passed .*\n$/,
    );
    expect(tested.code).to.equal(0);
    const single = await cli(['plugin', 'test', join(plugins, 'acme-responses')]);
    expect(single.out).to.match(/^✔ type check: acme-responses\n✔ acme-responses: 10 checks passed/);
    // A misspelled field fails the type check first, naming the file, the line and the field.
    const chatIndex = join(plugins, 'acme-chat', 'index.ts');
    await writeFile(
      chatIndex,
      (await readFile(chatIndex, 'utf8')).replace(
        "auth: 'bearer' }",
        "auth: 'bearer', defaultHeader: { 'x-v': '1' } }",
      ),
    );
    const typo = await cli(['plugin', 'test', join(plugins, 'acme-chat')]);
    expect(typo.code).to.equal(1);
    expect(typo.out).to.match(
      new RegExp(
        `^✘ type check: 1 error\\(s\\)\\n {4}${chatIndex.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\(\\d+,\\d+\\): .*unknown field 'defaultHeader'`,
      ),
    );
  });

  it("scaffolds a guardrail plugin (--guardrail) that plugin test checks on its examples, and names a broken one's rule", async () => {
    const plugins = join(root, 'guards');
    const created = await cli(['plugin', 'new', 'acme-tickets', '--guardrail', '--dir', plugins]);
    expect(created.code, created.err).to.equal(0);
    expect(created.out).to.contain(
      'Turn it on in the config file: guardrails: [{ name: acme-tickets, use: acme-tickets, on: both, action: block }]',
    );
    expect(await manifestOf(plugins)).to.deep.equal(['acme-tickets']);
    expect((await readdir(join(plugins, 'acme-tickets'), { recursive: true })).sort()).to.deep.equal([
      '__fixtures__',
      '__fixtures__/prefix.guardrail.json',
      '__fixtures__/tickets.guardrail.json',
      'index.ts',
    ]);
    expect(await readFile(join(plugins, 'acme-tickets', 'index.ts'), 'utf8'))
      .to.contain("import { defineGuardrail, type GuardrailFinding } from 'model-gateway/plugin';")
      .and.to.contain("guardrail: 'acme-tickets',");
    const tested = await cli(['plugin', 'test', join(plugins, 'acme-tickets')]);
    expect(tested.out).to.match(/^✔ type check: acme-tickets\n✔ acme-tickets: \d+ checks passed /);
    expect(tested.code).to.equal(0);

    // Another one (a module once imported stays as it was in this process), with an example that says
    // otherwise and a window too short for what scan finds.
    expect((await cli(['plugin', 'new', 'acme-broken', '--guardrail', '--dir', plugins])).code).to.equal(0);
    const fixture = join(plugins, 'acme-broken', '__fixtures__', 'tickets.guardrail.json');
    await writeFile(fixture, JSON.stringify({ examples: [{ text: 'See TICKET-123456.', finds: [] }] }));
    const index = join(plugins, 'acme-broken', 'index.ts');
    await writeFile(
      index,
      (await readFile(index, 'utf8')).replace('maxFindingChars: MAX_PREFIX + 7,', 'maxFindingChars: 4,'),
    );
    const broken = await cli(['plugin', 'test', join(plugins, 'acme-broken')]);
    expect(broken.code).to.equal(1);
    expect(broken.out).to.contain(
      `plugin 'acme-broken', rule 'finds': fixture 'tickets', example 1 (request): scan found ["TICKET-123456"], the example says []`,
    );
    expect(broken.out).to.match(
      /plugin 'acme-broken', rule 'stream': fixture 'prefix', example 1: cut into .*, a stream let the finding through; maxFindingChars \(4\) must be at least the longest finding \(10 characters\)/,
    );
    expect(
      await cli(['plugin', 'new', 'other', '--guardrail', '--format', 'messages', '--dir', plugins]),
    ).to.deep.include({ code: 2 });
  });

  it('writes beside the gateway manifest by default, importing the contract by path only in the repository providers/', async () => {
    const plugins = join(root, 'providers');
    await mkdir(plugins);
    await copyFile(join(ROOT, 'providers', 'manifest.json'), join(plugins, 'manifest.json'));
    const created = await cli(['plugin', 'new', 'kappa'], { GATEWAY_MANIFEST: join(plugins, 'manifest.json') });
    expect(created.code, created.err).to.equal(0);
    expect(await manifestOf(plugins)).to.deep.equal(['alpha', 'beta', 'gamma', 'delta', 'epsilon', 'zeta', 'kappa']);
    expect(await readFile(join(plugins, 'kappa', 'index.ts'), 'utf8')).to.contain("from 'model-gateway/plugin'");
  });

  it('leaves an existing package.json, or tsconfig.json, of the plugins directory as it is', async () => {
    const plugins = join(root, 'mine');
    await mkdir(plugins);
    await writeFile(join(plugins, 'package.json'), '{"name": "mine", "type": "module"}\n');
    const created = await cli(['plugin', 'new', 'acme', '--dir', plugins]);
    expect(created.code, created.err).to.equal(0);
    expect(created.out).to.contain(`Run the gateway with GATEWAY_PLUGIN_PATH=${plugins}\n`);
    expect(created.out).not.to.contain('Wrote ').and.not.to.contain('npm run build');
    expect((await readdir(plugins)).sort()).to.deep.equal(['acme', 'manifest.json', 'package.json']);
    expect(await readFile(join(plugins, 'package.json'), 'utf8')).to.equal('{"name": "mine", "type": "module"}\n');
    // A tsconfig.json of its own is kept, with a word on what the build needs of it.
    const other = join(root, 'other');
    await mkdir(other);
    await writeFile(join(other, 'tsconfig.json'), '{}\n');
    const kept = await cli(['plugin', 'new', 'acme', '--dir', other]);
    expect(kept.out).to.contain(`Wrote package.json, prepare-dist.mjs, .gitignore in ${other}: a plugin package`);
    expect(kept.out).to.contain(`Kept ${join(other, 'tsconfig.json')}: npm run build needs it to compile to dist/`);
    expect(await readFile(join(other, 'tsconfig.json'), 'utf8')).to.equal('{}\n');
  });

  it('refuses an existing vendor or an invalid name with a clear message, and bad usage', async () => {
    const plugins = join(root, 'plugins');
    expect((await cli(['plugin', 'new', 'acme', '--dir', plugins])).code).to.equal(0);
    expect(await cli(['plugin', 'new', 'acme', '--dir', plugins])).to.deep.include({
      code: 1,
      err: `Vendor 'acme' exists already: ${join(plugins, 'manifest.json')} lists it. Pick another name.\n`,
    });
    expect(await cli(['plugin', 'new', 'beta', '--dir', plugins])).to.deep.include({
      code: 1,
      err: `Vendor 'beta' exists already: ${join(ROOT, 'providers', 'manifest.json')} lists it. Pick another name.\n`,
    });
    await mkdir(join(plugins, 'orphan'));
    expect((await cli(['plugin', 'new', 'orphan', '--dir', plugins])).err).to.equal(
      `Vendor 'orphan' exists already: ${join(plugins, 'orphan')} is there. Pick another name or remove the folder.\n`,
    );
    for (const name of ['Acme', '1acme', 'acme--x', 'acme-', 'ac_me', 'acme/x']) {
      const refused = await cli(['plugin', 'new', name, '--dir', plugins]);
      expect(refused.code, name).to.equal(1);
      expect(refused.err, name).to.equal(
        `Invalid vendor name '${name}': use lower case letters, digits and single dashes, starting with a letter (e.g. acme or acme-cloud).\n`,
      );
    }
    expect(await manifestOf(plugins)).to.deep.equal(['acme']);
    const badFormat = await cli(['plugin', 'new', 'zulu', '--format', 'grpc', '--dir', plugins]);
    expect(badFormat.code).to.equal(2);
    expect(badFormat.err).to.match(
      /^--format must be one of chat-completions, messages, responses, got 'grpc'\.\n\nUsage:\n  plugin new VENDOR/,
    );
    expect((await cli(['plugin', 'launch'])).code).to.equal(2);
    expect((await cli(['plugin', 'test', root])).err).to.equal(
      `${root} holds neither a manifest.json nor a plugin (index.js, index.mjs, index.ts).\n`,
    );
  });

  it('prints usage for --help on every command and subcommand, exit 0', async () => {
    for (const argv of [
      ['--help'],
      ['help'],
      ['plugin', '--help'],
      ['plugin', 'new', '--help'],
      ['plugin', 'test', '-h'],
      ['keys', '--help'],
      ['usage', '--help'],
      ['config', '--help'],
    ]) {
      const help = await cli(argv);
      expect(help.code, argv.join(' ')).to.equal(0);
      expect(help.err, argv.join(' ')).to.equal('');
      expect(help.out, argv.join(' ')).to.match(/Usage:|model-gateway/);
    }
    expect((await cli(['plugin', 'new', '--help'])).out).to.match(
      /^Usage:\n {2}plugin new VENDOR [^\n]*\n {2}plugin new NAME --guardrail [^\n]*\n$/,
    );
  });

  it('tests a plugin beside the GATEWAY_PLUGIN_PATH plugins: an alias colliding with one of them fails, naming both directories', async () => {
    const mine = join(root, 'mine');
    expect((await cli(['plugin', 'new', 'mirror', '--dir', mine])).code).to.equal(0);
    const index = join(mine, 'mirror', 'index.ts');
    await writeFile(index, (await readFile(index, 'utf8')).replace("id: 'mirror-latest'", "id: 'omega-latest'"));
    const alone = await cli(['plugin', 'test', mine]);
    expect(alone.code, alone.out).to.equal(0);
    const external = join(ROOT, 'test/fixtures/external-plugins');
    const beside = await cli(['plugin', 'test', mine], { GATEWAY_PLUGIN_PATH: external });
    expect(beside.code).to.equal(1);
    expect(beside.out).to.equal(
      `✔ type check: mirror\n✘ mirror: 1 failure(s) in 0 checks (${join(mine, 'mirror')})\n` +
        `    plugin 'mirror', rule 'load': plugin 'mirror': aliases: 'omega-latest' on route chat is already claimed by plugin 'omega' (${join(external, 'omega')}) (in ${join(mine, 'mirror')})\n`,
    );
  });

  it('runs as a real process: exit 1 and the failures of a broken plugin, exit 0 for the external fixture', async () => {
    const run = (dir: string) =>
      promisify(execFile)(process.execPath, ['bin/model-gateway.js', 'plugin', 'test', dir], {
        cwd: ROOT,
        env: { PATH: process.env.PATH },
      }).then(
        ({ stdout }) => ({ code: 0, stdout }),
        (error: { code: number; stdout: string }) => ({ code: error.code, stdout: error.stdout }),
      );
    const broken = await run('test/fixtures/broken-plugins');
    expect(broken.code).to.equal(1);
    expect(broken.stdout).to.contain('✘ broken: 4 failure(s) in 11 checks');
    expect(broken.stdout).to.contain(
      "    plugin 'broken', model 'broken/broken-fast', rule 'upstream-path': responses with 'broken/broken-fast'",
    );
    const external = await run('test/fixtures/external-plugins/omega');
    expect(external).to.deep.include({ code: 0 });
    expect(external.stdout).to.match(/^✔ type check: omega\n✔ omega: 9 checks passed/);
  });
});

describe('CLI: plugin test --upstream against a live vendor', function () {
  this.timeout(60_000);
  const KEY = 'live-vendor-key-0123456789';
  let root: string;
  let vendor: ScriptedUpstream;
  before(async () => {
    root = await mkdtemp(join(tmpdir(), 'gateway-plugin-live-'));
    // A vendor that serves Chat Completions (key in x-live-key) and a Messages path that answers in another shape, and
    // nothing else.
    vendor = await ScriptedUpstream.start();
    vendor.script = (req, res) => {
      const json = (status: number, body: unknown) =>
        res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
      if (req.url === '/v1/chat/completions')
        return req.headers['x-live-key'] === KEY
          ? json(200, { id: 'x', choices: [] })
          : json(401, { error: `bad key ${String(req.headers['x-live-key'])}` });
      if (req.url === '/v1/messages') return json(200, { choices: [] });
      return json(404, { error: 'no such path' });
    };
    const plugins = join(root, 'plugins');
    await mkdir(join(plugins, 'livetest'), { recursive: true });
    await writeFile(join(plugins, 'package.json'), JSON.stringify({ private: true, type: 'module' }));
    await writeFile(join(plugins, 'manifest.json'), JSON.stringify({ plugins: ['livetest'] }));
    await writeFile(
      join(plugins, 'livetest', 'index.js'),
      `import { definePlugin } from 'model-gateway/plugin';
export default definePlugin({
  contract: 1,
  vendor: 'livetest',
  routes: {
    'chat-completions': { path: '/chat/completions', format: 'chat-completions', auth: { header: 'x-live-key' } },
    responses: { path: '/responses', format: 'responses', auth: { header: 'x-live-key' } },
    messages: { path: '/messages', format: 'messages', auth: { header: 'x-live-key' } },
  },
  models: [{ id: 'live-1', upstreamModel: 'live-1-2026', listed: true, routes: ['chat-completions', 'responses', 'messages'], pricing: { input: 1, cachedInput: 0.1, output: 2 } }],
});
`,
    );
  });
  after(async () => {
    await vendor?.close();
    await rm(root, { recursive: true, force: true });
  });

  it('sends one minimal request per declared route with the declared credential, and names each path, auth and format mismatch', async () => {
    const run = await cli(['plugin', 'test', join(root, 'plugins'), '--upstream', vendor.url, '--key', KEY]);
    expect(run.code).to.equal(1);
    expect(run.out).to.contain(
      "✔ live livetest, route 'chat-completions' (/chat/completions): 200, a chat-completions answer",
    );
    expect(run.out).to.contain("✘ live livetest, route 'responses' (/responses): path mismatch: 404 on /responses");
    expect(run.out).to.contain(
      "✘ live livetest, route 'messages' (/messages): format mismatch: 200, but the answer is not shaped as messages",
    );
    const sent = vendor.requests.find((request) => request.path === '/v1/chat/completions')!;
    expect(sent.headers['x-live-key']).to.equal(KEY);
    expect(sent.headers).not.to.have.property('authorization');
    expect(JSON.parse(sent.body)).to.deep.include({ model: 'live-1-2026' });

    const wrongKey = await cli([
      'plugin',
      'test',
      join(root, 'plugins'),
      '--upstream',
      vendor.url,
      '--key',
      'not-the-key-0000',
    ]);
    expect(wrongKey.out).to.contain(
      "✘ live livetest, route 'chat-completions' (/chat/completions): auth mismatch: 401",
    );
    expect(wrongKey.out).not.to.contain('not-the-key-0000');
    expect(run.out).not.to.contain(KEY);
  });

  it('refuses --upstream without --key', async () => {
    const run = await cli(['plugin', 'test', join(root, 'plugins'), '--upstream', vendor.url]);
    expect(run.code).to.equal(2);
    expect(run.err).to.contain('--upstream and --key go together');
  });
});
