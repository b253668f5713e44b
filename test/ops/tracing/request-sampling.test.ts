import { expect } from 'chai';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { DEFAULT_TRACING, SAMPLER_NAMES, type SamplerSettings } from '../../../src/ops/tracing/tracing-settings.ts';
import { startTracing, type GatewayTracing } from '../../../src/ops/tracing/otel-tracing.ts';

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-00$/;
const CLIENT_SAMPLED = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
const noCounts = { exported: () => undefined, dropped: () => undefined };

// Sampled spans are exported at shutdown: a collector that takes every export.
let collector: Server;
let collectorUrl: string;

function tracing(sampler: SamplerSettings): GatewayTracing {
  const traces = { url: collectorUrl, protocol: 'http/json' as const, headers: {}, timeoutMs: 2000 };
  return startTracing({ ...DEFAULT_TRACING, traces, sampler }, noCounts, 'test')!;
}

const start = (headers: Record<string, string> = {}) => ({
  headers,
  method: 'POST',
  route: '/v1/chat/completions',
  path: '/v1/chat/completions',
  requestId: 'req-1',
});

describe('tracing: the sampling decision of a model request', () => {
  before(async () => {
    collector = createServer((req, res) => req.resume().on('end', () => res.writeHead(200).end('{}')));
    await new Promise<void>((resolve) => collector.listen(0, '127.0.0.1', resolve));
    collectorUrl = `http://127.0.0.1:${(collector.address() as AddressInfo).port}/v1/traces`;
  });
  after(() => collector.close());

  it('samples requests without a traceparent as each sampler and ratio says: none, all, or about the ratio', async () => {
    const never = new Set(['always_off', 'parentbased_always_off']);
    for (const name of SAMPLER_NAMES) {
      for (const ratio of [0, 1e-12, 0.5, 1]) {
        const live = tracing({ name, ratio });
        let recorded = 0;
        try {
          for (let request = 0; request < 200; request += 1) {
            const trace = live.requests.startRequest(start());
            if (trace.recording) {
              recorded += 1;
              trace.end(200);
            } else expect(trace.traceparent).to.match(TRACEPARENT);
          }
        } finally {
          await live.shutdown();
        }
        const byRatio = name.endsWith('traceidratio');
        const label = `${name} ${ratio}`;
        if (never.has(name) || (byRatio && ratio < 1e-9)) expect(recorded, label).to.equal(0);
        else if (!byRatio || ratio === 1) expect(recorded, label).to.equal(200);
        else expect(recorded, label).to.be.within(60, 140);
      }
    }
  });

  it('gives each sampled-out request a trace and span id of its own, never all zero', async () => {
    const live = tracing({ name: 'parentbased_traceidratio', ratio: 0 });
    try {
      const seen = new Set<string>();
      for (let request = 0; request < 200; request += 1) {
        const trace = live.requests.startRequest(start());
        if (trace.recording) throw new Error('a request sampled at ratio 0');
        const [, traceId, spanId] = TRACEPARENT.exec(trace.traceparent)!;
        expect(traceId).to.not.match(/^0+$/);
        expect(spanId).to.not.match(/^0+$/);
        seen.add(traceId!);
      }
      expect(seen.size).to.equal(200);
    } finally {
      await live.shutdown();
    }
  });

  it("follows a client's sampled traceparent under a parent-based ratio of 0, and not under the plain ratio", async () => {
    const parentBased = tracing({ name: 'parentbased_traceidratio', ratio: 0 });
    const plain = tracing({ name: 'traceidratio', ratio: 0 });
    try {
      const followed = parentBased.requests.startRequest(start({ traceparent: CLIENT_SAMPLED }));
      expect(followed.recording).to.equal(true);
      if (followed.recording) followed.end(200);
      expect(plain.requests.startRequest(start({ traceparent: CLIENT_SAMPLED })).recording).to.equal(false);
    } finally {
      await parentBased.shutdown();
      await plain.shutdown();
    }
  });

  it('samples again once a reload puts a ratio above 0 in force, and stops when it goes back', async () => {
    const live = tracing({ name: 'parentbased_traceidratio', ratio: 0 });
    try {
      expect(live.requests.startRequest(start()).recording).to.equal(false);
      expect(live.setSampler({ name: 'parentbased_traceidratio', ratio: 1 })).to.equal(true);
      const sampled = live.requests.startRequest(start());
      expect(sampled.recording).to.equal(true);
      if (sampled.recording) sampled.end(200);
      expect(live.setSampler({ name: 'always_off', ratio: 1 })).to.equal(true);
      expect(live.requests.startRequest(start()).recording).to.equal(false);
    } finally {
      await live.shutdown();
    }
  });
});
