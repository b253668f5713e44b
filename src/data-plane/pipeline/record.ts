import { EVENTS } from '../../core/diagnostics.ts';
import type { ExchangeRecord, SettledFigures, Settlement, UsageAccounting } from '../../core/exchange.ts';
import type { Reservation } from '../../usage/reservation.ts';
import type { Exchange, Stage } from './exchange.ts';

/**
 * The record stage, around everything after the model is known: once the pipeline unwinds, an
 * exchange that ended (an answer, a refusal by a guardrail, an upstream failure, a cache hit) is handed
 * to usage accounting as its one usage record, its reservation with it (settled to what the record
 * stores), and told as the `exchange:recorded` event. An exchange that ended with no ending set (a
 * limit's refusal, a bad output cap, the gateway's own fault) leaves no usage record.
 */
export function record(usage: UsageAccounting): Stage {
  return async function record(exchange, next) {
    try {
      await next(exchange);
    } finally {
      if (exchange.ending !== undefined) hand(usage, exchange);
    }
  };
}

function hand(usage: UsageAccounting, exchange: Exchange): void {
  const ending = exchange.ending!;
  const { upstream, reservation } = exchange;
  const { tally } = upstream;
  const end = performance.now();
  const model = exchange.model!;
  const record: ExchangeRecord = {
    keyId: exchange.caller?.id,
    ...(exchange.endUser !== undefined && { endUser: exchange.endUser }),
    route: exchange.route.id,
    resolved: model,
    status: ending.status,
    stream: exchange.body?.body.stream === true,
    latencyMs: end - exchange.startedAt,
    requestId: exchange.requestId,
    upstreamMs: upstream.spentMs ?? (upstream.startedAt === 0 ? 0 : (upstream.doneAt || end) - upstream.startedAt),
    firstByteMs: exchange.firstByteAt === 0 ? undefined : exchange.firstByteAt - exchange.startedAt,
    usage: ending.usage,
    consumed: ending.consumed,
    outcome: ending.outcome,
    endpoint: tally.endpoint?.name,
    attempts: tally.count,
    unreportedAttempts: tally.unreported,
    requestBody:
      exchange.estimateBody ?? (() => JSON.parse(exchange.body!.bytes.toString('utf8')) as Record<string, unknown>),
    responseText: () => exchange.streamed?.value() ?? '',
    settlement: reservation && EVENTS.settled.activeFor(exchange) ? told(exchange, reservation) : reservation,
    ...(upstream.firstContentAt > 0 && { timeToFirstChunkMs: upstream.firstContentAt - upstream.attemptAt }),
    ...(upstream.firstContentAt > 0 &&
      exchange.streamEvents > 1 && {
        timePerOutputChunkMs: (end - upstream.firstContentAt) / (exchange.streamEvents - 1),
      }),
    ...(exchange.cacheHit && { cacheHit: exchange.cacheHit }),
    ...(exchange.guardrails?.marks.length ? { guardrails: exchange.guardrails.marks } : {}),
  };
  reservation?.handOver();
  exchange.recorded = true;
  const recorded = usage.record(record);
  if (EVENTS.exchangeRecorded.activeFor(exchange)) {
    const costUsd = () => (ending.usage && !exchange.cacheHit ? usage.charge(ending.usage, model).costUsd : undefined);
    EVENTS.exchangeRecorded.publish({ exchange, record, recorded, costUsd });
  }
}

/** A reservation whose settlement is told as the `exchange:settled` event. */
function told(exchange: Exchange, inner: Reservation): Settlement {
  return {
    settle(figures: SettledFigures | undefined) {
      EVENTS.settled.publish({ exchange, figures, meters: inner.meters });
      inner.settle(figures);
    },
  };
}
