/** The samplers of `OTEL_TRACES_SAMPLER` the gateway takes (the SDK's built-in ones). */
export const SAMPLER_NAMES = [
  'always_on',
  'always_off',
  'traceidratio',
  'parentbased_always_on',
  'parentbased_always_off',
  'parentbased_traceidratio',
] as const;

export type SamplerName = (typeof SAMPLER_NAMES)[number];

/** Which requests are traced: a sampler and, for the ratio samplers, the share of traces kept (0 to 1). */
export interface SamplerSettings {
  readonly name: SamplerName;
  readonly ratio: number;
}

/** How OTLP is sent: protobuf or JSON over HTTP. */
export type OtlpProtocol = 'http/protobuf' | 'http/json';

/** The batch span processor's settings (`OTEL_BSP_*`). */
export interface BatchSettings {
  /** Delay between two exports, in ms. */
  readonly scheduleDelayMs: number;
  /** Longest one export may take before the processor gives up on it, in ms. */
  readonly exportTimeoutMs: number;
  /** Ended spans held waiting for export at most; more are dropped (and counted). */
  readonly maxQueueSize: number;
  /** Spans per export at most. */
  readonly maxExportBatchSize: number;
}

/**
 * One OTLP destination: where it is and the headers each export carries (which may hold a credential: never logged).
 */
export interface OtlpDestination {
  /** The whole URL the exports are POSTed to (`…/v1/traces`, `…/v1/metrics`). */
  readonly url: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly protocol: OtlpProtocol;
  /** Longest one export request may take, retries included, in ms. */
  readonly timeoutMs: number;
}

/**
 * OpenTelemetry as configured by the standard `OTEL_*` variables over the config file's `tracing:`
 * section. Traces are on only with a traces destination; GenAI metrics go out over OTLP only with a
 * metrics destination (they are on `/metrics` either way).
 */
export interface TracingSettings {
  /** Where spans go; undefined: tracing is off (no span is made). */
  readonly traces?: OtlpDestination;
  /** Where the GenAI metrics go over OTLP; undefined: only on `/metrics`. */
  readonly metrics?: OtlpDestination;
  /** Where the audit log's records also go, as OTLP logs; undefined: not sent. */
  readonly logs?: OtlpDestination;
  /** `service.name` of the resource. */
  readonly serviceName: string;
  /** Further resource attributes (`OTEL_RESOURCE_ATTRIBUTES`). */
  readonly resourceAttributes: Readonly<Record<string, string>>;
  /** The one setting a live reload may change. */
  readonly sampler: SamplerSettings;
  readonly batch: BatchSettings;
  /** Interval of the OTLP metric exports, in ms. */
  readonly metricExportIntervalMs: number;
  /**
   * Prompt and completion text on spans (`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`); never by default.
   */
  readonly captureMessageContent: boolean;
}

/** The SDK's defaults: parent-based always-on sampling, a 5 s batch delay, a queue of 2048 spans. */
export const DEFAULT_TRACING: TracingSettings = {
  serviceName: 'model-gateway',
  resourceAttributes: {},
  sampler: { name: 'parentbased_always_on', ratio: 1 },
  batch: { scheduleDelayMs: 5000, exportTimeoutMs: 30_000, maxQueueSize: 2048, maxExportBatchSize: 512 },
  metricExportIntervalMs: 60_000,
  captureMessageContent: false,
};
