import { EVENTS, type EventSource } from '../../core/diagnostics.ts';
import type { ExchangeView } from '../../core/exchange.ts';
import type { AttemptTrace, RequestTrace, RequestTracing } from './request-trace.ts';
import { ATTR, EVENT } from './span-names.ts';

/**
 * Traces the gateway's model requests from its events: a server span per exchange (a child of the
 * client's `traceparent`), an event for authentication, the reservation, the cache and the
 * settlement, and a GenAI client span per upstream attempt, whose W3C trace context the attempt sends
 * upstream. A sampled exchange is asked (`exchange.watch`) for what its answer says of itself, and for
 * its messages when the operator opted in to capture them. Gives back the call that unsubscribes.
 */
export function traceExchanges(source: EventSource, tracing: RequestTracing): () => void {
  const traces = new WeakMap<ExchangeView, RequestTrace>();
  const attempts = new WeakMap<ExchangeView, AttemptTrace>();
  const recording = (exchange: ExchangeView): RequestTrace | undefined => {
    const trace = traces.get(exchange);
    return trace?.recording ? trace : undefined;
  };
  const off = [
    EVENTS.exchangeStart.subscribe(source, (exchange) => {
      const { headers, method, route, path, requestId } = exchange;
      const trace = tracing.startRequest({ headers, method, route: route.path, path, requestId });
      traces.set(exchange, trace);
      if (!trace.recording) return;
      exchange.watch.answer = true;
      if (trace.capturesContent) exchange.watch.content = true;
    }),
    EVENTS.authenticated.subscribe(source, (exchange) => {
      const trace = recording(exchange);
      if (!trace) return;
      trace.set({ [ATTR.keyId]: exchange.caller?.id, [ATTR.team]: exchange.caller?.team?.name });
      trace.event(EVENT.auth);
    }),
    EVENTS.reserved.subscribe(source, ({ exchange, meters }) => recording(exchange)?.event(EVENT.reserve, { [ATTR.limitKinds]: meters })),
    EVENTS.cache.subscribe(source, ({ exchange, result }) => recording(exchange)?.event(EVENT.cacheLookup, { [ATTR.cacheResult]: result })),
    EVENTS.attemptStart.subscribe(source, (message) => {
      const trace = traces.get(message.exchange);
      if (!trace) return;
      const span = trace.attempt(message);
      attempts.set(message.exchange, span);
      message.traceparent = span.traceparent;
    }),
    EVENTS.attemptHeaders.subscribe(source, ({ exchange, status }) => attempts.get(exchange)?.responded(status)),
    EVENTS.attemptFirstContent.subscribe(source, ({ exchange }) => attempts.get(exchange)?.firstContent()),
    EVENTS.attemptError.subscribe(source, ({ exchange, reason, status }) => attempts.get(exchange)?.failed(reason, status)),
    EVENTS.pluginFault.subscribe(source, ({ exchange, plugin, hook }) => recording(exchange)?.pluginFault(plugin, hook)),
    EVENTS.settled.subscribe(source, ({ exchange, figures }) => recording(exchange)?.settled(figures)),
    EVENTS.exchangeRecorded.subscribe(source, ({ exchange, record, recorded, costUsd }) => {
      const trace = recording(exchange);
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
    }),
    EVENTS.exchangeEnd.subscribe(source, ({ exchange, status, errorCode, limit }) => {
      const trace = traces.get(exchange);
      if (!trace) return;
      if (errorCode !== undefined) trace.refused(errorCode, limit);
      trace.end(status);
    }),
  ];
  return () => off.forEach((unsubscribe) => unsubscribe());
}
