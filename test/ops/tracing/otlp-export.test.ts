import { expect } from 'chai';
import { ExportResultCode, hrTime, type ExportResult } from '@opentelemetry/core';
import { BasicTracerProvider, type ReadableSpan, type SpanExporter } from '@opentelemetry/sdk-trace-base';
import { GatewayMetrics } from '../../../src/ops/metrics.ts';
import { genAiMetricProducer, histogramPoints } from '../../../src/ops/tracing/otlp-metrics.ts';
import { CountedBatchProcessor, type DropReason, LiveSampler } from '../../../src/ops/tracing/otel-tracing.ts';
import { eventually } from '../../helpers/eventually.ts';

describe('GenAI metrics over OTLP: the /metrics histograms as OTLP data points', () => {
  it('turns cumulative le buckets into per-bucket counts, with the sum, the count and the attributes', () => {
    const time = hrTime();
    const labels = { gen_ai_operation_name: 'chat', gen_ai_provider_name: 'alpha', gen_ai_request_model: 'gen-5.5' };
    const values = [
      { labels: { ...labels, le: 1 }, value: 1, metricName: 'x_bucket' },
      { labels: { ...labels, le: 4 }, value: 3, metricName: 'x_bucket' },
      { labels: { ...labels, le: '+Inf' }, value: 4, metricName: 'x_bucket' },
      { labels, value: 107, metricName: 'x_sum' },
      { labels, value: 4, metricName: 'x_count' },
    ];
    const [point, ...rest] = histogramPoints(values, [1, 4], time, time);
    expect(rest).to.deep.equal([]);
    expect(point!.attributes).to.deep.equal({
      'gen_ai.operation.name': 'chat',
      'gen_ai.provider.name': 'alpha',
      'gen_ai.request.model': 'gen-5.5',
    });
    expect(point!.value).to.deep.equal({ buckets: { boundaries: [1, 4], counts: [1, 2, 1] }, sum: 107, count: 4 });
  });

  it("reads the gateway's own histograms at each collection, under the conventions' names and units", async () => {
    const metrics = new GatewayMetrics();
    metrics.genAi({
      operation: 'chat',
      provider: 'alpha',
      requestModel: 'gen-5.5',
      inputTokens: 120,
      outputTokens: 30,
      durationS: 0.5,
      timeToFirstChunkS: 0.1,
      timePerOutputChunkS: 0.02,
    });
    metrics.genAi({
      operation: 'chat',
      provider: 'alpha',
      requestModel: 'gen-5.5',
      inputTokens: 80,
      outputTokens: 10,
      durationS: 1.5,
    });
    const { resourceMetrics } = await genAiMetricProducer(metrics.registry).collect();
    const found = resourceMetrics.scopeMetrics[0]!.metrics;
    expect(found.map((metric) => [metric.descriptor.name, metric.descriptor.unit])).to.deep.equal([
      ['gen_ai.client.token.usage', '{token}'],
      ['gen_ai.client.operation.duration', 's'],
      ['gen_ai.client.operation.time_to_first_chunk', 's'],
      ['gen_ai.client.operation.time_per_output_chunk', 's'],
    ]);
    const tokens = found[0]!.dataPoints.map((point) => [
      point.attributes['gen_ai.token.type'],
      (point.value as { sum: number; count: number }).sum,
      (point.value as { count: number }).count,
    ]);
    expect(tokens).to.deep.equal([
      ['input', 200, 2],
      ['output', 40, 2],
    ]);
    expect((found[1]!.dataPoints[0]!.value as { count: number; sum: number }).sum).to.equal(2);
  });
});

describe('the counted batch span processor', () => {
  /** An exporter that takes every batch and answers as told (held until released, for a collector that hangs). */
  class ScriptedExporter implements SpanExporter {
    answer: ExportResultCode = ExportResultCode.SUCCESS;
    held: (() => void)[] = [];
    hold = false;
    export(_spans: ReadableSpan[], done: (result: ExportResult) => void): void {
      const answer = () => done({ code: this.answer });
      if (this.hold) this.held.push(answer);
      else answer();
    }
    async shutdown(): Promise<void> {}
  }

  function traced(exporter: SpanExporter, maxQueueSize: number) {
    const counts = { exported: 0, queue_full: 0, export_failed: 0 };
    const processor = new CountedBatchProcessor(
      exporter,
      { scheduleDelayMs: 1, exportTimeoutMs: 30_000, maxQueueSize, maxExportBatchSize: maxQueueSize },
      {
        exported: (count) => (counts.exported += count),
        dropped: (reason: DropReason, count) => (counts[reason] += count),
      },
    );
    const sampler = new LiveSampler({ name: 'always_on', ratio: 1 });
    const provider = new BasicTracerProvider({ sampler, spanProcessors: [processor] });
    const tracer = provider.getTracer('test');
    return {
      counts,
      sampler,
      spans: (count: number) => Array.from({ length: count }, (_, index) => tracer.startSpan(`span ${index}`).end()),
    };
  }

  it('counts the spans exported, and the spans of a failed export as lost', async () => {
    const exporter = new ScriptedExporter();
    const { counts, spans } = traced(exporter, 10);
    spans(5);
    await eventually(() => counts.exported === 5, 'five spans exported');
    exporter.answer = ExportResultCode.FAILED;
    spans(3);
    await eventually(() => counts.export_failed === 3, 'three spans lost');
    expect(counts).to.deep.equal({ exported: 5, queue_full: 0, export_failed: 3 });
  });

  it('drops and counts what finds the queue full while an export hangs, and never blocks the caller', async () => {
    const exporter = new ScriptedExporter();
    exporter.hold = true;
    const { counts, spans } = traced(exporter, 4);
    spans(4);
    await eventually(() => exporter.held.length === 1, 'the first export under way');
    spans(6);
    expect(counts.queue_full).to.equal(2);
    for (const release of exporter.held.splice(0)) release();
    await eventually(() => counts.exported === 4, 'the first batch exported');
  });

  it('samples by the sampler in force, which a reload replaces', () => {
    const exporter = new ScriptedExporter();
    const { sampler } = traced(exporter, 10);
    expect(sampler.update({ name: 'always_on', ratio: 1 })).to.equal(false);
    expect(sampler.update({ name: 'parentbased_traceidratio', ratio: 0.5 })).to.equal(true);
    expect(sampler.toString()).to.include('ParentBased');
  });
});
