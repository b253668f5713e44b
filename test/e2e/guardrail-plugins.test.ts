import { expect } from 'chai';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { request } from 'undici';
import { ConfigError } from '../../src/config/gateway-config.ts';
import { startTestGateway, TEST_KEY, type TestGateway } from '../helpers/test-gateway.ts';

/**
 * A guardrail plugin (JavaScript, importing the contract by package name) that finds `forbidden`, throws on `boom` and
 * answers nonsense on `nonsense`.
 */
const FLAKY = `import { defineGuardrail } from 'model-gateway/plugin';
export default defineGuardrail({
  contract: 1,
  guardrail: 'flaky',
  maxFindingChars: 9,
  checkOptions: (options) => (options.mood === undefined || options.mood === 'calm' ? [] : ['mood must be calm']),
  scan: (text) => {
    if (text.includes('boom')) throw new Error('the scanner exploded');
    if (text.includes('nonsense')) return [{ start: 0, end: text.length + 5 }];
    const at = text.indexOf('forbidden');
    return at === -1 ? [] : [{ start: at, end: at + 9 }];
  },
});
`;

describe('guardrail plugins in a gateway: enforced, their faults attributed, their options checked at start and reload', function () {
  this.timeout(60_000);
  let dir: string;
  let configFile: string;
  let test: TestGateway;
  const logs: string[] = [];

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'gateway-guardrail-plugins-'));
    await mkdir(join(dir, 'plugins', 'flaky'), { recursive: true });
    await writeFile(join(dir, 'plugins', 'package.json'), JSON.stringify({ private: true, type: 'module' }));
    await writeFile(join(dir, 'plugins', 'manifest.json'), JSON.stringify({ plugins: ['flaky'] }));
    await writeFile(join(dir, 'plugins', 'flaky', 'index.js'), FLAKY);
    configFile = join(dir, 'gateway.yaml');
    await writeFile(
      configFile,
      'logLevel: info\nguardrails:\n  - { name: flaky-both, use: flaky, on: both, action: block, options: { mood: calm } }\n',
    );
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        logs.push(chunk.toString());
        done();
      },
    });
    test = await startTestGateway({ configFile, logTo: sink, env: { GATEWAY_PLUGIN_PATH: join(dir, 'plugins') } });
  });
  after(async () => {
    await test?.close();
    await rm(dir, { recursive: true, force: true });
  });

  const post = async (content: string, stream = false) => {
    const response = await request(`${test.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TEST_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'delta/delta-4.7', messages: [{ role: 'user', content }], stream }),
    });
    return { status: response.statusCode, text: await response.body.text() };
  };

  it('logs where the guardrail plugin came from, and enforces it', async () => {
    expect(logs.join('')).to.contain(`guardrail plugin 'flaky' loaded from ${join(dir, 'plugins', 'flaky')}`);
    const blocked = await post('this is forbidden');
    expect(blocked.status).to.equal(400);
    expect(JSON.parse(blocked.text).error).to.include({ code: 'GW_ERR_GUARDRAIL' });
    expect(test.upstreams.delta.requests).to.have.length(0);
    expect((await post('this is fine')).status).to.equal(200);
  });

  it("answers a scan that throws or returns nonsense as the plugin's fault (502 before anything went upstream), logged and counted", async () => {
    for (const [content, told] of [
      ['boom', 'the scanner exploded'],
      ['nonsense', 'returned a finding'],
    ] as const) {
      const answer = await post(content);
      expect(answer.status, content).to.equal(502);
      expect(JSON.parse(answer.text).error).to.include({
        code: 'GW_ERR_PLUGIN_FAULT',
        message:
          "Gateway plugin 'flaky' failed in its hook 'scan' (a fault of this gateway's plugin, not of the upstream provider)",
      });
      const line = logs
        .join('')
        .split('\n')
        .find((entry) => entry.includes("gateway plugin 'flaky' failed in its hook 'scan'") && entry.includes(told));
      expect(line, told).to.be.a('string');
    }
    const metrics = await (await request(`${test.url}/metrics`)).body.text();
    expect(metrics).to.match(/^gateway_plugin_errors_total\{plugin="flaky",hook="scan"\} 2$/m);
  });

  it('ends a stream in band when the scan fails on the answer (the mock repeats the prompt in it)', async () => {
    await writeFile(
      configFile,
      'logLevel: info\nguardrails:\n  - { name: flaky-out, use: flaky, on: response, action: block }\n',
    );
    expect(test.gateway.reloadConfig('test').applied).to.equal(true);
    const answer = await post('say boom please', true);
    expect(answer.status).to.equal(200);
    expect(answer.text).to.contain('"code":"GW_ERR_PLUGIN_FAULT"');
  });

  it('refuses a configuration whose options the plugin refuses, or whose use no plugin is, at reload (kept stale) and at start', async () => {
    await writeFile(
      configFile,
      'guardrails:\n  - { name: flaky-both, use: flaky, on: both, action: block, options: { mood: angry } }\n  - { name: other, use: missing-guard, action: redact }\n',
    );
    const result = test.gateway.reloadConfig('test');
    expect(result.applied).to.equal(false);
    expect(result.error)
      .to.contain('guardrails[0].options: mood must be calm')
      .and.to.contain(
        "guardrails[1].use: 'missing-guard' is neither a built-in guardrail (regex, pii, webhook) nor a loaded guardrail plugin (loaded: flaky)",
      );
    // The configuration in force is the last one applied.
    const answer = await post('say boom please', true);
    expect(answer.text).to.contain('"code":"GW_ERR_PLUGIN_FAULT"');
    try {
      await startTestGateway({ configFile, env: { GATEWAY_PLUGIN_PATH: join(dir, 'plugins') } });
      expect.fail('the gateway started');
    } catch (error) {
      expect(error).to.be.instanceOf(ConfigError);
      expect((error as ConfigError).problems.join('\n')).to.contain('mood must be calm');
    }
  });
});
