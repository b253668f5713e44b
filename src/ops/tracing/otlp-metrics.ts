import { ValueType, type Attributes, type HrTime } from '@opentelemetry/api';
import { hrTime } from '@opentelemetry/core';
import { OTLPMetricExporter as JsonMetricExporter } from '@opentelemetry/exporter-metrics-otlp-http';
import { OTLPMetricExporter as ProtobufMetricExporter } from '@opentelemetry/exporter-metrics-otlp-proto';
import {
  AggregationTemporality,
  DataPointType,
  MeterProvider,
  PeriodicExportingMetricReader,
  type CollectionResult,
  type DataPoint,
  type Histogram,
  type HistogramMetricData,
  type MetricProducer,
  type PushMetricExporter,
} from '@opentelemetry/sdk-metrics';
import type { Registry } from 'prom-client';
import { GENAI_BUCKETS } from '../genai-observation.ts';
import { gatewayResource } from './otel-tracing.ts';
import type { OtlpDestination, TracingSettings } from './tracing-settings.ts';

/** The GenAI metrics over OTLP, beside `/metrics`; stopped with {@link shutdown}. */
export interface OtlpGenAiMetrics {
  shutdown(): Promise<void>;
}

/** Each GenAI histogram of `/metrics` under its GenAI conventions' name and unit, with its buckets. */
const HISTOGRAMS = [
  {
    prometheus: 'gen_ai_client_token_usage',
    name: 'gen_ai.client.token.usage',
    unit: '{token}',
    description: 'Tokens used per upstream operation, by token type',
    boundaries: GENAI_BUCKETS.tokens,
  },
  {
    prometheus: 'gen_ai_client_operation_duration_seconds',
    name: 'gen_ai.client.operation.duration',
    unit: 's',
    description: 'GenAI operation duration',
    boundaries: GENAI_BUCKETS.duration,
  },
  {
    prometheus: 'gen_ai_client_operation_time_to_first_chunk_seconds',
    name: 'gen_ai.client.operation.time_to_first_chunk',
    unit: 's',
    description: 'Time to the first chunk of a streamed answer',
    boundaries: GENAI_BUCKETS.duration,
  },
  {
    prometheus: 'gen_ai_client_operation_time_per_output_chunk_seconds',
    name: 'gen_ai.client.operation.time_per_output_chunk',
    unit: 's',
    description: 'Mean time per output chunk after the first, per stream',
    boundaries: GENAI_BUCKETS.perChunk,
  },
] as const;

/** The Prometheus labels of the GenAI histograms and the attributes they stand for. */
const ATTRIBUTES: Record<string, string> = {
  gen_ai_operation_name: 'gen_ai.operation.name',
  gen_ai_provider_name: 'gen_ai.provider.name',
  gen_ai_request_model: 'gen_ai.request.model',
  gen_ai_token_type: 'gen_ai.token.type',
};

interface PromValue {
  readonly value: number;
  readonly labels: Record<string, string | number | undefined>;
  readonly metricName?: string;
}

/**
 * One prom-client histogram's series as OTLP histogram data points: its cumulative `le` buckets
 * turned into the per-bucket counts OTLP carries, its `_sum` and `_count`.
 */
export function histogramPoints(
  values: readonly PromValue[],
  boundaries: readonly number[],
  startTime: HrTime,
  endTime: HrTime,
): DataPoint<Histogram>[] {
  const series = new Map<string, { attributes: Attributes; cumulative: number[]; sum: number; count: number }>();
  for (const { value, labels, metricName } of values) {
    const attributes: Attributes = {};
    for (const [label, labelValue] of Object.entries(labels))
      if (label !== 'le' && labelValue !== undefined) attributes[ATTRIBUTES[label] ?? label] = labelValue;
    const key = JSON.stringify(attributes);
    let entry = series.get(key);
    if (entry === undefined)
      series.set(key, (entry = { attributes, cumulative: boundaries.map(() => 0), sum: 0, count: 0 }));
    if (metricName?.endsWith('_sum')) entry.sum = value;
    else if (metricName?.endsWith('_count')) entry.count = value;
    else if (labels.le !== '+Inf') {
      const index = boundaries.indexOf(Number(labels.le));
      if (index !== -1) entry.cumulative[index] = value;
    }
  }
  return [...series.values()].map(({ attributes, cumulative, sum, count }) => {
    const counts = cumulative.map((total, index) => total - (index === 0 ? 0 : cumulative[index - 1]!));
    counts.push(count - (cumulative.at(-1) ?? 0));
    return { startTime, endTime, attributes, value: { buckets: { boundaries: [...boundaries], counts }, sum, count } };
  });
}

/**
 * The GenAI histograms `/metrics` serves, read from its registry at each export: a request records
 * them once (in prom-client), and OTLP costs nothing per request.
 */
export function genAiMetricProducer(registry: Registry): MetricProducer {
  const startTime = hrTime();
  return {
    async collect(): Promise<CollectionResult> {
      const endTime = hrTime();
      const metrics: HistogramMetricData[] = [];
      for (const histogram of HISTOGRAMS) {
        const found = registry.getSingleMetric(histogram.prometheus);
        if (!found) continue;
        const { values } = (await found.get()) as { values: PromValue[] };
        const dataPoints = histogramPoints(values, histogram.boundaries, startTime, endTime).filter(
          (point) => point.value.count > 0,
        );
        if (dataPoints.length === 0) continue;
        metrics.push({
          descriptor: {
            name: histogram.name,
            unit: histogram.unit,
            description: histogram.description,
            valueType: ValueType.DOUBLE,
          },
          dataPointType: DataPointType.HISTOGRAM,
          aggregationTemporality: AggregationTemporality.CUMULATIVE,
          dataPoints,
        });
      }
      // The reader keeps the meter provider's resource; the scope names the gateway.
      return {
        resourceMetrics: {
          resource: undefined as never,
          scopeMetrics: [{ scope: { name: 'model-gateway' }, metrics }],
        },
        errors: [],
      };
    },
  };
}

function metricExporter(destination: OtlpDestination): PushMetricExporter {
  const options = { url: destination.url, headers: { ...destination.headers }, timeoutMillis: destination.timeoutMs };
  return destination.protocol === 'http/json' ? new JsonMetricExporter(options) : new ProtobufMetricExporter(options);
}

/**
 * The GenAI conventions' client metrics (`gen_ai.client.token.usage`, `gen_ai.client.operation.duration`,
 * `.time_to_first_chunk`, `.time_per_output_chunk`) pushed over OTLP/HTTP on a timer by the
 * OpenTelemetry metrics SDK, from the histograms of `/metrics`; undefined without a metrics endpoint.
 */
export function startOtlpGenAiMetrics(
  settings: TracingSettings,
  registry: Registry,
  version: string,
): OtlpGenAiMetrics | undefined {
  if (!settings.metrics) return undefined;
  const reader = new PeriodicExportingMetricReader({
    exporter: metricExporter(settings.metrics),
    exportIntervalMillis: settings.metricExportIntervalMs,
    exportTimeoutMillis: Math.min(settings.metrics.timeoutMs, settings.metricExportIntervalMs),
    metricProducers: [genAiMetricProducer(registry)],
  });
  const provider = new MeterProvider({ resource: gatewayResource(settings, version), readers: [reader] });
  return { shutdown: () => provider.shutdown() };
}
