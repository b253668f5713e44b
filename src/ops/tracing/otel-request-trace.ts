import {
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Context,
  type Span,
  type TextMapPropagator,
  type Tracer,
} from '@opentelemetry/api';
import type { LimitRefusal } from '../../core/gateway-errors.ts';
import type { SettledFigures, UsageOutcome } from '../../core/exchange.ts';
import { SamplingDecision, type Sampler } from '@opentelemetry/sdk-trace-base';
import type {
  AttemptStart,
  AttemptTrace,
  RecordedAnswer,
  RequestStart,
  RequestTrace,
  TraceAttributes,
} from './request-trace.ts';
import type { TraceIds } from './trace-ids.ts';
import { ATTR, EVENT } from './span-names.ts';

/**
 * What every request's trace shares: the tracer, its sampler and ids, the propagator, whether message text is captured.
 */
export interface TraceKit {
  readonly tracer: Tracer;
  /** The tracer's own sampler, asked once per request before any span is made. */
  readonly sampler: Sampler;
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

/** An attempt of an unsampled request: its `traceparent` only. */
class UnsampledAttempt implements AttemptTrace {
  constructor(readonly traceparent: string) {}

  responded(): void {}
  firstContent(): void {}
  failed(): void {}
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
 * The trace of an unsampled request: nothing is recorded and no span is made, but each attempt still
 * carries a `traceparent` (the request's trace, a span id of its own, not sampled).
 */
export class UnsampledRequestTrace implements RequestTrace {
  readonly recording = false;
  readonly capturesContent = false;

  constructor(
    private readonly ids: TraceIds,
    private readonly traceId: string,
  ) {}

  event(): void {}
  set(): void {}
  refused(): void {}
  pluginFault(): void {}
  recorded(): void {}
  end(): void {}
  settled(): void {}

  attempt(): AttemptTrace {
    return new UnsampledAttempt(`00-${this.traceId}-${this.ids.generateSpanId()}-00`);
  }
}

/**
 * Opens a request's trace. Its sampling is decided once, on the request's trace id (the client's when
 * it sent a `traceparent`): an unsampled request costs that decision and no span; a sampled one gets
 * its server span, under the client's trace context when it sent one.
 */
export function startRequestTrace(kit: TraceKit, start: RequestStart): RequestTrace {
  const parent =
    start.headers.traceparent === undefined
      ? ROOT_CONTEXT
      : withoutTraceState(kit.propagator.extract(ROOT_CONTEXT, start.headers, headerGetter));
  const traceId = trace.getSpanContext(parent)?.traceId ?? kit.ids.traceId();
  const name = `${start.method} ${start.route}`;
  const attributes = {
    [ATTR.httpMethod]: start.method,
    [ATTR.httpRoute]: start.route,
    [ATTR.urlPath]: start.path,
    [ATTR.requestId]: start.requestId,
  };
  const { decision } = kit.sampler.shouldSample(parent, traceId, name, SpanKind.SERVER, attributes, []);
  if (decision === SamplingDecision.NOT_RECORD) return new UnsampledRequestTrace(kit.ids, traceId);
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
