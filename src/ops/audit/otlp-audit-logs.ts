import { SeverityNumber, type LogAttributes, type LogRecord } from '@opentelemetry/api-logs';
import { ExportResultCode } from '@opentelemetry/core';
import { OTLPLogExporter as JsonLogExporter } from '@opentelemetry/exporter-logs-otlp-http';
import { OTLPLogExporter as ProtobufLogExporter } from '@opentelemetry/exporter-logs-otlp-proto';
import { BatchLogRecordProcessor, LoggerProvider, type LogRecordExporter } from '@opentelemetry/sdk-logs';
import type { Logger } from 'pino';
import type { EventSource } from '../../core/diagnostics.ts';
import type { AuditEntry } from '../../stores/audit/audit-store.ts';
import { gatewayResource } from '../tracing/otel-tracing.ts';
import type { OtlpDestination, TracingSettings } from '../tracing/tracing-settings.ts';
import { onAuditEntries } from './audit-trail.ts';

/** The `event_name` of every audit record sent as an OTLP log record. */
export const AUDIT_EVENT_NAME = 'gateway.audit';

/** How long a stop waits for the records still queued. */
const SHUTDOWN_MS = 5000;

/** The audit log's records on their way to the collector; stopped with {@link shutdown}. */
export interface OtlpAuditLogs {
  /** Sends what is queued now. */
  flush(): Promise<void>;
  /** Stops listening, sends what is queued and stops: 5 s at most (a collector that is away loses it). */
  shutdown(): Promise<void>;
}

/**
 * One audit entry as an OTLP log record: the entry whole, as the JSON line the audit export writes
 * (without its place in the hash chain, which the store gives), in the body; what a log backend filters
 * on as attributes; a refusal at WARN, everything else at INFO. Ids, names and the API's views only:
 * an entry never holds a secret or a hash of one.
 */
export function auditLogRecord(entry: AuditEntry): LogRecord {
  const attributes: LogAttributes = {
    'gateway.audit.action': entry.action,
    'gateway.audit.outcome': entry.outcome,
    'gateway.audit.via': entry.via,
    'gateway.audit.target.type': entry.target.type,
  };
  const optional: Record<string, string | readonly string[] | null | undefined> = {
    'gateway.audit.actor.kind': entry.actor?.kind,
    'gateway.audit.actor.id': entry.actor?.id,
    'gateway.audit.actor.name': entry.actor?.name,
    'gateway.audit.actor.roles': entry.actor?.roles,
    'gateway.audit.target.id': entry.target.id,
    'gateway.audit.target.team': entry.target.team,
    'gateway.audit.reason': entry.reason,
    'client.address': entry.address,
  };
  for (const [name, value] of Object.entries(optional)) {
    if (value !== undefined && value !== null) attributes[name] = value as string | string[];
  }
  const time = Date.parse(entry.time);
  const refused = entry.outcome === 'refused';
  return {
    eventName: AUDIT_EVENT_NAME,
    timestamp: time,
    observedTimestamp: time,
    severityNumber: refused ? SeverityNumber.WARN : SeverityNumber.INFO,
    severityText: refused ? 'WARN' : 'INFO',
    body: JSON.stringify(entry),
    attributes,
  };
}

/**
 * The exporter the batch processor calls, each export started on a later turn of the event loop (never
 * inside the request whose change filled a batch) and each failed export logged: how many records, never
 * what they hold. The audit log's store keeps every record whatever the collector does.
 */
function deferred(exporter: LogRecordExporter, logger: Logger): LogRecordExporter {
  return {
    export: (records, done) =>
      void setImmediate(() =>
        exporter.export(records, (result) => {
          if (result.code !== ExportResultCode.SUCCESS) {
            const lost = { records: records.length, err: result.error?.message };
            logger.warn(lost, 'audit records could not be sent as OTLP logs');
          }
          done(result);
        }),
      ),
    shutdown: () => exporter.shutdown(),
    forceFlush: () => exporter.forceFlush(),
  };
}

function logExporter(destination: OtlpDestination): LogRecordExporter {
  const options = { url: destination.url, headers: { ...destination.headers }, timeoutMillis: destination.timeoutMs };
  return destination.protocol === 'http/json' ? new JsonLogExporter(options) : new ProtobufLogExporter(options);
}

/**
 * The audit log as OTLP logs, beside its store and its JSON export: one more subscriber of the gateway's
 * control-plane changes, refusals and sign-ins, each one log record ({@link auditLogRecord}) handed to the
 * OpenTelemetry logs SDK's batch processor (SDK defaults: a batch each second, 2048 queued at most, 30 s
 * per export) and sent over OTLP/HTTP off the request path. The provider is this gateway's own, not
 * registered globally. Undefined without a logs endpoint.
 */
export function startOtlpAuditLogs(
  settings: TracingSettings,
  source: EventSource,
  logger: Logger,
  version: string,
): OtlpAuditLogs | undefined {
  if (!settings.logs) return undefined;
  const exporter = deferred(logExporter(settings.logs), logger);
  const processor = new BatchLogRecordProcessor({ exporter, exportTimeoutMillis: settings.logs.timeoutMs });
  const provider = new LoggerProvider({ resource: gatewayResource(settings, version), processors: [processor] });
  const otlp = provider.getLogger('model-gateway', version);
  const stop = onAuditEntries(source, (entry) => otlp.emit(auditLogRecord(entry)));
  return {
    flush: () => provider.forceFlush(),
    async shutdown() {
      stop();
      let timer: NodeJS.Timeout | undefined;
      const waited = new Promise<void>((resolve) => (timer = setTimeout(resolve, SHUTDOWN_MS)));
      await Promise.race([provider.shutdown().catch(() => {}), waited]);
      clearTimeout(timer);
    },
  };
}
