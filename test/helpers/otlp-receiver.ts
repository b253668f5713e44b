import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import protobuf from 'protobufjs';

const PROTOS = fileURLToPath(new URL('../fixtures/opentelemetry-proto/', import.meta.url));

/** The OTLP export requests, from the official `.proto` files (v1.9.0) loaded with protobufjs. */
function loadOtlp(): { traces: protobuf.Type; metrics: protobuf.Type; logs: protobuf.Type } {
  const root = new protobuf.Root();
  root.resolvePath = (_origin, target) => (target.startsWith('/') ? target : `${PROTOS}${target}`);
  const services = ['trace/v1/trace_service.proto', 'metrics/v1/metrics_service.proto', 'logs/v1/logs_service.proto'];
  root.loadSync(
    services.map((file) => `opentelemetry/proto/collector/${file}`),
    { keepCase: false },
  );
  return {
    traces: root.lookupType('opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest'),
    metrics: root.lookupType('opentelemetry.proto.collector.metrics.v1.ExportMetricsServiceRequest'),
    logs: root.lookupType('opentelemetry.proto.collector.logs.v1.ExportLogsServiceRequest'),
  };
}

const OTLP = loadOtlp();

export type AttributeValue = string | number | boolean | AttributeValue[] | undefined;

export interface ReceivedEvent {
  readonly name: string;
  readonly timeUnixNano: bigint;
  readonly attributes: Record<string, AttributeValue>;
}

/** One span as exported, its ids in hex and its attributes flattened. */
export interface ReceivedSpan {
  readonly traceId: string;
  readonly spanId: string;
  readonly parentSpanId: string;
  readonly traceState: string;
  readonly name: string;
  /** 1 internal, 2 server, 3 client (the OTLP enum). */
  readonly kind: number;
  readonly startTimeUnixNano: bigint;
  readonly endTimeUnixNano: bigint;
  readonly attributes: Record<string, AttributeValue>;
  readonly events: readonly ReceivedEvent[];
  /** 0 unset, 1 ok, 2 error. */
  readonly status: { readonly code: number; readonly message: string };
  readonly resource: Record<string, AttributeValue>;
}

/** One metric as exported, with the attributes of each of its data points. */
export interface ReceivedMetric {
  readonly name: string;
  readonly unit: string;
  readonly points: readonly {
    readonly attributes: Record<string, AttributeValue>;
    readonly count?: number;
    readonly sum?: number;
  }[];
}

/** One log record as exported, with its scope and resource. */
export interface ReceivedLogRecord {
  readonly timeUnixNano: bigint;
  readonly observedTimeUnixNano: bigint;
  /** The OTLP severity number: 9 INFO, 13 WARN. */
  readonly severityNumber: number;
  readonly severityText: string;
  readonly eventName: string;
  readonly body: AttributeValue;
  readonly attributes: Record<string, AttributeValue>;
  readonly scope: string;
  readonly resource: Record<string, AttributeValue>;
}

type Json = Record<string, any>;

function attributeValue(value: Json | undefined): AttributeValue {
  if (!value) return undefined;
  if (value.stringValue !== undefined) return value.stringValue as string;
  if (value.boolValue !== undefined) return value.boolValue as boolean;
  if (value.intValue !== undefined) return Number(value.intValue);
  if (value.doubleValue !== undefined) return Number(value.doubleValue);
  if (value.arrayValue !== undefined) return ((value.arrayValue.values ?? []) as Json[]).map(attributeValue);
  return undefined;
}

function attributes(list: Json[] | undefined): Record<string, AttributeValue> {
  return Object.fromEntries((list ?? []).map((entry) => [entry.key as string, attributeValue(entry.value as Json)]));
}

const hex = (base64: string | undefined) => Buffer.from(base64 ?? '', 'base64').toString('hex');

/**
 * OTLP/JSON writes ids as hex strings where the protobuf JSON mapping has base64, and enums as numbers:
 * the ids are turned into bytes so that the official message type reads the rest.
 */
function jsonIdsToBytes(value: unknown, key = ''): unknown {
  if (Array.isArray(value)) return value.map((item) => jsonIdsToBytes(item));
  if (value && typeof value === 'object')
    return Object.fromEntries(Object.entries(value).map(([name, item]) => [name, jsonIdsToBytes(item, name)]));
  if (typeof value === 'string' && (key === 'traceId' || key === 'spanId' || key === 'parentSpanId'))
    return Buffer.from(value, 'hex');
  return value;
}

/** An export request decoded with the official message type, from protobuf bytes or OTLP/JSON text. */
function decode(type: protobuf.Type, contentType: string, body: Buffer): Json {
  let message: protobuf.Message;
  if (contentType.startsWith('application/x-protobuf')) message = type.decode(body);
  else if (contentType.startsWith('application/json')) {
    const object = jsonIdsToBytes(JSON.parse(body.toString('utf8'))) as Json;
    const problem = type.verify(type.fromObject(object));
    if (problem) throw new Error(`OTLP/JSON does not fit ${type.name}: ${problem}`);
    message = type.fromObject(object);
  } else throw new Error(`unexpected content type ${contentType}`);
  return type.toObject(message, { longs: String, enums: Number, bytes: String, defaults: false, arrays: true });
}

function spansOf(request: Json): ReceivedSpan[] {
  return (request.resourceSpans as Json[]).flatMap((resourceSpans) => {
    const resource = attributes(resourceSpans.resource?.attributes);
    return (resourceSpans.scopeSpans as Json[]).flatMap((scope) =>
      ((scope.spans ?? []) as Json[]).map((span) => ({
        traceId: hex(span.traceId),
        spanId: hex(span.spanId),
        parentSpanId: hex(span.parentSpanId),
        traceState: (span.traceState as string | undefined) ?? '',
        name: span.name as string,
        kind: (span.kind as number | undefined) ?? 0,
        startTimeUnixNano: BigInt(span.startTimeUnixNano ?? 0),
        endTimeUnixNano: BigInt(span.endTimeUnixNano ?? 0),
        attributes: attributes(span.attributes),
        events: ((span.events ?? []) as Json[]).map((event) => ({
          name: event.name as string,
          timeUnixNano: BigInt(event.timeUnixNano ?? 0),
          attributes: attributes(event.attributes),
        })),
        status: {
          code: (span.status?.code as number | undefined) ?? 0,
          message: (span.status?.message as string | undefined) ?? '',
        },
        resource,
      })),
    );
  });
}

function metricsOf(request: Json): ReceivedMetric[] {
  return (request.resourceMetrics as Json[]).flatMap((resourceMetrics) =>
    ((resourceMetrics.scopeMetrics ?? []) as Json[]).flatMap((scope) =>
      ((scope.metrics ?? []) as Json[]).map((metric) => {
        const data = (metric.histogram ?? metric.sum ?? metric.gauge ?? {}) as Json;
        return {
          name: metric.name as string,
          unit: (metric.unit as string | undefined) ?? '',
          points: ((data.dataPoints ?? []) as Json[]).map((point) => ({
            attributes: attributes(point.attributes),
            count: point.count === undefined ? undefined : Number(point.count),
            sum: point.sum,
          })),
        };
      }),
    ),
  );
}

function logsOf(request: Json): ReceivedLogRecord[] {
  return ((request.resourceLogs ?? []) as Json[]).flatMap((resourceLogs) => {
    const resource = attributes(resourceLogs.resource?.attributes);
    return ((resourceLogs.scopeLogs ?? []) as Json[]).flatMap((scope) =>
      ((scope.logRecords ?? []) as Json[]).map((record) => ({
        timeUnixNano: BigInt(record.timeUnixNano ?? 0),
        observedTimeUnixNano: BigInt(record.observedTimeUnixNano ?? 0),
        severityNumber: (record.severityNumber as number | undefined) ?? 0,
        severityText: (record.severityText as string | undefined) ?? '',
        eventName: (record.eventName as string | undefined) ?? '',
        body: attributeValue(record.body as Json | undefined),
        attributes: attributes(record.attributes),
        scope: (scope.scope?.name as string | undefined) ?? '',
        resource,
      })),
    );
  });
}

/**
 * A collector on a real socket: an OTLP/HTTP receiver (`/v1/traces`, `/v1/metrics`, `/v1/logs`) that decodes each
 * export with the official definitions, in either encoding, and keeps what came. `answer` scripts a
 * collector in trouble (a 503, or no answer at all).
 */
export class OtlpReceiver {
  readonly spans: ReceivedSpan[] = [];
  readonly metrics: ReceivedMetric[] = [];
  readonly logs: ReceivedLogRecord[] = [];
  /** The content type of every export received. */
  readonly contentTypes: string[] = [];
  /** A decoding problem, kept so that a test fails on it rather than the exporter retrying. */
  readonly problems: string[] = [];
  answer: 'ok' | 'unavailable' | 'hang' = 'ok';

  private constructor(private readonly server: Server) {}

  static async start(): Promise<OtlpReceiver> {
    const server = createServer();
    const receiver = new OtlpReceiver(server);
    server.on('request', async (req, res) => {
      const chunks: Buffer[] = [];
      for await (const chunk of req) chunks.push(chunk as Buffer);
      if (receiver.answer === 'hang') return;
      if (receiver.answer === 'unavailable') return void res.writeHead(503).end();
      const contentType = req.headers['content-type'] ?? '';
      receiver.contentTypes.push(contentType);
      try {
        if (req.url === '/v1/traces')
          receiver.spans.push(...spansOf(decode(OTLP.traces, contentType, Buffer.concat(chunks))));
        else if (req.url === '/v1/metrics')
          receiver.metrics.push(...metricsOf(decode(OTLP.metrics, contentType, Buffer.concat(chunks))));
        else if (req.url === '/v1/logs')
          receiver.logs.push(...logsOf(decode(OTLP.logs, contentType, Buffer.concat(chunks))));
        else return void res.writeHead(404).end();
      } catch (error) {
        receiver.problems.push(String(error));
        return void res.writeHead(400).end();
      }
      const json = contentType.startsWith('application/json');
      res
        .writeHead(200, { 'content-type': json ? 'application/json' : 'application/x-protobuf' })
        .end(json ? '{}' : Buffer.alloc(0));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return receiver;
  }

  /** `http://127.0.0.1:port`, the base `OTEL_EXPORTER_OTLP_ENDPOINT` takes. */
  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  /** The spans of one trace. */
  trace(traceId: string): ReceivedSpan[] {
    return this.spans.filter((span) => span.traceId === traceId);
  }

  /** Stops listening (the collector is down) and cuts every open connection. */
  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise((resolve) => this.server.close(resolve));
  }
}
