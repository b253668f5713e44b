import { expect } from 'chai';
import { fileURLToPath } from 'node:url';
import { formatFailure, runConformance } from '../../../src/plugins/conformance/run-conformance.ts';

const manifestPath = fileURLToPath(new URL('../../../providers/manifest.json', import.meta.url));
const external = fileURLToPath(new URL('../../fixtures/external-plugins', import.meta.url));
const broken = fileURLToPath(new URL('../../fixtures/broken-plugins', import.meta.url));

describe('runConformance', function () {
  this.timeout(60_000);

  it('passes the external omega plugin, written from the scaffold, loaded from outside providers/', async () => {
    const report = await runConformance({ manifestPath, pluginPath: [external], vendors: ['omega'] });
    expect([...report.failures, ...report.plugins.flatMap((plugin) => plugin.failures)].map(formatFailure)).to.deep.equal([]);
    expect(report.ok).to.equal(true);
    // catalog; chat-completions JSON + stream and native chat for the model and the alias; two fixtures.
    expect(report.plugins.map((plugin) => [plugin.vendor, plugin.checks])).to.deep.equal([['omega', 1 + 3 + 3 + 2]]);
  });

  it('fails the broken plugin, naming the plugin, the model and the rule of each fault', async () => {
    const report = await runConformance({ manifestPath, pluginPath: [broken], vendors: ['broken'] });
    expect(report.ok).to.equal(false);
    const messages = report.plugins.flatMap((plugin) => plugin.failures).map(formatFailure);
    expect(messages).to.include(
      "plugin 'broken', model 'broken/broken-fast', rule 'upstream-path': responses with 'broken/broken-fast': routes.responses.path is '/response', but an upstream speaking responses serves '/responses' (the upstream answered 404)",
    );
    expect(messages).to.include(
      "plugin 'broken', model 'broken/broken-fast', rule 'fixup': fixture 'keepalive' on chat-completions: event 2 of what the client got differs from keepalive.expected.txt; no stream fixup is declared for this model on this route",
    );
    const usage = messages.filter((message) => message.includes("rule 'usage'"));
    expect(usage.map((message) => message.split(':')[0])).to.deep.equal([
      "plugin 'broken', model 'broken/broken-fast', rule 'usage'",
      "plugin 'broken', model 'broken/broken-large', rule 'usage'",
    ]);
    for (const message of usage) {
      expect(message).to.match(/the plugin's usageExtractors\[0\] recorded \{"inputTokens":(\d+),"outputTokens":(\d+),"cachedTokens":0\}, but the upstream reported \{"inputTokens":\2,"outputTokens":\1,"cachedTokens":4\}$/);
    }
    expect(messages).to.have.length(4);
  });

  it('refuses a plugin folder that does not load, naming it', async () => {
    const report = await runConformance({ manifestPath, pluginPath: [external, external], vendors: ['ghost'] });
    expect(report.ok).to.equal(false);
    expect(report.failures.map(formatFailure)).to.deep.equal(["plugin 'ghost', rule 'load': no manifest lists it"]);
  });
});
