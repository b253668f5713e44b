import { createRequire } from 'node:module';
import type { Logger } from 'pino';
import type { GatewayConfig } from '../../config/gateway-config.ts';
import type { EventSource } from '../../core/diagnostics.ts';
import { createAccessLogger } from '../../core/logger.ts';
import { startAuditTrail } from '../../ops/audit/audit-trail.ts';
import { startLimitAlerts } from '../../ops/alerts/limit-alerts.ts';
import { observeGateway } from '../../ops/request-observer.ts';
import { GatewayMetrics } from '../../ops/metrics.ts';
import type { OpenStores } from '../../stores/open-stores.ts';
import type { LimitLedger } from '../../usage/limit-ledger.ts';
import type { UsageStore } from '../../usage/usage-accounting.ts';
import { reloadApplied } from '../access-wiring.ts';
import type { Configuration } from './configuration.ts';

/**
 * The gateway's version (`service.version` of its traces), from its own package.json (self-referenced,
 * so the compiled build finds it too); `unknown` where the code runs without it (a bare compiled tree).
 */
export const VERSION = ((): string => {
  try {
    return (createRequire(import.meta.url)('model-gateway/package.json') as { version: string }).version;
  } catch {
    return 'unknown';
  }
})();

/** What watches the gateway: its events' source, the metrics, the access log, and what closes them. */
export interface Observability {
  /** Whose events this gateway's are: its observers see its requests only, not another gateway's in the process. */
  readonly source: EventSource;
  readonly metrics: GatewayMetrics;
  /** Resolves once every settlement so far is evaluated for limit alerts and every webhook delivery started ended. */
  flushAlerts(): Promise<void>;
  /** Sends what is still queued (spans, OTLP metrics: 5 s at most) and unsubscribes every observer. */
  close(): Promise<void>;
}

type Stores = OpenStores<UsageStore, LimitLedger>;

/**
 * Metrics, the access log, the failover and plugin fault logs, the guardrail action log, the audit log
 * and (when configured) OpenTelemetry traces, metrics and audit logs, each subscribed to the gateway's
 * events.
 */
export async function startObservability(
  config: GatewayConfig,
  env: NodeJS.ProcessEnv,
  logger: Logger,
  configuration: Configuration,
  stores: Stores,
): Promise<Observability> {
  const source = {};
  const metrics = gatewayMetrics(env, configuration, stores);
  const accessLogger = createAccessLogger(logger);
  const auditTrail = startAuditTrail({ source, store: stores.audit, logger, export: auditExport(config.auditExport) });
  const unobserve = observeGateway(source, {
    logger,
    accessLogger,
    metrics,
    guardrailActions: stores.guardrailActions,
  });
  const traces = await startTraces(config, logger, source, metrics);
  const { ledger, alerts: log } = stores;
  const alerts = startLimitAlerts({ source, settings: config.alerts, ledger, log, logger, metrics });
  configuration.onResult((result) => metrics.configReload(result));
  configuration.onReload((settings, previous) => {
    logger.level = settings.config.logLevel;
    accessLogger.level = settings.config.logLevel;
    traces.reloaded(settings.config.tracing.sampler);
    reloadApplied(source, settings, previous);
  });
  return {
    source,
    metrics,
    flushAlerts: () => alerts.idle(),
    async close() {
      await alerts.close();
      await traces.close();
      unobserve();
      await auditTrail.close();
    },
  };
}

/** The metrics, reading the usage queue, the config's state, the build and the endpoints' breakers when scraped. */
function gatewayMetrics(env: NodeJS.ProcessEnv, configuration: Configuration, stores: Stores): GatewayMetrics {
  const { live, endpoints } = configuration;
  const metrics = new GatewayMetrics({
    usageQueueDepth: () => (stores.usage as Partial<{ queueDepth: number }>).queueDepth ?? 0,
    configStale: () => live.lastError !== undefined,
    build: { version: VERSION, revision: env.GATEWAY_REVISION || 'unknown' },
  });
  // gateway_endpoint_up reads the breakers of the endpoint pools in force at each scrape.
  metrics.setEndpointStates(function* () {
    for (const [provider, pool] of endpoints.pools()) {
      const states = pool.state();
      for (const [index, member] of pool.endpoints.entries())
        yield { provider, endpoint: member.endpoint.origin, up: states[index]!.status !== 'resting' };
    }
  });
  return metrics;
}

function auditExport(exportTo: GatewayConfig['auditExport']) {
  if (exportTo === undefined) return undefined;
  return exportTo === 'stdout' ? ('stdout' as const) : { file: exportTo };
}

/**
 * OpenTelemetry traces, GenAI metrics and audit records (OTLP logs), each when its endpoint is
 * configured. The SDK and its exporters load only then (they hold about 13 MB once loaded); without a
 * traces endpoint no request makes a span. Of the tracing settings only the sampler applies live.
 */
async function startTraces(config: GatewayConfig, logger: Logger, source: EventSource, metrics: GatewayMetrics) {
  const { traces, metrics: otlp, logs, sampler } = config.tracing;
  const counted = {
    exported: (count: number) => metrics.tracesExported(count),
    dropped: (reason: 'queue_full' | 'export_failed', count: number) => metrics.tracesDropped(reason, count),
  };
  const tracing = traces
    ? (await import('../../ops/tracing/otel-tracing.ts')).startTracing(config.tracing, counted, VERSION)
    : undefined;
  const otlpMetrics = otlp
    ? (await import('../../ops/tracing/otlp-metrics.ts')).startOtlpGenAiMetrics(
        config.tracing,
        metrics.registry,
        VERSION,
      )
    : undefined;
  const subscriber = tracing ? await import('../../ops/tracing/otel-tracing.ts') : undefined;
  const untraceRequests = tracing && subscriber?.traceExchanges(source, tracing.requests);
  const untraceAlerts = tracing && subscriber?.traceLimitAlerts(source, tracing.span);
  const untrace = () => (untraceRequests?.(), untraceAlerts?.());
  const auditLogs = logs
    ? (await import('../../ops/audit/otlp-audit-logs.ts')).startOtlpAuditLogs(config.tracing, source, logger, VERSION)
    : undefined;
  // Where spans, metrics and audit logs go, never the headers (they may carry a collector's credential).
  if (tracing)
    logger.info(
      { traces: withoutUserInfo(traces!.url), protocol: traces!.protocol, sampler: sampler.name, ratio: sampler.ratio },
      'tracing on: OTLP traces',
    );
  if (otlpMetrics)
    logger.info({ metrics: withoutUserInfo(otlp!.url), protocol: otlp!.protocol }, 'GenAI metrics over OTLP');
  if (auditLogs)
    logger.info({ logs: withoutUserInfo(logs!.url), protocol: logs!.protocol }, 'audit records as OTLP logs');
  return {
    reloaded(next: GatewayConfig['tracing']['sampler']) {
      if (tracing?.setSampler(next)) logger.info({ sampler: next.name, ratio: next.ratio }, 'trace sampler changed');
    },
    async close() {
      untrace?.();
      // What is still queued goes out now; a collector that is away loses it (the stop waits 5 s at most).
      await withinMs(Promise.all([tracing?.shutdown(), otlpMetrics?.shutdown(), auditLogs?.shutdown()]), 5000);
    },
  };
}

/** A URL as logged: without a user and password it may carry. */
function withoutUserInfo(url: string): string {
  const parsed = new URL(url);
  return `${parsed.origin}${parsed.pathname}`;
}

/** Waits for `work` (its failure ignored), `ms` at most. */
async function withinMs(work: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([work.catch(() => {}), new Promise((resolve) => (timer = setTimeout(resolve, ms)))]);
  clearTimeout(timer);
}
