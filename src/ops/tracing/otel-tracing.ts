import { SpanKind, type Attributes } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter as JsonTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as ProtobufTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { resourceFromAttributes, type Resource } from '@opentelemetry/resources';
import { BasicTracerProvider, type SpanExporter } from '@opentelemetry/sdk-trace-base';
import { ATTR_SERVICE_NAME, ATTR_SERVICE_VERSION } from '@opentelemetry/semantic-conventions';
import { randomUUID } from 'node:crypto';
import { LiveSampler } from './live-sampler.ts';
import { startRequestTrace, type TraceKit } from './otel-request-trace.ts';
import { TraceIds } from './trace-ids.ts';
import type { RequestTracing, TraceAttributes } from './request-trace.ts';
import { CountedBatchProcessor, type SpanCounts } from './span-pipeline.ts';
import type { OtlpDestination, SamplerSettings, TracingSettings } from './tracing-settings.ts';

/** The gateway's tracing while it runs: what the data plane calls, the live sampler, and the way to stop. */
export interface GatewayTracing {
  readonly requests: RequestTracing;
  /** Records one span of its own (`gateway.limit_alert`, sampled as a trace without a parent is). */
  span(name: string, attributes: TraceAttributes): void;
  /** Puts a reloaded sampler in force; true when it changed. */
  setSampler(settings: SamplerSettings): boolean;
  /** Exports what is queued now (the benchmark measures the export with it). */
  flush(): Promise<void>;
  /** Exports what is queued (within the batch export timeout) and stops. */
  shutdown(): Promise<void>;
}

/** This process among the gateway's instances and workers: each exports its own cumulative metrics. */
const INSTANCE_ID = randomUUID();

/**
 * The resource of every span and metric: `service.name`, the gateway's version, this process's
 * `service.instance.id` and the operator's attributes (which may name the instance themselves).
 */
export function gatewayResource(
  settings: Pick<TracingSettings, 'serviceName' | 'resourceAttributes'>,
  version: string,
): Resource {
  return resourceFromAttributes({
    [ATTR_SERVICE_VERSION]: version,
    'service.instance.id': INSTANCE_ID,
    ...settings.resourceAttributes,
    [ATTR_SERVICE_NAME]: settings.serviceName,
  });
}

function traceExporter(destination: OtlpDestination): SpanExporter {
  const options = { url: destination.url, headers: { ...destination.headers }, timeoutMillis: destination.timeoutMs };
  return destination.protocol === 'http/json' ? new JsonTraceExporter(options) : new ProtobufTraceExporter(options);
}

/**
 * Tracing with the OpenTelemetry SDK, exported over OTLP/HTTP through the batch span processor. The
 * provider is this gateway's own, not registered globally (tests run several gateways in one process),
 * and no context manager is installed: the data plane passes each request's trace along itself.
 * Undefined when no traces endpoint is configured: the data plane then makes no span at all.
 */
export function startTracing(
  settings: TracingSettings,
  counts: SpanCounts,
  version: string,
): GatewayTracing | undefined {
  if (!settings.traces) return undefined;
  const sampler = new LiveSampler(settings.sampler);
  const processor = new CountedBatchProcessor(traceExporter(settings.traces), settings.batch, counts);
  const ids = new TraceIds();
  const provider = new BasicTracerProvider({
    resource: gatewayResource(settings, version),
    sampler,
    idGenerator: ids,
    spanProcessors: [processor],
  });
  const tracer = provider.getTracer('model-gateway', version);
  const kit: TraceKit = {
    tracer,
    sampler,
    ids,
    propagator: new W3CTraceContextPropagator(),
    captureContent: settings.captureMessageContent,
  };
  return {
    requests: { startRequest: (start) => startRequestTrace(kit, start) },
    span: (name, attributes) => {
      tracer.startSpan(name, { kind: SpanKind.INTERNAL, attributes: attributes as Attributes, root: true }).end();
    },
    setSampler: (next) => sampler.update(next),
    flush: () => provider.forceFlush(),
    shutdown: () => provider.shutdown(),
  };
}
