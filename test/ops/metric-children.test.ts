import { expect } from 'chai';
import fc from 'fast-check';
import { Counter, Histogram, Registry } from 'prom-client';
import { boundCounter, boundHistogram } from '../../src/ops/metrics.ts';

const BUCKETS = [0.0001, 0.005, 0.25, 1, 10];

/** The same counter and histogram on a registry of their own. */
function metrics() {
  const registry = new Registry();
  const counter = new Counter({ name: 'c_total', help: 'c', labelNames: ['route', 'status'], registers: [registry] });
  const histogram = new Histogram({
    name: 'h_seconds',
    help: 'h',
    labelNames: ['route'],
    buckets: BUCKETS,
    registers: [registry],
  });
  return { registry, counter, histogram };
}

type Update =
  | { readonly kind: 'inc'; readonly route: string; readonly status: number; readonly value: number }
  | { readonly kind: 'observe'; readonly route: string; readonly value: number }
  | { readonly kind: 'reset' };

const route = fc.constantFrom('chat', 'messages', 'a "quoted" route');
const update: fc.Arbitrary<Update> = fc.oneof(
  fc.record({
    kind: fc.constant('inc' as const),
    route,
    status: fc.constantFrom(200, 429, 502),
    value: fc.oneof(fc.constant(1), fc.nat(1_000_000), fc.double({ min: 0, max: 1e6, noNaN: true })),
  }),
  fc.record({
    kind: fc.constant('observe' as const),
    route,
    value: fc.oneof(fc.constantFrom(...BUCKETS, 0, -1, 1e9), fc.double({ min: -1, max: 20, noNaN: true })),
  }),
  fc.constant({ kind: 'reset' as const }),
);

describe('bound metric children', () => {
  it("expose exactly what prom-client's own children expose, over any updates and resets", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(update, { maxLength: 60 }), async (updates) => {
        const own = metrics();
        const bound = metrics();
        const counters = new Map<string, ReturnType<typeof boundCounter>>();
        const histograms = new Map<string, ReturnType<typeof boundHistogram>>();
        for (const next of updates) {
          if (next.kind === 'reset') {
            own.registry.resetMetrics();
            bound.registry.resetMetrics();
          } else if (next.kind === 'inc') {
            own.counter.labels(next.route, String(next.status)).inc(next.value);
            const key = `${next.route}/${next.status}`;
            if (!counters.has(key))
              counters.set(key, boundCounter(bound.counter, { route: next.route, status: String(next.status) }));
            counters.get(key)!.inc(next.value);
          } else {
            own.histogram.labels(next.route).observe(next.value);
            if (!histograms.has(next.route))
              histograms.set(next.route, boundHistogram(bound.histogram, { route: next.route }));
            histograms.get(next.route)!.observe(next.value);
          }
        }
        expect(await bound.registry.metrics()).to.equal(await own.registry.metrics());
      }),
      { numRuns: 200 },
    );
  });

  it('refuse what prom-client refuses, on the first update and on later ones', () => {
    const { counter, histogram } = metrics();
    const count = boundCounter(counter, { route: 'chat', status: '200' });
    const observe = boundHistogram(histogram, { route: 'chat' });
    for (let round = 0; round < 2; round += 1) {
      expect(() => count.inc(-1)).to.throw('It is not possible to decrease a counter');
      expect(() => count.inc(Number.POSITIVE_INFINITY)).to.throw(TypeError);
      expect(() => observe.observe(Number.NaN)).to.throw(TypeError);
      count.inc();
      observe.observe(0.1);
    }
  });

  it('count the default increment of one', async () => {
    const { registry, counter } = metrics();
    const count = boundCounter(counter, { route: 'chat', status: '200' });
    count.inc();
    count.inc();
    count.inc(3);
    expect(await registry.metrics()).to.include('c_total{route="chat",status="200"} 5');
  });
});
