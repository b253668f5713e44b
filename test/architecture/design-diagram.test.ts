import { expect } from 'chai';
import { readFile } from 'node:fs/promises';
import { type ModelRouteParts, stageLists } from '../../src/data-plane/model-routes.ts';
import { stageNames } from '../../src/data-plane/pipeline/exchange.ts';
import type { ResponseCaching } from '../../src/data-plane/cache/response-caching.ts';
import type { GuardrailSet } from '../../src/guardrails/guardrail-set.ts';

/** The diagram's lines: each route (or routes) and its stages, bracketed ones only while configured. */
async function diagram(): Promise<Map<string, string[]>> {
  const text = await readFile(new URL('../../docs/design.md', import.meta.url), 'utf8');
  const block = /<!-- stage lists -->\n```\n([\s\S]*?)```\n<!-- end of stage lists -->/.exec(text);
  expect(block, 'docs/design.md holds the stage lists').to.not.equal(null);
  const lines = new Map<string, string[]>();
  for (const line of block![1]!.trim().split('\n')) {
    const [routes, stages] = line.split(':');
    for (const route of routes!.split(',')) lines.set(route.trim(), stages!.trim().split(' → '));
  }
  return lines;
}

describe('architecture: docs/design.md draws the stage lists the code builds', () => {
  // Every part a stage may take, present (no plugin adapts a route): what the lists hold then depends on
  // the configuration alone.
  const parts = {
    registry: { plugins: [] },
    authenticate: { check: () => ({ id: 'k' }) },
    admission: { rateLimit: { count: () => ({}) } },
    budgets: { admit: () => undefined },
    nativeChat: {},
    bounds: {},
  } as unknown as ModelRouteParts;
  const configured = { caching: {} as ResponseCaching, guardrails: {} as GuardrailSet };

  it('with everything configured, and with nothing configured (the bracketed stages out)', async () => {
    const drawn = await diagram();
    for (const [settings, keep] of [
      [configured, (stage: string) => stage.replace(/[[\]]/g, '')],
      [{}, undefined],
    ] as const) {
      const built = stageLists(parts, settings);
      expect([...built.keys()].sort()).to.deep.equal([...drawn.keys()].sort());
      for (const [route, stages] of built) {
        const expected = drawn
          .get(route)!
          .flatMap((stage) => (keep ? [keep(stage)] : stage.startsWith('[') ? [] : [stage]));
        expect(stageNames(stages), route).to.deep.equal(expected);
      }
    }
  });
});
