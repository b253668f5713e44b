import { Counter, type Registry } from 'prom-client';

/** The spans of the OTLP trace exporter: delivered, and lost by reason. */
export interface TraceMetrics {
  readonly spansExported: Counter;
  readonly spansDropped: Counter<'reason'>;
}

export function defineTraceMetrics(registers: Registry[]): TraceMetrics {
  const spansExported = new Counter({
    name: 'gateway_trace_spans_exported_total',
    help: 'Spans the OTLP exporter delivered to the collector',
    registers,
  });
  const spansDropped = new Counter({
    name: 'gateway_trace_spans_dropped_total',
    help: 'Spans lost, by reason: queue_full (the export queue was full: the collector is slow or down), export_failed (an export failed after its retries)',
    labelNames: ['reason'],
    registers,
  });
  for (const reason of ['queue_full', 'export_failed']) spansDropped.labels(reason).inc(0);
  return { spansExported, spansDropped };
}
