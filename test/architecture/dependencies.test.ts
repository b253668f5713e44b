import { expect } from 'chai';
import { cruise, type ICruiseResult } from 'dependency-cruiser';

/**
 * The import graph of the shipped code (src/, providers/, tools/), read from the sources by
 * dependency-cruiser, type-only imports included.
 */
async function importGraph(): Promise<{ from: string; to: string; circular: boolean }[]> {
  const result = await cruise(['src', 'providers', 'tools'], {
    tsPreCompilationDeps: true,
    moduleSystems: ['es6'],
    doNotFollow: { path: 'node_modules' },
  });
  const output = result.output as ICruiseResult;
  return output.modules.flatMap((module) =>
    module.dependencies
      .filter(
        (dependency) =>
          !dependency.coreModule && !dependency.couldNotResolve && !/node_modules/.test(dependency.resolved),
      )
      .map((dependency) => ({ from: module.source, to: dependency.resolved, circular: dependency.circular })),
  );
}

/** A top-level folder of src/ (a file directly in src/ is a room of its own); undefined outside src/. */
function roomOf(path: string): string | undefined {
  const folder = /^src\/([^/]+)\//.exec(path);
  if (folder) return folder[1];
  return path.startsWith('src/') ? path : undefined;
}

describe('architecture: imports run one way', function () {
  this.timeout(60_000);
  let edges: { from: string; to: string; circular: boolean }[];
  before(async () => {
    edges = await importGraph();
  });

  it('reads a graph of the whole tree', () => {
    expect(edges.length).to.be.greaterThan(200);
    expect(edges.some((edge) => edge.from.startsWith('src/data-plane/') && edge.to.startsWith('src/core/'))).to.equal(
      true,
    );
  });

  it('has no import cycle', () => {
    expect(edges.filter((edge) => edge.circular).map((edge) => `${edge.from} -> ${edge.to}`)).to.deep.equal([]);
  });

  it('has no two top-level folders of src/ that import each other', () => {
    const between = new Map<string, string[]>();
    for (const { from, to } of edges) {
      const [a, b] = [roomOf(from), roomOf(to)];
      if (a && b && a !== b) between.set(`${a} -> ${b}`, [...(between.get(`${a} -> ${b}`) ?? []), `${from} -> ${to}`]);
    }
    const both = [...between.keys()].filter((key) => {
      const [a, b] = key.split(' -> ');
      return a! < b! && between.has(`${b} -> ${a}`);
    });
    expect(
      both.map(
        (key) =>
          `${key}: ${between.get(key)!.join(', ')} | back: ${between.get(key.split(' -> ').reverse().join(' -> '))!.join(', ')}`,
      ),
    ).to.deep.equal([]);
  });

  it('keeps runtime code away from the tests and the mock upstream (only tools/ may use the mock)', () => {
    const runtime = (path: string) =>
      (path.startsWith('src/') || path.startsWith('providers/')) && !path.startsWith('src/cli/');
    const offending = edges.filter(
      ({ from, to }) => runtime(from) && /^(test|mock-upstream|tools|bench|scripts)\//.test(to),
    );
    expect(offending.map((edge) => `${edge.from} -> ${edge.to}`)).to.deep.equal([]);
  });
});

describe('architecture: the stages of the model request', function () {
  this.timeout(60_000);
  const STAGES = 'src/data-plane/pipeline/';
  // The pipeline's own files that are no stage: the exchange, the stage type, the composer.
  const SHARED = new Set(['exchange.ts']);

  it('keeps every stage apart: no stage imports another', async () => {
    const edges = await importGraph();
    const stage = (path: string) => path.startsWith(STAGES) && !SHARED.has(path.slice(STAGES.length));
    const between = edges.filter(({ from, to }) => stage(from) && stage(to));
    expect(
      edges.some(({ from }) => stage(from)),
      'the stages are in the graph',
    ).to.equal(true);
    expect(between.map((edge) => `${edge.from} -> ${edge.to}`)).to.deep.equal([]);
  });

  it('keeps the request path free of the observers: nothing in src/data-plane/ imports src/ops/', async () => {
    const edges = await importGraph();
    const offending = edges.filter(({ from, to }) => from.startsWith('src/data-plane/') && to.startsWith('src/ops/'));
    expect(offending.map((edge) => `${edge.from} -> ${edge.to}`)).to.deep.equal([]);
  });
});
