import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { request } from 'undici';
import { startMockUpstream, type MockUpstream } from '../../mock-upstream/mock-upstream-server.ts';
import { runCli } from '../../src/cli/main.ts';
import { COMPILED_MAIN, GatewayProcess } from '../helpers/gateway-process.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const CLIENT_KEY = 'sk-guardrail-package-key-0123456789abcdef01';
const UPSTREAM_KEY = 'guardrail-package-upstream-key';

async function cli(argv: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await runCli(argv, { out: (text) => (out += text), err: (text) => (err += text) }, {});
  return { code, out, err };
}

/**
 * An external guardrail from `plugin new --guardrail` to a running compiled gateway: scaffolded as a
 * plugin package outside the repository, checked by `plugin test`, built to JavaScript (the gateway
 * linked as npm install links its file: devDependency), loaded from GATEWAY_PLUGIN_PATH by
 * `node dist/src/main.js` with no TypeScript and no node_modules left, and enforced on requests, JSON
 * answers and streams as the config file's entries say.
 */
describe('a guardrail plugin package made by plugin new --guardrail, enforced by the compiled gateway', function () {
  this.timeout(120_000);
  let outside: string;
  let plugins: string;
  let upstream: MockUpstream | undefined;
  let gateway: GatewayProcess | undefined;

  before(async () => {
    if (!existsSync(COMPILED_MAIN))
      throw new Error(`${COMPILED_MAIN} is missing: run npm run build first (npm test does)`);
    outside = await mkdtemp(join(tmpdir(), 'gateway-guardrail-package-'));
    plugins = join(outside, 'guards');
  });
  after(async () => {
    await gateway?.kill();
    await upstream?.close();
    await rm(outside, { recursive: true, force: true });
  });

  it('scaffolds a guardrail that passes plugin test untouched, and builds it to dist/', async () => {
    const created = await cli(['plugin', 'new', 'acme-tickets', '--guardrail', '--dir', plugins]);
    expect(created.code, created.err).to.equal(0);
    expect(created.out).to.contain(`Created ${join(plugins, 'acme-tickets')}/ (a guardrail plugin)`);
    const tested = await cli(['plugin', 'test', plugins]);
    expect(tested.out).to.match(/^✔ type check: acme-tickets\n✔ acme-tickets: \d+ checks passed /);
    expect(tested.code).to.equal(0);
    await mkdir(join(plugins, 'node_modules'));
    await symlink(ROOT, join(plugins, 'node_modules', 'model-gateway'), 'dir');
    await promisify(execFile)(process.execPath, ['prepare-dist.mjs'], { cwd: plugins });
    await promisify(execFile)(
      process.execPath,
      [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.json'],
      { cwd: plugins },
    );
    expect((await readdir(join(plugins, 'dist'), { recursive: true })).sort()).to.deep.equal([
      'acme-tickets',
      'acme-tickets/__fixtures__',
      'acme-tickets/__fixtures__/prefix.guardrail.json',
      'acme-tickets/__fixtures__/tickets.guardrail.json',
      'acme-tickets/index.js',
      'manifest.json',
      'package.json',
    ]);
    const built = await cli(['plugin', 'test', join(plugins, 'dist')]);
    expect(built.out).to.match(/^✔ acme-tickets: \d+ checks passed /);
  });

  it('is loaded by node dist/src/main.js from GATEWAY_PLUGIN_PATH and enforced on prompts, answers and streams', async () => {
    await rm(join(plugins, 'node_modules'), { recursive: true, force: true });
    await rm(join(plugins, 'acme-tickets'), { recursive: true, force: true });
    const config = join(outside, 'gateway.yaml');
    await writeFile(
      config,
      [
        'guardrails:',
        "  - { name: tickets-in, use: acme-tickets, on: request, action: redact, replacement: '[TICKET]' }",
        '  - { name: ops-out, use: acme-tickets, on: response, action: block, options: { prefix: OPS } }',
        '',
      ].join('\n'),
    );
    upstream = await startMockUpstream({ apiKey: UPSTREAM_KEY });
    gateway = await GatewayProcess.start(
      {
        GATEWAY_PLUGIN_PATH: join(plugins, 'dist'),
        GATEWAY_CONFIG: config,
        GATEWAY_API_KEYS: CLIENT_KEY,
        GATEWAY_DATA_DIR: join(outside, 'data'),
        DELTA_BASE_URL: upstream.url,
        DELTA_API_KEY: UPSTREAM_KEY,
      },
      'compiled',
    );
    expect(gateway.logs.join('')).to.contain(
      `guardrail plugin 'acme-tickets' loaded from ${join(plugins, 'dist', 'acme-tickets')}`,
    );
    const post = async (content: string, stream = false) => {
      const response = await request(`${gateway!.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${CLIENT_KEY}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'delta/delta-4.7', messages: [{ role: 'user', content }], stream }),
      });
      return { status: response.statusCode, text: await response.body.text() };
    };

    const redacted = await post('Look at TICKET-123456 please');
    expect(redacted.status, redacted.text).to.equal(200);
    expect(upstream.requests.at(-1)!.body.messages[0].content).to.equal('Look at [TICKET] please');

    // The mock upstream repeats the prompt in its answer: the response entry (prefix OPS) refuses it.
    const blocked = await post('Escalate OPS-424242 now');
    expect(blocked.status).to.equal(400);
    expect(JSON.parse(blocked.text).error).to.include({
      code: 'GW_ERR_GUARDRAIL',
      message: "Guardrail 'ops-out' blocked the answer: it holds content this gateway does not let through",
    });
    const stream = await post('Escalate OPS-424242 now', true);
    expect(stream.status).to.equal(200);
    expect(stream.text).not.to.contain('OPS-424242');
    expect(stream.text).to.contain('"code":"GW_ERR_GUARDRAIL"');
    expect(await gateway.stop()).to.equal(0);
    gateway = undefined;
  });
});
