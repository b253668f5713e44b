import { expect } from 'chai';
import { fileURLToPath } from 'node:url';
import { formatFailure, runConformance, type ConformanceReport } from '../../../tools/conformance/run-conformance.ts';
import { readManifest } from '../../../src/plugins/load-plugins.ts';

const manifestPath = fileURLToPath(new URL('../../../providers/manifest.json', import.meta.url));

// What the suite must drive, from the declarations: 1 catalog check, then per model and per alias each
// route in each accepted spelling, JSON and stream where the route streams, plus each fixture replayed
// per model of its route. alpha: 7 models × (chat 1 + chat-completions 2 + responses 2 spellings × 2) + alias 5;
// beta: 8 models × (chat 1 + chat-completions 2 + messages 2 + count-tokens 1) + alias 6.
const CHECKS: Record<string, number> = {
  alpha: 1 + 49 + 5,
  beta: 1 + 48 + 6,
  gamma: 1 + 6 + 3 + 2,
  delta: 1 + 9,
  epsilon: 1 + 6 + 2,
  zeta: 1 + 3,
};

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
      expect(plugin!.checks).to.equal(CHECKS[name]);
    });
  }
});
