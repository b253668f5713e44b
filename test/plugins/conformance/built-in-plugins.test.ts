import { expect } from 'chai';
import { fileURLToPath } from 'node:url';
import { formatFailure, runConformance, type ConformanceReport } from '../../../src/plugins/conformance/run-conformance.ts';
import { readManifest } from '../../../src/plugins/load-plugins.ts';

const manifestPath = fileURLToPath(new URL('../../../providers/manifest.json', import.meta.url));

describe('the conformance suite on the built-in plugins', function () {
  this.timeout(120_000);
  let report: ConformanceReport;
  before(async () => {
    report = await runConformance({ manifestPath });
  });

  it('loads them and the catalog without a failure outside a plugin', () => {
    expect(report.failures.map(formatFailure)).to.deep.equal([]);
  });

  for (const { name } of readManifest(manifestPath)) {
    it(`${name} passes every rule`, () => {
      const plugin = report.plugins.find((candidate) => candidate.vendor === name);
      expect(plugin, name).to.not.equal(undefined);
      expect(plugin!.failures.map(formatFailure)).to.deep.equal([]);
      expect(plugin!.checks).to.be.greaterThan(0);
    });
  }
});
