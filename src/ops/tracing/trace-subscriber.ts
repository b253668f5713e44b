import {
  EVENTS,
  type AttemptStartMessage,
  type EventSource,
  type ExchangeEndMessage,
  type ExchangeRecordedMessage,
} from '../../core/diagnostics.ts';
import type { ExchangeView } from '../../core/exchange.ts';
import type { AttemptTrace, RequestTrace, RequestTracing, TraceAttributes } from './request-trace.ts';
import { ATTR, EVENT, LIMIT_ALERT_SPAN } from './span-names.ts';

/**
 * Traces the gateway's model requests from its events: a server span per exchange (a child of the
 * client's `traceparent`), an event for authentication, the reservation, the cache and the
 * settlement, and a GenAI client span per upstream attempt, whose W3C trace context the attempt sends
 * upstream. A sampled exchange is asked (`exchange.watch`) for what its answer says of itself, and for
 * its messages when the operator opted in to capture them. Gives back the call that unsubscribes.
 */
export function traceExchanges(source: EventSource, tracing: RequestTracing): () => void {
  const traces = new ExchangeTraces(tracing);
  const off = [
    EVENTS.exchangeStart.subscribe(source, (exchange) => traces.start(exchange)),
    EVENTS.authenticated.subscribe(source, (exchange) => traces.authenticated(exchange)),
    EVENTS.reserved.subscribe(source, ({ exchange, meters }) =>
      traces.recording(exchange)?.event(EVENT.reserve, { [ATTR.limitKinds]: meters }),
    ),
    EVENTS.cache.subscribe(source, ({ exchange, result }) =>
      traces.recording(exchange)?.event(EVENT.cacheLookup, { [ATTR.cacheResult]: result }),
    ),
    EVENTS.attemptStart.subscribe(source, (message) => traces.attempt(message)),
    EVENTS.attemptHeaders.subscribe(source, ({ exchange, status }) => traces.attemptOf(exchange)?.responded(status)),
    EVENTS.attemptFirstContent.subscribe(source, ({ exchange }) => traces.attemptOf(exchange)?.firstContent()),
    EVENTS.attemptError.subscribe(source, ({ exchange, reason, status }) =>
      traces.attemptOf(exchange)?.failed(reason, status),
    ),
    EVENTS.pluginFault.subscribe(source, ({ exchange, plugin, hook }) =>
      traces.recording(exchange)?.pluginFault(plugin, hook),
    ),
    EVENTS.settled.subscribe(source, ({ exchange, figures }) => traces.recording(exchange)?.settled(figures)),
    EVENTS.exchangeRecorded.subscribe(source, (message) => traces.recorded(message)),
    EVENTS.exchangeEnd.subscribe(source, (message) => traces.end(message)),
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

/** The trace of each exchange in flight, and the span of its latest attempt. */
class ExchangeTraces {
  private readonly traces = new WeakMap<ExchangeView, RequestTrace>();
  private readonly attempts = new WeakMap<ExchangeView, AttemptTrace>();

  constructor(private readonly tracing: RequestTracing) {}

  /** The exchange's trace when it is sampled (an unsampled one records nothing). */
  recording(exchange: ExchangeView): RequestTrace | undefined {
    const trace = this.traces.get(exchange);
    return trace?.recording ? trace : undefined;
  }

  attemptOf(exchange: ExchangeView): AttemptTrace | undefined {
    return this.attempts.get(exchange);
  }

  start(exchange: ExchangeView): void {
    const { headers, method, route, path, requestId } = exchange;
    const trace = this.tracing.startRequest({ headers, method, route: route.path, path, requestId });
    this.traces.set(exchange, trace);
    if (!trace.recording) return;
    exchange.watch.answer = true;
    if (trace.capturesContent) exchange.watch.content = true;
  }

  authenticated(exchange: ExchangeView): void {
    const trace = this.recording(exchange);
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
    const trace = this.recording(exchange);
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
