import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import OpenAI from 'openai';
import { startMockUpstream, type MockUpstream } from '../../mock-upstream/mock-upstream-server.ts';
import { COMPILED_MAIN, GatewayProcess } from '../helpers/gateway-process.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const CLIENT_KEY = 'sk-plugin-package-key-0123456789abcdef0123';
const UPSTREAM_KEY = 'plugin-package-upstream-key';

/** Runs a command to its end; its output is in the error when it fails. */
async function run(file: string, args: string[], cwd: string): Promise<string> {
  try {
    const { stdout } = await promisify(execFile)(file, args, {
      cwd,
      env: { ...process.env, npm_config_update_notifier: 'false' },
      maxBuffer: 16 * 1024 * 1024,
    });
    return stdout;
  } catch (error) {
    const { stdout, stderr } = error as { stdout?: string; stderr?: string };
    throw new Error(`${file} ${args.join(' ')} failed in ${cwd}:\n${stdout ?? ''}${stderr ?? ''}`);
  }
}

/** What git reports changed in the gateway's checkout (without taking git's index lock). */
const checkoutStatus = () =>
  run('git', ['--no-optional-locks', 'status', '--porcelain', '--untracked-files=all'], ROOT);

/** Every file under a directory, relative to it. */
const filesUnder = async (directory: string) =>
  (await readdir(directory, { recursive: true, withFileTypes: true }))
    .filter((entry) => entry.isFile())
    .map((entry) => join(entry.parentPath, entry.name).slice(directory.length + 1))
    .sort();

/**
 * An operator's way from `plugin new` to production, with real processes: the scaffold, as an npm package
 * outside the repository, installs the gateway from its `npm pack` tarball (from npm's cache where it
 * can, --prefer-offline: typescript and the gateway's dependencies are there once the repository itself
 * is installed; the registry for any package document the cache lacks), type-checks and builds to dist/;
 * the compiled gateway then serves its vendors from dist/ alone, with no TypeScript anywhere in the
 * package and no node_modules, and the gateway's checkout is left as it was.
 */
describe('a plugin package made by plugin new: npm install, typecheck, build, served by the compiled gateway', function () {
  this.timeout(240_000);
  let outside: string;
  let plugins: string;
  let statusBefore: string;
  let upstream: MockUpstream | undefined;
  let gateway: GatewayProcess | undefined;

  before(async () => {
    if (!existsSync(COMPILED_MAIN))
      throw new Error(`${COMPILED_MAIN} is missing: run npm run build first (npm test does)`);
    statusBefore = await checkoutStatus();
    outside = await mkdtemp(join(tmpdir(), 'gateway-plugin-package-'));
    plugins = join(outside, 'acme-plugins');
  });
  after(async () => {
    await gateway?.kill();
    await upstream?.close();
    await rm(outside, { recursive: true, force: true });
  });

  it('scaffolds a package that installs the gateway from its tarball, type-checks and builds dist/ as JavaScript', async () => {
    await mkdir(join(outside, 'pack'));
    const [packed] = JSON.parse(
      await run('npm', ['pack', '--json', '--pack-destination', join(outside, 'pack')], ROOT),
    ) as { filename: string }[];
    const tarball = join(outside, 'pack', packed!.filename);

    const gatewayCli = join(ROOT, 'bin', 'model-gateway.js');
    const created = await run(process.execPath, [gatewayCli, 'plugin', 'new', 'acme', '--dir', plugins], outside);
    expect(created).to.contain(`Run the gateway with GATEWAY_PLUGIN_PATH=${join(plugins, 'dist')}`);
    await run(
      process.execPath,
      [gatewayCli, 'plugin', 'new', 'kestrel', '--format', 'messages', '--dir', plugins],
      outside,
    );
    const tsconfig = await readFile(join(plugins, 'tsconfig.json'), 'utf8');
    expect(tsconfig).not.to.contain(ROOT.replace(/\/$/, '')).and.not.to.contain('"paths"');

    // As an operator would: npm install <gateway>, which stays a devDependency beside typescript.
    await run('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', tarball], plugins);
    const manifest = JSON.parse(await readFile(join(plugins, 'package.json'), 'utf8')) as {
      dependencies?: object;
      peerDependencies?: object;
      devDependencies: Record<string, string>;
    };
    expect(manifest.devDependencies['model-gateway'])
      .to.match(/^file:.*\.tgz$/)
      .and.to.contain(packed!.filename);
    expect(manifest.devDependencies).to.have.property('typescript');
    expect(manifest).not.to.have.property('dependencies');
    expect(manifest).not.to.have.property('peerDependencies');
    await run('npm', ['run', 'typecheck'], plugins);
    await run('npm', ['run', 'build'], plugins);

    expect(await filesUnder(join(plugins, 'dist'))).to.deep.equal([
      'acme/__fixtures__/chat-completions-stream.chunks.txt',
      'acme/__fixtures__/chat-completions-stream.fixture.json',
      'acme/index.js',
      'kestrel/__fixtures__/messages-stream.chunks.txt',
      'kestrel/__fixtures__/messages-stream.fixture.json',
      'kestrel/index.js',
      'manifest.json',
      'package.json',
    ]);
    expect(JSON.parse(await readFile(join(plugins, 'dist', 'manifest.json'), 'utf8'))).to.deep.equal({
      plugins: ['acme', 'kestrel'],
    });
    // The compiler wrote only into dist/: nothing beside the sources, nothing beside the installed contract.
    expect(
      (await filesUnder(plugins)).filter(
        (file) => file.endsWith('.js') && !file.startsWith('dist/') && !file.startsWith('node_modules/'),
      ),
    ).to.deep.equal([]);
    expect(existsSync(join(plugins, 'node_modules', 'model-gateway', 'src', 'plugins', 'plugin-contract.js'))).to.equal(
      false,
    );
    // What npm publish would ship: dist/ and package.json.
    const [pack] = JSON.parse(await run('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], plugins)) as {
      files: { path: string }[];
    }[];
    expect(pack!.files.map((file) => file.path).filter((path) => !path.startsWith('dist/'))).to.deep.equal([
      'package.json',
    ]);
  });

  it('serves its vendors from dist/ with the compiled gateway, once every .ts file and node_modules are gone', async () => {
    await rm(join(plugins, 'node_modules'), { recursive: true, force: true });
    for (const file of await filesUnder(plugins)) if (/\.[cm]?ts$/.test(file)) await rm(join(plugins, file));
    expect((await filesUnder(plugins)).filter((file) => /\.[cm]?ts$/.test(file))).to.deep.equal([]);

    upstream = await startMockUpstream({ apiKey: UPSTREAM_KEY });
    gateway = await GatewayProcess.start(
      {
        GATEWAY_PLUGIN_PATH: join(plugins, 'dist'),
        GATEWAY_API_KEYS: CLIENT_KEY,
        GATEWAY_DATA_DIR: join(outside, 'data'),
        ACME_BASE_URL: upstream.url,
        ACME_API_KEY: UPSTREAM_KEY,
        KESTREL_BASE_URL: upstream.url,
        KESTREL_API_KEY: UPSTREAM_KEY,
      },
      'compiled',
    );
    expect(gateway.logs.join('')).to.contain(`plugin 'acme' loaded from ${join(plugins, 'dist', 'acme')}`);

    const client = new OpenAI({ baseURL: `${gateway.url}/v1`, apiKey: CLIENT_KEY, maxRetries: 0 });
    const ids: string[] = [];
    for await (const model of client.models.list()) ids.push(model.id);
    expect(ids.slice(-4)).to.deep.equal(['acme-latest', 'acme/acme-1', 'kestrel-latest', 'kestrel/kestrel-1']);
    const answer = await client.chat.completions.create({
      model: 'acme-latest',
      messages: [{ role: 'user', content: 'Hello acme' }],
    });
    expect(answer.choices[0]!.message.content).to.equal('Mock reply to: Hello acme');
    const chat = await fetch(`${gateway.url}/v1/chat`, {
      method: 'POST',
      headers: { authorization: `Bearer ${CLIENT_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'acme/acme-1', input: 'Native hello' }),
    });
    expect(((await chat.json()) as { result: { text: string } }).result.text).to.equal('Mock reply to: Native hello');
    const messages = await fetch(`${gateway.url}/v1/messages`, {
      method: 'POST',
      headers: { 'x-api-key': CLIENT_KEY, 'content-type': 'application/json', 'anthropic-version': '2023-06-01' },
      body: JSON.stringify({
        model: 'kestrel-1',
        max_tokens: 16,
        messages: [{ role: 'user', content: 'Hello kestrel' }],
      }),
    });
    expect(messages.status).to.equal(200);
    expect(((await messages.json()) as { content: { text: string }[] }).content[0]!.text).to.equal(
      'Mock reply to: Hello kestrel',
    );
    expect(upstream.requests.map((sent) => [sent.path, sent.body.model])).to.deep.equal([
      ['/v1/chat/completions', 'acme-1'],
      ['/v1/chat/completions', 'acme-1'],
      ['/v1/messages', 'kestrel-1'],
    ]);
    expect(await gateway.stop()).to.equal(0);
  });

  it("leaves the gateway's checkout as it was (git status)", async () => {
    const lines = (status: string) => status.split('\n').filter(Boolean);
    const after = lines(await checkoutStatus());
    expect(
      after.filter((line) => !lines(statusBefore).includes(line)),
      'entries git status shows now and did not before',
    ).to.deep.equal([]);
    expect(
      lines(statusBefore).filter((line) => !after.includes(line)),
      'entries git status showed before and does not now',
    ).to.deep.equal([]);
    expect(existsSync(join(ROOT, 'src', 'plugins', 'plugin-contract.js'))).to.equal(false);
  });
});
