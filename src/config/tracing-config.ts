import * as yup from 'yup';
import {
  DEFAULT_TRACING,
  SAMPLER_NAMES,
  type BatchSettings,
  type OtlpDestination,
  type OtlpProtocol,
  type SamplerName,
  type TracingSettings,
} from '../ops/tracing/tracing-settings.ts';
import { envFlag, isHttpUrl, type Problem } from './config-values.ts';

const positive = () => yup.number().integer().positive();

/** The config file's `tracing:` section (the standard `OTEL_*` variables override each field). */
export const tracingFileSchema = yup
  .object({
    enabled: yup.boolean(),
    endpoint: yup.string(),
    tracesEndpoint: yup.string(),
    metricsEndpoint: yup.string(),
    logsEndpoint: yup.string(),
    protocol: yup
      .string<OtlpProtocol>()
      .oneOf(['http/protobuf', 'http/json'], 'tracing.protocol must be http/protobuf or http/json'),
    timeoutMs: positive(),
    serviceName: yup.string(),
    resourceAttributes: yup.object(),
    sampler: yup
      .string<SamplerName>()
      .oneOf([...SAMPLER_NAMES], `tracing.sampler must be one of ${SAMPLER_NAMES.join(', ')}`),
    samplerArg: yup.number().min(0).max(1),
    batch: yup
      .object({
        scheduleDelayMs: yup.number().integer().min(0),
        exportTimeoutMs: positive(),
        maxQueueSize: positive(),
        maxExportBatchSize: positive(),
      })
      .noUnknown()
      .default(undefined),
    metricExportIntervalMs: positive(),
    captureMessageContent: yup.boolean(),
  })
  .noUnknown()
  .default(undefined);

export type TracingFile = yup.InferType<typeof tracingFileSchema>;

export type { Problem } from './config-values.ts';

/**
 * Tracing from the standard OpenTelemetry variables over the file's `tracing:` section: traces go out
 * when `OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (or the file's endpoints)
 * name a collector, unless `OTEL_SDK_DISABLED=true`, `OTEL_TRACES_EXPORTER=none` or `tracing.enabled:
 * false`; GenAI metrics and the audit log's records (OTLP logs) go the same way with the metrics and
 * the logs endpoint. Headers come from the environment only (they may carry a collector's credential),
 * and no problem quotes a value.
 */
export function tracingConfig(
  env: NodeJS.ProcessEnv,
  file: TracingFile | undefined,
  problem: Problem,
): TracingSettings {
  const disabled = envFlag(env, 'OTEL_SDK_DISABLED', problem) ?? file?.enabled === false;
  const { traces, metrics, logs } = otlpDestinations(env, file, problem);
  const resourceAttributes = {
    ...fileAttributes(file?.resourceAttributes, problem),
    ...envResourceAttributes(env, problem),
  };
  const serviceName =
    trimmed(env, 'OTEL_SERVICE_NAME') ??
    resourceAttributes['service.name'] ??
    file?.serviceName ??
    DEFAULT_TRACING.serviceName;
  delete resourceAttributes['service.name'];
  const batch = batchSettings(env, file, problem);
  return {
    ...(disabled || !traces ? {} : { traces }),
    ...(disabled || !metrics ? {} : { metrics }),
    ...(disabled || !logs ? {} : { logs }),
    serviceName,
    resourceAttributes,
    sampler: samplerSettings(env, file, problem),
    batch,
    metricExportIntervalMs:
      envInteger(env, 'OTEL_METRIC_EXPORT_INTERVAL', 1, problem) ??
      file?.metricExportIntervalMs ??
      DEFAULT_TRACING.metricExportIntervalMs,
    captureMessageContent:
      envFlag(env, 'OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT', problem) ??
      file?.captureMessageContent ??
      false,
  };
}

/** An environment variable's value, trimmed; undefined when unset or empty. */
const trimmed = (env: NodeJS.ProcessEnv, name: string) =>
  env[name] === undefined || env[name] === '' ? undefined : env[name]!.trim();

/** The OTLP signals the gateway sends: spans, the GenAI metrics, the audit log's records. */
type Signal = 'traces' | 'metrics' | 'logs';

/**
 * Where traces, GenAI metrics and audit records go over OTLP: each signal's own endpoint (a whole URL),
 * else the shared one with the signal's path appended; none for a signal whose exporter is `none`.
 */
function otlpDestinations(
  env: NodeJS.ProcessEnv,
  file: TracingFile | undefined,
  problem: Problem,
): Partial<Record<Signal, OtlpDestination>> {
  const shared = sharedOtlpSettings(env, file, problem);
  const traces = exporterOn(env, 'OTEL_TRACES_EXPORTER', problem)
    ? signalDestination(env, shared, 'traces', file?.tracesEndpoint, problem)
    : undefined;
  const metrics = exporterOn(env, 'OTEL_METRICS_EXPORTER', problem)
    ? signalDestination(env, shared, 'metrics', file?.metricsEndpoint, problem)
    : undefined;
  const logs = exporterOn(env, 'OTEL_LOGS_EXPORTER', problem)
    ? signalDestination(env, shared, 'logs', file?.logsEndpoint, problem)
    : undefined;
  return { traces, metrics, logs };
}

/** What every signal's destination takes unless its own variables say otherwise. */
interface SharedOtlpSettings {
  /** The shared endpoint, a base the signal's path is appended to, and the setting that gave it. */
  readonly base: string | undefined;
  readonly baseName: string;
  readonly timeoutMs: number;
  readonly protocol: OtlpProtocol;
  readonly headers: Record<string, string>;
}

/** The shared OTLP endpoint, timeout, protocol and headers: the `OTEL_EXPORTER_OTLP_*` variables over the file's. */
function sharedOtlpSettings(
  env: NodeJS.ProcessEnv,
  file: TracingFile | undefined,
  problem: Problem,
): SharedOtlpSettings {
  return {
    base: trimmed(env, 'OTEL_EXPORTER_OTLP_ENDPOINT') ?? file?.endpoint,
    baseName: trimmed(env, 'OTEL_EXPORTER_OTLP_ENDPOINT') ? 'OTEL_EXPORTER_OTLP_ENDPOINT' : 'tracing.endpoint',
    timeoutMs: envInteger(env, 'OTEL_EXPORTER_OTLP_TIMEOUT', 1, problem) ?? file?.timeoutMs ?? 10_000,
    protocol: envProtocol(env, 'OTEL_EXPORTER_OTLP_PROTOCOL', problem) ?? file?.protocol ?? 'http/protobuf',
    headers: envHeaders(env, 'OTEL_EXPORTER_OTLP_HEADERS', problem),
  };
}

/** Whether the exporter variable `name` sends its signal over OTLP (unset: it does); an unknown value is a problem. */
function exporterOn(env: NodeJS.ProcessEnv, name: string, problem: Problem): boolean {
  const value = trimmed(env, name)?.toLowerCase();
  if (value === undefined || value === 'otlp') return true;
  if (value === 'none') return false;
  // Prometheus is served on /metrics whatever this says.
  if (name === 'OTEL_METRICS_EXPORTER' && value === 'prometheus') return false;
  problem(
    `${name} must be otlp or none${name === 'OTEL_METRICS_EXPORTER' ? ' (or prometheus: /metrics is always served)' : ''}, got '${value}'`,
  );
  return false;
}

/**
 * One signal's destination: its own endpoint (`own`, the file's `<signal>Endpoint`) and settings over the shared
 * ones; none when no endpoint is given or it is not an http(s) URL (a problem, named by the setting that gave it).
 */
function signalDestination(
  env: NodeJS.ProcessEnv,
  shared: SharedOtlpSettings,
  signal: Signal,
  own: string | undefined,
  problem: Problem,
): OtlpDestination | undefined {
  const upper = signal.toUpperCase();
  const envName = `OTEL_EXPORTER_OTLP_${upper}_ENDPOINT`;
  const { base } = shared;
  // A signal's own endpoint is the whole URL; the shared one is a base the signal's path is appended to.
  const url =
    trimmed(env, envName) ?? own ?? (base === undefined ? undefined : `${base.replace(/\/+$/, '')}/v1/${signal}`);
  if (url === undefined) return undefined;
  const name = trimmed(env, envName) ? envName : own !== undefined ? `tracing.${signal}Endpoint` : shared.baseName;
  if (!isHttpUrl(url)) {
    problem(
      `${name} must be an http:// or https:// URL`,
      name.startsWith('tracing.') ? ['tracing', name.slice('tracing.'.length)] : undefined,
    );
    return undefined;
  }
  return {
    url,
    protocol: envProtocol(env, `OTEL_EXPORTER_OTLP_${upper}_PROTOCOL`, problem) ?? shared.protocol,
    headers: { ...shared.headers, ...envHeaders(env, `OTEL_EXPORTER_OTLP_${upper}_HEADERS`, problem) },
    timeoutMs: envInteger(env, `OTEL_EXPORTER_OTLP_${upper}_TIMEOUT`, 1, problem) ?? shared.timeoutMs,
  };
}

/** The batch span processor's settings: the `OTEL_BSP_*` variables over the file's `tracing.batch`. */
function batchSettings(env: NodeJS.ProcessEnv, file: TracingFile | undefined, problem: Problem): BatchSettings {
  const fileBatch = file?.batch;
  const defaults = DEFAULT_TRACING.batch;
  const batch: BatchSettings = {
    scheduleDelayMs:
      envInteger(env, 'OTEL_BSP_SCHEDULE_DELAY', 0, problem) ?? fileBatch?.scheduleDelayMs ?? defaults.scheduleDelayMs,
    exportTimeoutMs:
      envInteger(env, 'OTEL_BSP_EXPORT_TIMEOUT', 1, problem) ?? fileBatch?.exportTimeoutMs ?? defaults.exportTimeoutMs,
    maxQueueSize:
      envInteger(env, 'OTEL_BSP_MAX_QUEUE_SIZE', 1, problem) ?? fileBatch?.maxQueueSize ?? defaults.maxQueueSize,
    maxExportBatchSize:
      envInteger(env, 'OTEL_BSP_MAX_EXPORT_BATCH_SIZE', 1, problem) ??
      fileBatch?.maxExportBatchSize ??
      defaults.maxExportBatchSize,
  };
  if (batch.maxExportBatchSize > batch.maxQueueSize) {
    const at = fileBatch?.maxExportBatchSize === undefined ? undefined : ['tracing', 'batch', 'maxExportBatchSize'];
    problem(
      `the batch size of span exports (${batch.maxExportBatchSize}) cannot be more than the span queue (${batch.maxQueueSize})`,
      at,
    );
  }
  return batch;
}

function samplerSettings(
  env: NodeJS.ProcessEnv,
  file: TracingFile | undefined,
  problem: Problem,
): TracingSettings['sampler'] {
  const fromEnv = env.OTEL_TRACES_SAMPLER?.trim().toLowerCase() || undefined;
  let name: SamplerName = file?.sampler ?? DEFAULT_TRACING.sampler.name;
  if (fromEnv !== undefined) {
    if ((SAMPLER_NAMES as readonly string[]).includes(fromEnv)) name = fromEnv as SamplerName;
    else problem(`OTEL_TRACES_SAMPLER must be one of ${SAMPLER_NAMES.join(', ')}, got '${fromEnv}'`);
  }
  const argText = env.OTEL_TRACES_SAMPLER_ARG?.trim() || undefined;
  let ratio = file?.samplerArg ?? 1;
  if (argText !== undefined) {
    const value = Number(argText);
    if (Number.isFinite(value) && value >= 0 && value <= 1) ratio = value;
    else problem(`OTEL_TRACES_SAMPLER_ARG must be a number from 0 to 1, got '${argText}'`);
  }
  return { name, ratio };
}

function envInteger(env: NodeJS.ProcessEnv, name: string, min: number, problem: Problem): number | undefined {
  const value = env[name]?.trim();
  if (value === undefined || value === '') return undefined;
  if (/^\d+$/.test(value) && Number(value) >= min) return Number(value);
  problem(`${name} must be an integer >= ${min}, got '${value}'`);
  return undefined;
}

function envProtocol(env: NodeJS.ProcessEnv, name: string, problem: Problem): OtlpProtocol | undefined {
  const value = env[name]?.trim();
  if (value === undefined || value === '') return undefined;
  if (value === 'http/protobuf' || value === 'http/json') return value;
  problem(
    `${name} must be http/protobuf or http/json${value === 'grpc' ? " (OTLP over gRPC is not supported: point it at the collector's HTTP port, 4318)" : ''}, got '${value}'`,
  );
  return undefined;
}

/**
 * `key1=value1,key2=value2` with percent-encoded values (the W3C Baggage form the OpenTelemetry
 * variables use). A bad entry is named by its position only: the values may be credentials.
 */
function keyValueList(env: NodeJS.ProcessEnv, name: string, problem: Problem): Record<string, string> {
  const text = env[name];
  const pairs: Record<string, string> = {};
  if (!text) return pairs;
  text.split(',').forEach((entry, index) => {
    if (entry.trim() === '') return;
    const at = entry.indexOf('=');
    const key = at === -1 ? '' : entry.slice(0, at).trim();
    let value: string | undefined;
    try {
      value = at === -1 ? undefined : decodeURIComponent(entry.slice(at + 1).trim());
    } catch {
      value = undefined;
    }
    if (key === '' || value === undefined) problem(`${name} entry ${index + 1} is not key=value (percent-encoded)`);
    else pairs[key] = value;
  });
  return pairs;
}

function envHeaders(env: NodeJS.ProcessEnv, name: string, problem: Problem): Record<string, string> {
  const headers = keyValueList(env, name, problem);
  return Object.fromEntries(Object.entries(headers).map(([key, value]) => [key.toLowerCase(), value]));
}

function envResourceAttributes(env: NodeJS.ProcessEnv, problem: Problem): Record<string, string> {
  return keyValueList(env, 'OTEL_RESOURCE_ATTRIBUTES', problem);
}

function fileAttributes(value: Record<string, unknown> | undefined, problem: Problem): Record<string, string> {
  const attributes: Record<string, string> = {};
  for (const [key, entry] of Object.entries(value ?? {})) {
    if (typeof entry === 'string' || typeof entry === 'number' || typeof entry === 'boolean')
      attributes[key] = String(entry);
    else
      problem(`tracing.resourceAttributes.${key} must be a string, number or boolean`, [
        'tracing',
        'resourceAttributes',
        key,
      ]);
  }
  return attributes;
}
