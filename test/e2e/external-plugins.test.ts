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
    const answer = await client().chat.completions.create({ model: 'omega-latest', messages: [{ role: 'user', content: 'Hello omega' }] });
    expect(answer.choices[0]!.message.content).to.equal('Mock reply to: Hello omega');
    const stream = await client().chat.completions.create({ model: 'omega/omega-1', messages: [{ role: 'user', content: 'Hi' }], stream: true });
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
    const answer = await client().chat.completions.create({ model: 'sigma/sigma-2', messages: [{ role: 'user', content: 'Hello sigma' }] });
    expect(answer.choices[0]!.message.content).to.equal('Mock reply to: Hello sigma');
    expect(upstream.requests.map((sent) => sent.body.model)).to.deep.equal(['sigma-2-2026']);
  });

  it('refuses to start when an external plugin claims a built-in vendor, naming both directories', async () => {
    const clash = join(outside, 'clash');
    await mkdir(join(clash, 'alpha'), { recursive: true });
    await writeFile(join(clash, 'manifest.json'), JSON.stringify({ plugins: ['alpha'] }));
    const { code, output } = await startupFailure({ GATEWAY_PLUGIN_PATH: clash, GATEWAY_DATA_DIR: join(outside, 'data-clash') });
    expect(code).to.equal(1);
    expect(output).to.contain(`cannot start: plugin 'alpha': vendor: claimed twice, by ${join(ROOT, 'providers', 'alpha')} and ${join(clash, 'alpha')}`);
  });
});
