import { expect } from 'chai';
import { cp, mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { formatFailure, runConformance } from '../../../tools/conformance/run-conformance.ts';
import { KAPPA_DIR } from '../../helpers/external-plugin.ts';

const manifestPath = fileURLToPath(new URL('../../../providers/manifest.json', import.meta.url));
const external = fileURLToPath(new URL('../../fixtures/external-plugins', import.meta.url));
const broken = fileURLToPath(new URL('../../fixtures/broken-plugins', import.meta.url));
const ROOT = fileURLToPath(new URL('../../..', import.meta.url));

describe('runConformance', function () {
  this.timeout(60_000);

  it('passes the external omega plugin, written from the scaffold, loaded from outside providers/', async () => {
    const report = await runConformance({ manifestPath, pluginPath: [external], vendors: ['omega'] });
    expect(
      [...report.failures, ...report.plugins.flatMap((plugin) => plugin.failures)].map(formatFailure),
    ).to.deep.equal([]);
    expect(report.ok).to.equal(true);
    // catalog; chat-completions JSON + stream and native chat for the model and the alias; two fixtures.
    expect(report.plugins.map((plugin) => [plugin.vendor, plugin.checks])).to.deep.equal([['omega', 1 + 3 + 3 + 2]]);
  });

  it('passes the compiled kappa plugins: a credential header, a query parameter, stateful fixups on a recorded stream', async () => {
    const report = await runConformance({ manifestPath, pluginPath: [KAPPA_DIR], vendors: ['kappa', 'kappaq'] });
    expect(
      [...report.failures, ...report.plugins.flatMap((plugin) => plugin.failures)].map(formatFailure),
    ).to.deep.equal([]);
    expect(report.ok).to.equal(true);
  });

  it('names the plugin and the hook of a fixup that throws', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'gateway-conformance-fault-'));
    try {
      await mkdir(join(dir, 'faulty'));
      await mkdir(join(dir, 'node_modules'));
      await symlink(ROOT, join(dir, 'node_modules', 'model-gateway'), 'dir');
      await writeFile(join(dir, 'package.json'), JSON.stringify({ type: 'module' }));
      await writeFile(join(dir, 'manifest.json'), JSON.stringify({ plugins: ['faulty'] }));
      await writeFile(
        join(dir, 'faulty', 'index.js'),
        `export default {
  contract: 1, vendor: 'faulty',
  routes: { 'chat-completions': { path: '/chat/completions', format: 'chat-completions', auth: 'bearer' } },
  models: [{ id: 'faulty-1', listed: true, routes: ['chat-completions'], pricing: { input: 1, cachedInput: 0, output: 1 } }],
  streamFixups: [{ name: 'boom', route: 'chat-completions', models: ['faulty/faulty-1'], fixup: () => { throw new Error('boom'); } }],
};
`,
      );
      const report = await runConformance({ manifestPath, pluginPath: [dir], vendors: ['faulty'] });
      // The gateway's error line for the fault, inline: its message and the plugin's own stack frames.
      expect(report.plugins.flatMap((plugin) => plugin.failures).map(formatFailure)).to.deep.equal([
        "plugin 'faulty', model 'faulty/faulty-1', rule 'plugin-fault': chat-completions (stream) with 'faulty/faulty-1': plugin 'faulty', hook 'streamFixups.boom' failed: it threw or returned a wrong shape; the gateway logged: gateway plugin 'faulty' failed in its hook 'streamFixups.boom': Error: boom\n" +
          `        at fixup (file://${join(dir, 'faulty', 'index.js')}:5:111)`,
      ]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('fails the broken plugin, naming the plugin, the model and the rule of each fault', async () => {
    const report = await runConformance({ manifestPath, pluginPath: [broken], vendors: ['broken'] });
    expect(report.ok).to.equal(false);
    const messages = report.plugins.flatMap((plugin) => plugin.failures).map(formatFailure);
    expect(messages).to.include(
      "plugin 'broken', model 'broken/broken-fast', rule 'upstream-path': responses with 'broken/broken-fast': routes.responses.path is '/response', but an upstream speaking responses serves '/responses' (the upstream answered 404)",
    );
    const fixup = messages.find((message) => message.includes("rule 'fixup'"))!;
    expect(fixup.split('\n')[0]).to.equal(
      "plugin 'broken', model 'broken/broken-fast', rule 'fixup': fixture 'keepalive' on chat-completions: event 2 of what the client got differs from keepalive.expected.txt; no stream fixup is declared for this model on this route",
    );
    // The line diff: expected (the .expected.txt line) against what the client received.
    expect(fixup).to.match(
      /\n {6}event 2:\n {8}- expected: \{"id":"chatcmpl-b1".*"finish_reason":"stop"\}\]\}\n {8}\+ received: \S/,
    );
    const usage = messages.filter((message) => message.includes("rule 'usage'"));
    expect(usage.map((message) => message.split(':')[0])).to.deep.equal([
      "plugin 'broken', model 'broken/broken-fast', rule 'usage'",
      "plugin 'broken', model 'broken/broken-large', rule 'usage'",
    ]);
    for (const message of usage) {
      expect(message).to.match(
        /the plugin's usageExtractors\[0\] recorded \{"inputTokens":(\d+),"outputTokens":(\d+),"cachedTokens":0\}, but the upstream reported \{"inputTokens":\2,"outputTokens":\1,"cachedTokens":4\}$/,
      );
    }
    expect(messages).to.have.length(4);
  });

  it('names a malformed fixture and a fixture recorded from a model the plugin does not serve on its route', async () => {
    const copy = await mkdtemp(join(tmpdir(), 'gateway-conformance-fixtures-'));
    try {
      await cp(external, copy, { recursive: true });
      await writeFile(join(copy, 'package.json'), JSON.stringify({ type: 'module' }));
      await mkdir(join(copy, 'node_modules'));
      await symlink(ROOT, join(copy, 'node_modules', 'model-gateway'), 'dir');
      const fixtures = join(copy, 'omega', '__fixtures__');
      await writeFile(
        join(fixtures, 'keepalive.fixture.json'),
        JSON.stringify({ route: 'chat-completions', model: 'omega/omega-9' }),
      );
      const stray = await runConformance({ manifestPath, pluginPath: [copy], vendors: ['omega'] });
      expect(stray.plugins[0]!.failures.map(formatFailure)).to.deep.equal([
        "plugin 'omega', model 'omega/omega-9', rule 'fixture': fixture 'keepalive' on chat-completions: 'omega/omega-9' is not a model of the plugin on chat-completions",
      ]);
      await writeFile(
        join(fixtures, 'keepalive.fixture.json'),
        JSON.stringify({ route: 'chat-completions', model: 'omega-1' }),
      );
      const malformed = await runConformance({ manifestPath, pluginPath: [copy], vendors: ['omega'] });
      expect(malformed.plugins[0]!.failures.map(formatFailure)).to.deep.equal([
        `plugin 'omega', rule 'fixture': ${join(fixtures, 'keepalive.fixture.json')}: model: must be the canonical ID (vendor/model) it was recorded from`,
      ]);
    } finally {
      await rm(copy, { recursive: true, force: true });
    }
  });

  it('refuses a plugin folder that does not load, naming it', async () => {
    const report = await runConformance({ manifestPath, pluginPath: [external, external], vendors: ['ghost'] });
    expect(report.ok).to.equal(false);
    expect(report.failures.map(formatFailure)).to.deep.equal(["plugin 'ghost', rule 'load': no manifest lists it"]);
  });
});
