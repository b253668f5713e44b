import {
  SpanKind,
  type Attributes,
  type Context,
  type Link,
  ROOT_CONTEXT,
  SpanStatusCode,
  trace,
  type Span,
  type TextMapPropagator,
  type Tracer,
} from '@opentelemetry/api';
import { W3CTraceContextPropagator, ExportResultCode, type ExportResult } from '@opentelemetry/core';
import { OTLPTraceExporter as JsonTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as ProtobufTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { resourceFromAttributes, type Resource } from '@opentelemetry/resources';
import {
  BasicTracerProvider,
  type SpanExporter,
  AlwaysOffSampler,
  AlwaysOnSampler,
  ParentBasedSampler,
  TraceIdRatioBasedSampler,
  type Sampler,
  type SamplingResult,
  BatchSpanProcessor,
  type ReadableSpan,
  type Span as SdkSpan,
  type SpanProcessor,
  SamplingDecision,
  type IdGenerator,
} from '@opentelemetry/sdk-trace-base';
import { ATTR_SERVICE_NAME, ATTR_SERVICE_VERSION } from '@opentelemetry/semantic-conventions';
import { randomUUID } from 'node:crypto';
import type {
  RequestTracing,
  TraceAttributes,
  AttemptStart,
  AttemptTrace,
  RecordedAnswer,
  RequestStart,
  RequestTrace,
  UnsampledTrace,
} from './request-trace.ts';
import type { OtlpDestination, SamplerSettings, TracingSettings, BatchSettings } from './tracing-settings.ts';
import type { LimitRefusal } from '../../core/gateway-errors.ts';
import type { SettledFigures, UsageOutcome, ExchangeView } from '../../core/exchange.ts';
import { ATTR, EVENT, LIMIT_ALERT_SPAN } from './span-names.ts';
import {
  EVENTS,
  type AttemptStartMessage,
  type EventSource,
  type ExchangeEndMessage,
  type ExchangeRecordedMessage,
} from '../../core/diagnostics.ts';

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

/** The SDK's sampler for `OTEL_TRACES_SAMPLER` and its argument. */
export function samplerFor(settings: SamplerSettings): Sampler {
  switch (settings.name) {
    case 'always_on':
      return new AlwaysOnSampler();
    case 'always_off':
      return new AlwaysOffSampler();
    case 'traceidratio':
      return new TraceIdRatioBasedSampler(settings.ratio);
    case 'parentbased_always_on':
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
    case 'parentbased_always_off':
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'parentbased_traceidratio':
      return new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(settings.ratio) });
  }
}

/** The sampler never samples a trace of its own making: always off, or a ratio of 0 (or none). */
function rootsUnsampled(settings: SamplerSettings): boolean {
  if (settings.name === 'always_off' || settings.name === 'parentbased_always_off') return true;
  const ratio = settings.name === 'traceidratio' || settings.name === 'parentbased_traceidratio' ? settings.ratio : 1;
  return !(ratio > 0);
}

/** A sampler a live reload may replace: every span asks the one in force now. */
export class LiveSampler implements Sampler {
  private current: Sampler;
  private settings: SamplerSettings;

  /**
   * No trace without a sampled parent is ever sampled (`always_off`, a ratio of 0): a request without a client
   * `traceparent` then needs no sampler call, name or attributes to be told so.
   */
  rootsUnsampled: boolean;

  constructor(settings: SamplerSettings) {
    this.settings = settings;
    this.current = samplerFor(settings);
    this.rootsUnsampled = rootsUnsampled(settings);
  }

  /** Puts `settings` in force (a no-op when they are the ones in force); true when they changed. */
  update(settings: SamplerSettings): boolean {
    if (settings.name === this.settings.name && settings.ratio === this.settings.ratio) return false;
    this.settings = settings;
    this.current = samplerFor(settings);
    this.rootsUnsampled = rootsUnsampled(settings);
    return true;
  }

  shouldSample(
    context: Context,
    traceId: string,
    spanName: string,
    spanKind: SpanKind,
    attributes: Attributes,
    links: Link[],
  ): SamplingResult {
    return this.current.shouldSample(context, traceId, spanName, spanKind, attributes, links);
  }

  toString(): string {
    return `LiveSampler{${this.current.toString()}}`;
  }
}

/** Why spans were lost: the queue was full (the collector is slow or down), or an export failed. */
export type DropReason = 'queue_full' | 'export_failed';

/** Told of every span exported and every span lost. */
export interface SpanCounts {
  exported(count: number): void;
  dropped(reason: DropReason, count: number): void;
}

/**
 * The SDK's batch span processor with every lost span counted: ended spans wait in its queue and
 * go out in batches on a timer, never on a request's path. While the collector is down or slow the
 * queue fills; a span that finds it full is dropped here (the SDK would drop it too, but only say so
 * in a diagnostic line), and a batch whose export failed (after the exporter's retries, within its
 * timeout) is counted lost.
 */
export class CountedBatchProcessor implements SpanProcessor {
  private readonly inner: BatchSpanProcessor;
  /** Spans handed to the batch processor and not yet handed to the exporter. */
  private queued = 0;

  constructor(
    exporter: SpanExporter,
    private readonly batch: BatchSettings,
    private readonly counts: SpanCounts,
  ) {
    const counting: SpanExporter = {
      export: (spans, done) => {
        this.queued -= spans.length;
        // The batch processor starts an export from the `end()` of the span that filled a batch, and the
        // exporter serialises the batch at once: deferred, that work never runs inside a request's turn.
        setImmediate(() =>
          exporter.export(spans, (result: ExportResult) => {
            if (result.code === ExportResultCode.SUCCESS) counts.exported(spans.length);
            else counts.dropped('export_failed', spans.length);
            done(result);
          }),
        );
      },
      shutdown: () => exporter.shutdown(),
      forceFlush: () => exporter.forceFlush?.() ?? Promise.resolve(),
    };
    this.inner = new BatchSpanProcessor(counting, {
      maxQueueSize: batch.maxQueueSize,
      maxExportBatchSize: batch.maxExportBatchSize,
      scheduledDelayMillis: batch.scheduleDelayMs,
      exportTimeoutMillis: batch.exportTimeoutMs,
    });
  }

  onStart(span: SdkSpan, parentContext: Context): void {
    this.inner.onStart(span, parentContext);
  }

  onEnd(span: ReadableSpan): void {
    // Unsampled spans never reach the queue (as in the batch processor itself).
    if ((span.spanContext().traceFlags & 1) === 0) return;
    if (this.queued >= this.batch.maxQueueSize) {
      this.counts.dropped('queue_full', 1);
      return;
    }
    this.queued += 1;
    this.inner.onEnd(span);
  }

  forceFlush(): Promise<void> {
    return this.inner.forceFlush();
  }

  shutdown(): Promise<void> {
    return this.inner.shutdown();
  }
}

/**
 * What every request's trace shares: the tracer, its sampler and ids, the propagator, whether message text is captured.
 */
export interface TraceKit {
  readonly tracer: Tracer;
  /** The tracer's own sampler, asked once per request before any span is made. */
  readonly sampler: Sampler & Pick<LiveSampler, 'rootsUnsampled'>;
  readonly ids: TraceIds;
  readonly propagator: TextMapPropagator;
  readonly captureContent: boolean;
}

/** How an answer's usage outcome reads on the attempt that served it. */
const ATTEMPT_OUTCOMES: Record<UsageOutcome, string> = {
  complete: 'served',
  upstream_cut: 'cut',
  stalled: 'stalled',
  plugin_error: 'plugin_fault',
  client_closed: 'client_closed',
  client_stalled: 'client_stalled',
  guardrail_blocked: 'guardrail_blocked',
};
const FAILED_OUTCOMES = new Set<UsageOutcome>(['upstream_cut', 'stalled', 'plugin_error']);

const headerGetter = {
  keys: (carrier: RequestStart['headers']) => Object.keys(carrier),
  get: (carrier: RequestStart['headers'], key: string) => carrier[key],
};

/**
 * The W3C `traceparent` of a span, as the upstream is sent it (version 00). No `tracestate` goes with
 * it: the gateway adds no entry of its own, and a client's entries are not passed on to a provider.
 */
function traceparentOf(span: Span): string {
  const { traceId, spanId, traceFlags } = span.spanContext();
  return `00-${traceId}-${spanId}-0${traceFlags & 1}`;
}

/**
 * Event attributes without the undefined values, which events would keep. (A span's own attributes
 * need no such copy: the SDK skips undefined values there.)
 */
function defined(attributes: TraceAttributes): Attributes {
  const out: Attributes = {};
  for (const key in attributes) if (attributes[key] !== undefined) out[key] = attributes[key] as Attributes[string];
  return out;
}

/** One upstream attempt's client span, held by its request's trace until it is closed. */
class OtelAttempt implements AttemptTrace {
  readonly traceparent: string;
  readonly startedAt = performance.now();
  failure: { readonly reason: string; readonly status?: number; readonly at: number } | undefined;
  status: number | undefined;
  ended = false;

  constructor(
    readonly span: Span,
    readonly endpoint: string,
  ) {
    this.traceparent = traceparentOf(span);
  }

  responded(status: number): void {
    this.status = status;
    this.span.setAttribute(ATTR.httpStatus, status);
  }

  firstContent(): void {
    const now = performance.now();
    this.span.setAttribute(ATTR.timeToFirstChunk, (now - this.startedAt) / 1000);
    this.span.addEvent(EVENT.firstToken, undefined, now);
  }

  failed(reason: string, status?: number): void {
    this.failure = { reason, status, at: performance.now() };
    this.span.setAttributes({
      [ATTR.errorType]: status === undefined ? 'transport' : String(status),
      [ATTR.httpStatus]: status,
    });
    this.span.setStatus({ code: SpanStatusCode.ERROR, message: reason });
  }

  /** Closes a failed attempt: failed over when `next` follows, failed when none does. */
  closeFailed(next: string | undefined): void {
    const failure = this.failure!;
    if (next !== undefined) {
      this.span.addEvent(
        EVENT.failover,
        { [ATTR.failoverReason]: failure.reason, [ATTR.failoverNext]: next },
        failure.at,
      );
    }
    this.span.setAttribute(ATTR.attemptOutcome, next === undefined ? 'failed' : 'failed_over');
    this.end(failure.at);
  }

  end(at?: number): void {
    if (this.ended) return;
    this.ended = true;
    this.span.end(at);
  }
}

/**
 * The trace of one sampled model request: its server span (a child of the client's `traceparent`
 * when it sent one) and a GenAI client span per upstream attempt.
 */
export class OtelRequestTrace implements RequestTrace {
  readonly recording = true;
  readonly capturesContent: boolean;
  private readonly context: Context;
  private current: OtelAttempt | undefined;
  private attemptCount = 0;
  private recordedStatus: number | undefined;
  private refusedCode: string | undefined;
  private answerFailed = false;
  private settling: Promise<unknown> | undefined;
  private ended = false;

  constructor(
    private readonly kit: TraceKit,
    private readonly span: Span,
    parent: Context,
  ) {
    this.capturesContent = kit.captureContent;
    this.context = trace.setSpan(parent, span);
  }

  event(name: string, attributes?: TraceAttributes): void {
    this.span.addEvent(name, attributes && defined(attributes));
  }

  set(attributes: TraceAttributes): void {
    this.span.setAttributes(attributes as Attributes);
  }

  refused(code: string, limit?: LimitRefusal): void {
    this.refusedCode = code;
    this.span.setAttributes({ [ATTR.errorCode]: code, [ATTR.errorType]: code });
    if (limit) {
      this.span.setAttributes({ [ATTR.limitKind]: limit.kind, [ATTR.limitScope]: limit.scope });
      this.span.addEvent(EVENT.refused, {
        [ATTR.limitKind]: limit.kind,
        [ATTR.limitScope]: limit.scope,
        [ATTR.errorCode]: code,
      });
    }
  }

  attempt(start: AttemptStart): AttemptTrace {
    const previous = this.current;
    if (previous && !previous.ended) {
      if (previous.failure) previous.closeFailed(start.endpoint);
      else previous.end();
    }
    this.attemptCount += 1;
    const { port, hostname } = originParts(start.origin);
    const attributes: TraceAttributes = {
      [ATTR.operation]: start.operation,
      [ATTR.provider]: start.provider,
      [ATTR.requestModel]: start.requestModel,
      [ATTR.endpoint]: start.endpoint,
      [ATTR.serverAddress]: hostname,
      [ATTR.serverPort]: port,
      [ATTR.attempt]: this.attemptCount,
      [ATTR.requestStream]: start.stream,
      [ATTR.requestMaxTokens]: start.maxTokens,
      [ATTR.requestTemperature]: start.temperature,
      [ATTR.requestTopP]: start.topP,
    };
    if (this.capturesContent && start.inputMessages) {
      const { system, messages } = start.inputMessages();
      attributes[ATTR.inputMessages] = JSON.stringify(messages);
      if (system !== undefined) attributes[ATTR.systemInstructions] = JSON.stringify(system);
    }
    const span = this.kit.tracer.startSpan(
      `${start.operation} ${start.requestModel}`,
      { kind: SpanKind.CLIENT, attributes: attributes as Attributes },
      this.context,
    );
    this.current = new OtelAttempt(span, start.endpoint);
    return this.current;
  }

  pluginFault(plugin: string, hook: string): void {
    const target = this.current && !this.current.ended ? this.current.span : this.span;
    target.addEvent(hook.startsWith('streamFixups') ? EVENT.fixupFault : EVENT.pluginFault, {
      [ATTR.plugin]: plugin,
      [ATTR.pluginHook]: hook,
    });
  }

  settled(figures: SettledFigures | undefined): void {
    this.span.addEvent(
      EVENT.settle,
      figures
        ? {
            [ATTR.settledTokens]: figures.totalTokens,
            [ATTR.settledChargedTokens]: figures.chargedTokens,
            [ATTR.settledCostUsd]: figures.costUsd,
          }
        : { [ATTR.settledTokens]: 0 },
    );
  }

  recorded(answer: RecordedAnswer): void {
    this.recordedStatus = answer.status;
    this.settling = answer.settling;
    const { usage } = answer;
    this.span.setAttributes({
      [ATTR.outcome]: answer.outcome,
      [ATTR.model]: answer.model,
      [ATTR.cacheResult]: answer.cacheHit ? 'hit' : undefined,
      [ATTR.attempts]: answer.attempts,
      [ATTR.costUsd]: answer.costUsd,
      // An answer from the cache has no attempt span to carry its (stored) usage.
      [ATTR.inputTokens]: answer.cacheHit ? usage?.inputTokens : undefined,
      [ATTR.outputTokens]: answer.cacheHit ? usage?.outputTokens : undefined,
    });
    if (FAILED_OUTCOMES.has(answer.outcome)) this.answerFailed = true;
    const attempt = this.current;
    this.current = undefined;
    if (!attempt || attempt.ended) return;
    if (attempt.failure) return attempt.closeFailed(undefined);
    const { span } = attempt;
    const facts = answer.facts;
    span.setAttributes({
      [ATTR.attemptOutcome]: ATTEMPT_OUTCOMES[answer.outcome],
      [ATTR.responseModel]: facts?.model,
      [ATTR.responseId]: facts?.id,
      [ATTR.finishReasons]: facts?.finishReasons,
      [ATTR.inputTokens]: usage?.inputTokens,
      [ATTR.outputTokens]: usage?.outputTokens,
      [ATTR.cacheReadTokens]: usage?.cachedTokens,
    });
    if (this.capturesContent && answer.outputText) {
      const message = {
        role: 'assistant',
        parts: [{ type: 'text', content: answer.outputText() }],
        finish_reason: facts?.finishReasons?.[0] ?? '',
      };
      span.setAttribute(ATTR.outputMessages, JSON.stringify([message]));
    }
    const upstreamStatus = attempt.status ?? answer.upstreamStatus;
    if (FAILED_OUTCOMES.has(answer.outcome))
      span.setStatus({ code: SpanStatusCode.ERROR, message: ATTEMPT_OUTCOMES[answer.outcome] });
    else if (upstreamStatus !== undefined && upstreamStatus >= 400) {
      span.setAttribute(ATTR.errorType, String(upstreamStatus));
      span.setStatus({ code: SpanStatusCode.ERROR });
    }
    attempt.end();
  }

  end(status: number): void {
    if (this.ended) return;
    this.ended = true;
    const settling = this.settling;
    if (settling)
      void settling.then(
        () => this.close(status),
        () => this.close(status),
      );
    else this.close(status);
  }

  private close(status: number): void {
    const final = this.recordedStatus ?? status;
    // An attempt still open here ended in an unforeseen throw.
    if (this.current && !this.current.ended) {
      if (this.current.failure) this.current.closeFailed(undefined);
      else {
        this.current.span.setStatus({ code: SpanStatusCode.ERROR, message: 'ended without an answer' });
        this.current.end();
      }
    }
    this.span.setAttribute(ATTR.httpStatus, final);
    // The gateway's own refusals (limits, authentication, plugin faults) are errors of this span, 4xx
    // included, so they stand out in a trace search; a relayed upstream 4xx is not.
    if (this.refusedCode !== undefined) this.span.setStatus({ code: SpanStatusCode.ERROR, message: this.refusedCode });
    else if (final >= 500 || this.answerFailed) this.span.setStatus({ code: SpanStatusCode.ERROR });
    this.span.end();
  }
}

/**
 * Opens a request's trace. Its sampling is decided once, on the request's trace id (the client's when
 * it sent a `traceparent`): an unsampled request costs that decision and no span; a sampled one gets
 * its server span, under the client's trace context when it sent one.
 */
export function startRequestTrace(kit: TraceKit, start: RequestStart): RequestTrace | UnsampledTrace {
  const fromClient = start.headers.traceparent !== undefined;
  if (!fromClient && kit.sampler.rootsUnsampled) return unsampled(kit.ids.traceId(), kit.ids);
  const parent = fromClient
    ? withoutTraceState(kit.propagator.extract(ROOT_CONTEXT, start.headers, headerGetter))
    : ROOT_CONTEXT;
  const traceId = trace.getSpanContext(parent)?.traceId ?? kit.ids.traceId();
  const name = `${start.method} ${start.route}`;
  const attributes = {
    [ATTR.httpMethod]: start.method,
    [ATTR.httpRoute]: start.route,
    [ATTR.urlPath]: start.path,
    [ATTR.requestId]: start.requestId,
  };
  const { decision } = kit.sampler.shouldSample(parent, traceId, name, SpanKind.SERVER, attributes, []);
  if (decision === SamplingDecision.NOT_RECORD) return unsampled(traceId, kit.ids);
  if (parent === ROOT_CONTEXT) kit.ids.useNext(traceId);
  const span = kit.tracer.startSpan(name, { kind: SpanKind.SERVER, attributes }, parent);
  return new OtelRequestTrace(kit, span, parent);
}

/** The client's trace context without its `tracestate`: the gateway passes a client's entries on to no one. */
function withoutTraceState(context: Context): Context {
  const client = trace.getSpanContext(context);
  return client?.traceState === undefined
    ? context
    : trace.setSpanContext(context, { ...client, traceState: undefined });
}

const origins = new Map<string, { hostname: string; port: number | undefined }>();

/** `server.address` and `server.port` of an origin, parsed once per origin. */
function originParts(origin: string): { hostname: string; port: number | undefined } {
  let parts = origins.get(origin);
  if (parts === undefined) {
    try {
      const url = new URL(origin);
      parts = { hostname: url.hostname, port: url.port ? Number(url.port) : url.protocol === 'https:' ? 443 : 80 };
    } catch {
      parts = { hostname: origin, port: undefined };
    }
    if (origins.size < 1000) origins.set(origin, parts);
  }
  return parts;
}

const SHARED = Buffer.allocUnsafe(16);

/** `bytes` random bytes as lower-case hex, never all zero (a W3C id must not be). */
function randomHex(bytes: 8 | 16): string {
  for (let index = 0; index < bytes; index += 4) SHARED.writeUInt32BE((Math.random() * 2 ** 32) >>> 0, index);
  if (
    SHARED.readUInt32BE(0) === 0 &&
    SHARED.readUInt32BE(4) === 0 &&
    (bytes === 8 || (SHARED.readUInt32BE(8) === 0 && SHARED.readUInt32BE(12) === 0))
  ) {
    SHARED[bytes - 1] = 1;
  }
  return SHARED.toString('hex', 0, bytes);
}

/** An unsampled trace in `traceId`: only the `traceparent` its upstream calls carry, a span id of its own, flags 00. */
function unsampled(traceId: string, ids: TraceIds): UnsampledTrace {
  return { recording: false, traceparent: `00-${traceId}-${ids.generateSpanId()}-00` };
}

/**
 * Trace and span ids as the SDK's random generator makes them, with one addition: the trace id a
 * request's sampling was decided on can be handed to the next root span, so that the span the SDK
 * makes for a sampled request is in the trace that decision was made for.
 */
export class TraceIds implements IdGenerator {
  private next: string | undefined;

  /** A fresh trace id. */
  traceId(): string {
    return randomHex(16);
  }

  /** The trace id the next root span takes. */
  useNext(traceId: string): void {
    this.next = traceId;
  }

  generateTraceId(): string {
    const id = this.next ?? randomHex(16);
    this.next = undefined;
    return id;
  }

  generateSpanId(): string {
    return randomHex(8);
  }
}

/**
 * Traces the gateway's model requests from its events: a server span per exchange (a child of the
 * client's `traceparent`), an event for authentication, the reservation, the cache and the
 * settlement, and a GenAI client span per upstream attempt, whose W3C trace context the attempt sends
 * upstream. A sampled exchange is asked (`exchange.watch`) for what its answer says of itself, and for
 * its messages when the operator opted in to capture them. Gives back the call that unsubscribes.
 */
export function traceExchanges(source: EventSource, tracing: RequestTracing): () => void {
  const traces = new ExchangeTraces(tracing);
  // Everything after the start is followed on the `watched` channels: only a sampled exchange publishes there.
  const off = [
    EVENTS.exchangeStart.subscribe(source, (exchange) => traces.start(exchange)),
    EVENTS.authenticated.subscribeWatched(source, (exchange) => traces.authenticated(exchange)),
    EVENTS.reserved.subscribeWatched(source, ({ exchange, meters }) =>
      traces.of(exchange)?.event(EVENT.reserve, { [ATTR.limitKinds]: meters }),
    ),
    EVENTS.cache.subscribeWatched(source, ({ exchange, result }) =>
      traces.of(exchange)?.event(EVENT.cacheLookup, { [ATTR.cacheResult]: result }),
    ),
    EVENTS.attemptStart.subscribeWatched(source, (message) => traces.attempt(message)),
    EVENTS.attemptHeaders.subscribeWatched(source, ({ exchange, status }) =>
      traces.attemptOf(exchange)?.responded(status),
    ),
    EVENTS.attemptFirstContent.subscribeWatched(source, ({ exchange }) => traces.attemptOf(exchange)?.firstContent()),
    EVENTS.attemptError.subscribeWatched(source, ({ exchange, reason, status }) =>
      traces.attemptOf(exchange)?.failed(reason, status),
    ),
    EVENTS.pluginFault.subscribeWatched(source, ({ exchange, plugin, hook }) =>
      traces.of(exchange)?.pluginFault(plugin, hook),
    ),
    EVENTS.settled.subscribeWatched(source, ({ exchange, figures }) => traces.of(exchange)?.settled(figures)),
    EVENTS.exchangeRecorded.subscribeWatched(source, (message) => traces.recorded(message)),
    EVENTS.exchangeEnd.subscribeWatched(source, (message) => traces.end(message)),
  ];
  return () => off.forEach((unsubscribe) => unsubscribe());
}

/** Each limit alert this gateway fires as a span of its own ({@link LIMIT_ALERT_SPAN}); gives back the unsubscribe. */
export function traceLimitAlerts(
  source: EventSource,
  span: (name: string, attributes: TraceAttributes) => void,
): () => void {
  return EVENTS.limitAlert.subscribe(source, (alert) =>
    span(LIMIT_ALERT_SPAN, {
      [ATTR.alertId]: alert.id,
      [ATTR.limitScope]: alert.scope,
      [ATTR.limitOwner]: alert.owner,
      [ATTR.team]: alert.team ?? undefined,
      [ATTR.limitKind]: alert.kind,
      [ATTR.limitPeriod]: alert.period,
      [ATTR.alertThreshold]: alert.threshold,
      [ATTR.alertUsed]: alert.used,
      [ATTR.alertLimit]: alert.limit,
      [ATTR.alertUnit]: alert.unit,
    }),
  );
}

/** The trace of each sampled exchange in flight, and the span of its latest attempt. */
class ExchangeTraces {
  private readonly traces = new WeakMap<ExchangeView, RequestTrace>();
  private readonly attempts = new WeakMap<ExchangeView, AttemptTrace>();

  constructor(private readonly tracing: RequestTracing) {}

  of(exchange: ExchangeView): RequestTrace | undefined {
    return this.traces.get(exchange);
  }

  attemptOf(exchange: ExchangeView): AttemptTrace | undefined {
    return this.attempts.get(exchange);
  }

  /** Decides the exchange's sampling: an unsampled one gets its `traceparent` and is not followed further. */
  start(exchange: ExchangeView): void {
    const { headers, method, route, path, requestId } = exchange;
    const trace = this.tracing.startRequest({ headers, method, route: route.path, path, requestId });
    const { watch } = exchange;
    if (!trace.recording) {
      watch.traceparent = trace.traceparent;
      return;
    }
    this.traces.set(exchange, trace);
    watch.events = true;
    watch.answer = true;
    if (trace.capturesContent) watch.content = true;
  }

  authenticated(exchange: ExchangeView): void {
    const trace = this.of(exchange);
    if (!trace) return;
    trace.set({ [ATTR.keyId]: exchange.caller?.id, [ATTR.team]: exchange.caller?.team?.name });
    trace.event(EVENT.auth);
  }

  /**
   * Opens the attempt's span (a `traceparent` alone when unsampled) and hands its trace context back on the message.
   */
  attempt(message: AttemptStartMessage): void {
    const trace = this.traces.get(message.exchange);
    if (!trace) return;
    const span = trace.attempt(message);
    this.attempts.set(message.exchange, span);
    message.traceparent = span.traceparent;
  }

  recorded({ exchange, record, recorded, costUsd }: ExchangeRecordedMessage): void {
    const trace = this.of(exchange);
    if (!trace) return;
    trace.recorded({
      status: record.status,
      outcome: record.outcome,
      model: record.resolved.canonicalId,
      usage: record.usage,
      costUsd: costUsd(),
      facts: exchange.facts,
      upstreamStatus: exchange.upstreamStatus,
      // What a guardrail blocked is never exported, not even the part of it that went out before the block.
      outputText: record.outcome === 'guardrail_blocked' ? undefined : exchange.outputText,
      cacheHit: record.cacheHit !== undefined,
      attempts: record.attempts ?? 0,
      settling: recorded,
    });
  }

  end({ exchange, status, errorCode, limit }: ExchangeEndMessage): void {
    const trace = this.traces.get(exchange);
    if (!trace) return;
    if (errorCode !== undefined) trace.refused(errorCode, limit);
    trace.end(status);
  }
}
